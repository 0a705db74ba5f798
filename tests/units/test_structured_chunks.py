"""Sub-chunks follow a Markdown text's structure: rows whole, headers repeated, headings open what they head."""
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.sources.formats.markdown import heading, table
from rag.text.structure import blocks, marker, structure
from rag.units.subchunk_recipe import SubchunkRecipe, embedded_text


@pytest.fixture(scope="module")
def counter():
    return default_counter()


def report() -> str:
    rows = [["Region", "Quarter", "Revenue (EUR)", "Notes"]] + [
        [f"Region {i}", f"Q{i % 4 + 1}", f"{1000 + 37 * i}", f"shipment batch {i} arrived on schedule"]
        for i in range(60)]
    return "\n\n".join([
        heading(1, "Annual report"), "The year closed with growth in every region.",
        heading(2, "Revenue"), "Revenue by region and quarter follows.", table(rows),
        marker("p.2"), heading(2, "Outlook"), heading(3, "Risks"),
        "Currency movements remain the largest risk. Supply is stable."])


def test_a_table_is_never_cut_inside_a_row_and_every_chunk_in_it_repeats_the_header(counter):
    text = report()
    header = structure(text).tables[0].header
    row_lines = [ln for ln in text.split("\n") if ln.startswith("| Region ")]
    chunks = SubchunkRecipe(64, 80).spans(text, counter)
    inside = 0
    for c in chunks:
        piece = text[c.start:c.end]
        for line in piece.split("\n"):
            if line.startswith("|"):
                assert line in row_lines or line in header.split("\n"), f"a row was cut: {line!r}"
        if piece.startswith("| Region ") and not piece.startswith(header):
            inside += 1
            assert embedded_text("Annual report", text, c.start, c.end).split("\n")[1:3] == header.split("\n")
    assert inside >= 3   # the table spans several sub-chunks, each read with its columns' names


def test_a_chunk_never_starts_inside_a_heading_nor_ends_on_one(counter):
    text = report()
    headings = [(h[0], h[0] + len(h[2]) + h[1] + 1) for h in structure(text).headings]
    for c in SubchunkRecipe(64, 80).spans(text, counter):
        assert not any(s < c.start < e for s, e in headings)
        last_line = text[c.start:c.end].rstrip().split("\n")[-1]
        assert c.end == len(text.rstrip()) or not last_line.startswith("#")


def test_the_heading_path_is_a_sub_chunks_context_and_markers_are_not_embedded():
    text = report()
    start = text.index("Currency movements")
    embedded = embedded_text("Annual report", text, start, len(text))
    assert embedded.split("\n")[0] == "Annual report › Outlook › Risks"
    whole = embedded_text("Annual report", text, text.index("Revenue by"), len(text))
    assert "<!-- location" not in whole and "Outlook" in whole


def test_a_plain_text_embeds_as_before():
    assert embedded_text("Title", "One sentence. Two.", 0, 13) == "Title\nOne sentence."


def test_locations_name_the_page_a_range_lies_on():
    text = "\n".join([marker("p.1"), "First page text.", marker("p.2"), "Second page.", marker("p.3"), "Third."])
    found = structure(text)
    assert found.location(text.index("First")) == "p.1"
    assert found.location(text.index("Second"), text.index("Second") + 5) == "p.2"
    assert found.location(text.index("First"), text.index("Third") + 3) == "p.1–3"
    sheets = "\n".join([marker("sheet Budget"), "| a |", marker("sheet Staff"), "| b |"])
    assert structure(sheets).location(sheets.index("| b")) == "sheet Staff"
    assert structure("no markers at all").location(3) is None


cells = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(cells, min_size=3, max_size=3), min_size=2, max_size=30), st.integers(24, 60))
@example(rows=[["", "", ""], ["0:0:0:0:"] * 3], target=24)  # a header longer than a chunk, with its rule
def test_any_table_keeps_its_rows_whole_in_chunks(counter, rows, target):
    rendered = table(rows)
    if not rendered:
        return
    text = "# Data\n\nIntro sentence.\n\n" + rendered + "\n\nClosing sentence."
    lines = set(text.split("\n"))
    for c in SubchunkRecipe(target, target + 16).spans(text, counter):
        for line in text[c.start:c.end].split("\n"):
            row_alone = counter.count([line])[0] > target + 16
            assert line in lines or row_alone, f"cut row {line!r}"
    kinds = [b.kind for b in blocks(text)]
    assert kinds.count("row") == len(rendered.split("\n")) - 1   # header and rule are one block
