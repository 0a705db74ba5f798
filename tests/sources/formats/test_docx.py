"""The DOCX reader on real files written by python-docx: order, headings, lists, tables, title, refusals."""
import io
import re

import docx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from table_cells import cells

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.docx import extract


def _bytes(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _report() -> bytes:
    d = docx.Document()
    d.add_heading("Annual Report", 0)
    d.add_paragraph("Opening words before any section.")
    d.add_heading("Revenue", 1)
    d.add_paragraph("Revenue grew in every region.")
    table = d.add_table(rows=3, cols=3)
    for i, row in enumerate([["Region", "2023", "2024"], ["North", "10", "12"], ["South", "7", "9"]]):
        for j, text in enumerate(row):
            table.cell(i, j).text = text
    d.add_paragraph("Text between the tables.")
    d.add_heading("Risks", 2)
    d.add_paragraph("Supply", style="List Bullet")
    d.add_paragraph("Single supplier of chips", style="List Bullet 2")
    d.add_paragraph("Currency", style="List Bullet")
    d.add_paragraph("Hedge the euro", style="List Number")
    d.add_paragraph("Review quarterly", style="List Number")
    d.add_heading("Deep section", 6)
    d.add_paragraph("Closing words.")
    return _bytes(d)


def test_body_order_headings_lists_and_tables():
    out = extract(_report(), ExtractOptions())
    text = out.text
    order = ["# Annual Report", "Opening words", "# Revenue", "Revenue grew", "| Region | 2023 | 2024 |",
             "| North | 10 | 12 |", "Text between the tables.", "## Risks", "- Supply", "  - Single supplier of chips",
             "- Currency", "1. Hedge the euro", "2. Review quarterly", "###### Deep section", "Closing words."]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions), text
    lines = text.splitlines()
    header = lines.index("| Region | 2023 | 2024 |")
    assert lines[header + 1] == "|---|---|---|" and lines[header + 2] == "| North | 10 | 12 |"
    assert out.title == "Annual Report"


def test_title_from_core_properties_wins():
    d = docx.Document()
    d.core_properties.title = "Official Title"
    d.add_heading("Body heading", 1)
    assert extract(_bytes(d), ExtractOptions()).title == "Official Title"


def test_merged_cells_repeat_and_nested_table_is_flattened():
    d = docx.Document()
    t = d.add_table(rows=3, cols=3)
    for i in range(3):
        for j in range(3):
            t.cell(i, j).text = f"c{i}{j}"
    t.cell(1, 0).merge(t.cell(2, 0)).text = "tall"
    t.cell(0, 1).merge(t.cell(0, 2)).text = "wide"
    t.cell(1, 1).add_table(rows=1, cols=2).cell(0, 1).text = "inner"
    text = extract(_bytes(d), ExtractOptions()).text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| c00 | wide | wide |"
    assert rows[1].startswith("| tall |") and rows[2].startswith("| tall |")
    assert "inner" in rows[1] and len(rows) == 3


def test_outline_level_makes_a_heading():
    d = docx.Document()
    p = d.add_paragraph("Outlined")
    ppr = p._p.get_or_add_pPr()
    level = docx.oxml.OxmlElement("w:outlineLvl")
    level.set(docx.oxml.ns.qn("w:val"), "2")
    ppr.append(level)
    assert extract(_bytes(d), ExtractOptions()).text == "### Outlined"


def test_text_box_is_read_after_its_paragraph():
    d = docx.Document()
    d.add_paragraph("Anchor paragraph")
    d.add_paragraph("Later paragraph")
    box = ('<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
           'xmlns:v="urn:schemas-microsoft-com:vml"><w:pict><v:shape><v:textbox><w:txbxContent>'
           '<w:p><w:r><w:t>Boxed note</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r>')
    from lxml import etree
    d.paragraphs[0]._p.append(etree.fromstring(box))
    text = extract(_bytes(d), ExtractOptions()).text
    assert text.split("\n\n") == ["Anchor paragraph", "Boxed note", "Later paragraph"]


def test_empty_document_is_refused_as_empty():
    with pytest.raises(ExtractError) as error:
        extract(_bytes(docx.Document()), ExtractOptions())
    assert error.value.kind == "empty"


_CELL = cells()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(_CELL, min_size=4, max_size=4), min_size=1, max_size=4))
def test_any_cells_round_trip_through_the_markdown_table(rows):
    rows = [["Key", "b", "c", "Last"]] + rows  # a full header row keeps the table's width
    d = docx.Document()
    table = d.add_table(rows=len(rows), cols=4)
    for i, row in enumerate(rows):
        for j, text in enumerate(row):
            table.cell(i, j).text = text
    d.add_paragraph("after")
    text = extract(_bytes(d), ExtractOptions()).text
    lines = [line for line in text.splitlines() if line.startswith("|")]
    kept = [row for row in rows if any(c.split() for c in row)]
    assert len(lines) == len(kept) + 1
    for line, row in zip([lines[0]] + lines[2:], kept):
        cells = re.split(r"(?<!\\)\|", line[1:-1])  # an escaped pipe is not a separator
        assert len(cells) == 4, line
        for cell_text, markdown in zip(row, cells):
            for word in cell_text.split():
                assert word.replace("\\", "\\\\").replace("|", "\\|") in markdown
