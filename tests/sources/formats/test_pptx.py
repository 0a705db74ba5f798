"""The PPTX reader on decks written by python-pptx: slide locations, titles, reading order, lists, tables, drops."""
import io
import struct
import zlib

import pytest
from lxml import etree
from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.util import Inches

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.pptx import extract


def _png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def _textbox(shapes, top: float, left: float, text: str):
    box = shapes.add_textbox(Inches(left), Inches(top), Inches(2), Inches(0.5))
    box.text_frame.text = text
    return box


_SMARTART = ('<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
             'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:nvGraphicFramePr>'
             '<p:cNvPr id="99" name="Diagram"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr>'
             '<p:xfrm><a:off x="0" y="0"/><a:ext cx="10" cy="10"/></p:xfrm><a:graphic>'
             '<a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/diagram"/></a:graphic>'
             '</p:graphicFrame>')


def _deck() -> bytes:
    prs = Presentation()
    first = prs.slides.add_slide(prs.slide_layouts[0])
    first.shapes.title.text = "Strategy 2025"
    first.placeholders[1].text = "Board meeting"

    bullets = prs.slides.add_slide(prs.slide_layouts[1])
    bullets.shapes.title.text = "Priorities"
    frame = bullets.placeholders[1].text_frame
    frame.text = "Grow revenue"
    for text, level in (("New markets", 1), ("Asia first", 2), ("Cut costs", 0)):
        p = frame.add_paragraph()
        p.text, p.level = text, level
    bullets.notes_slide.notes_text_frame.text = "Mention the hiring freeze."

    blank = prs.slides.add_slide(prs.slide_layouts[6])
    _textbox(blank.shapes, 3, 1, "Bottom left")
    _textbox(blank.shapes, 1, 5, "Top right")
    _textbox(blank.shapes, 1, 1, "Top left")
    group = blank.shapes.add_group_shape()
    _textbox(group.shapes, 2, 1, "Grouped middle")
    rows = [["Region", "Q1", "Q2"], ["North", "10", "12"], ["South", "7", "9"]]
    grid = blank.shapes.add_table(3, 3, Inches(1), Inches(4), Inches(6), Inches(2)).table
    for i, row in enumerate(rows):
        for j, text in enumerate(row):
            grid.cell(i, j).text = text
    blank.shapes.add_picture(io.BytesIO(_png()), Inches(0), Inches(0))
    chart = CategoryChartData()
    chart.categories = ["a", "b"]
    chart.add_series("s", (1, 2))
    blank.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, 0, 0, Inches(2), Inches(2), chart)
    blank.shapes._spTree.append(etree.fromstring(_SMARTART))
    prs.slides.add_slide(prs.slide_layouts[6])  # an empty slide gets no location
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def test_slides_titles_lists_notes_and_locations():
    out = extract(_deck(), ExtractOptions())
    assert [loc.label for loc in out.locations] == ["slide 1", "slide 2", "slide 3"]
    starts = [out.text[loc.start:] for loc in out.locations]
    assert starts[0].startswith("## Strategy 2025\n\nBoard meeting")
    assert starts[1].startswith("## Priorities\n\n- Grow revenue\n  - New markets\n    - Asia first\n- Cut costs"
                                "\n\nNotes:\nMention the hiring freeze.")
    assert starts[2].startswith("Top left")
    assert out.title == "Strategy 2025" and out.pages == 4


def test_reading_order_groups_tables_and_dropped_shapes():
    out = extract(_deck(), ExtractOptions())
    slide = out.text[out.locations[2].start:]
    assert slide.split("\n\n") == ["Top left", "Top right", "Grouped middle", "Bottom left",
                                   "| Region | Q1 | Q2 |\n|---|---|---|\n| North | 10 | 12 |\n| South | 7 | 9 |"]
    assert out.dropped == ("1 SmartArt diagrams not read", "1 charts not read", "1 pictures not read")


def test_merged_table_cells_repeat():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    grid = slide.shapes.add_table(2, 3, 0, 0, Inches(6), Inches(2)).table
    grid.cell(0, 0).merge(grid.cell(0, 1))
    grid.cell(0, 0).text, grid.cell(0, 2).text = "wide", "end"
    for j in range(3):
        grid.cell(1, j).text = f"v{j}"
    out = io.BytesIO()
    prs.save(out)
    assert extract(out.getvalue(), ExtractOptions()).text.splitlines()[0] == "| wide | wide | end |"


def test_deck_without_text_is_empty():
    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    out = io.BytesIO()
    prs.save(out)
    with pytest.raises(ExtractError) as error:
        extract(out.getvalue(), ExtractOptions())
    assert error.value.kind == "empty"
