"""The HTML reader: structure kept, scripts and frames dropped and never run, encodings honoured."""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from table_cells import cells

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.html import extract

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Quarterly  Review</title>
<script>document.write('<p>INJECTED BY SCRIPT</p>')</script><style>p { content: 'STYLE TEXT' }</style></head>
<body onload="document.body.innerHTML='ONLOAD TEXT'">
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Results</h1><p>Sales <b>rose</b> in <a href="#" onclick="steal()">every</a> quarter.</p>
<h3>Detail</h3>
<ul><li>North<ul><li>Oslo</li><li>Bergen</li></ul></li><li>South</li></ul>
<ol start="4"><li>fourth</li><li>fifth</li></ol>
<table><thead><tr><th>Region</th><th>Sales</th></tr></thead>
<tbody><tr><td>North | East</td><td>10</td></tr><tr><td colspan="2">Total 10</td></tr></tbody></table>
<noscript>NOSCRIPT TEXT</noscript><template>TEMPLATE TEXT</template><iframe srcdoc="FRAME TEXT"></iframe>
<h6>Small print</h6><footer>Footer words</footer></body></html>"""


def test_structure_headings_lists_tables_and_title():
    out = extract(PAGE.encode(), ExtractOptions())
    blocks = out.text.split("\n\n")
    assert blocks == [
        "Home About", "# Results", "Sales rose in every quarter.", "### Detail",
        "- North\n  - Oslo\n  - Bergen\n- South", "4. fourth\n5. fifth",
        "| Region | Sales |\n|---|---|\n| North \\| East | 10 |\n| Total 10 | Total 10 |",
        "###### Small print", "Footer words"]
    assert out.title == "Quarterly Review"


def test_scripts_and_hidden_parts_never_appear():
    out = extract(PAGE.encode(), ExtractOptions())
    for hidden in ("INJECTED", "STYLE TEXT", "ONLOAD", "steal", "NOSCRIPT", "TEMPLATE", "FRAME"):
        assert hidden not in out.text
    assert out.dropped == ("scripts dropped (never run)",)
    assert extract(b"<p>plain</p>", ExtractOptions()).dropped == ()


def test_title_falls_back_to_first_h1():
    assert extract(b"<h2>Two</h2><h1>One</h1>", ExtractOptions()).title == "One"


def test_encodings_meta_bom_and_bad_bytes():
    latin = '<meta charset="iso-8859-1"><p>Café</p>'.encode("latin-1")
    assert extract(latin, ExtractOptions()).text == "Café"
    assert extract("<p>Café</p>".encode("utf-16"), ExtractOptions()).text == "Café"
    assert extract(b"<p>caf\xe9 ok</p>", ExtractOptions()).text == "caf\ufffd ok"
    assert extract('<meta charset="utf-16"><p>Café</p>'.encode(), ExtractOptions()).text == "Café"


def test_rowspan_repeats_down_the_column_and_nested_table_stays_in_its_cell():
    page = b"""<table><tr><th>A</th><th>B</th></tr><tr><td rowspan=2>tall</td><td>1</td></tr><tr><td>2</td></tr>
    <tr><td><table><tr><td>in</td><td>ner</td></tr></table></td><td>3</td></tr></table>"""
    rows = extract(page, ExtractOptions()).text.splitlines()
    assert rows == ["| A | B |", "|---|---|", "| tall | 1 |", "| tall | 2 |", "| inner | 3 |"]


def test_empty_and_script_only_pages_are_empty():
    for page in (b"", b"   ", b"<html><body><script>x()</script></body></html>"):
        with pytest.raises(ExtractError) as error:
            extract(page, ExtractOptions())
        assert error.value.kind == "empty"


_CELL = cells()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_CELL, min_size=3, max_size=3), min_size=1, max_size=5))
def test_any_cells_round_trip_through_the_markdown_table(rows):
    from html import escape
    rows = [["Head", "er", "row"]] + rows
    page = "<table>" + "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows) + "</table>"
    lines = extract(page.encode(), ExtractOptions()).text.splitlines()
    kept = [row for row in rows if any(c.split() for c in row)]
    assert len(lines) == len(kept) + 1
    for line, row in zip([lines[0]] + lines[2:], kept):
        cells = re.split(r"(?<!\\)\|", line[1:-1])
        assert len(cells) == 3, line
        for text, markdown in zip(row, cells):
            for word in text.split():
                assert word.replace("\\", "\\\\").replace("|", "\\|") in markdown



def test_deep_nesting_neither_crashes_nor_loses_what_follows():
    page = b"<p>before</p>" + b"<div>" * 1500 + b"deep text" + b"</div>" * 1500 + b"<p>after</p>"
    assert extract(page, ExtractOptions()).text == "before\n\ndeep text\n\nafter"
    lists = extract(b"<ul><li>item " * 200 + b"last", ExtractOptions())
    assert lists.text.startswith("- item\n  - item") and lists.text.endswith("last")
    beyond = extract(b"<p>kept</p>" + b"<div>" * 5000 + b"lost", ExtractOptions())
    assert beyond.text == "kept" and beyond.dropped == ("elements nested deeper than the parser's limit not read",)


def test_layout_table_is_read_as_blocks_and_keeps_its_headings():
    page = b"""<table><tr><td><h2>Menu</h2><p>Left column</p></td><td><h1>Story</h1><p>Body text.</p>
    <table><tr><th>K</th><th>V</th></tr><tr><td>a</td><td>1</td></tr></table></td></tr></table>"""
    assert extract(page, ExtractOptions()).text.split("\n\n") == [
        "## Menu", "Left column", "# Story", "Body text.", "| K | V |\n|---|---|\n| a | 1 |"]
