"""The PPTX reader: one location per slide, its title as a `##` heading, its shapes' text in reading order.

Shapes are read top to bottom, then left to right; group shapes are opened. Body placeholders and paragraphs
with an explicit bullet become list items nested by indent level; tables become pipe tables (a merged cell's
text repeats across the cells it covers). Charts, pictures, SmartArt, media and embedded objects are not read:
`dropped` counts them. Footer, date and slide-number placeholders are skipped as boilerplate. Speaker notes are
kept, after a "Notes:" line at the end of their slide: presenters often put the explanation there.
"""
from __future__ import annotations

import io
from collections import Counter

from rag.sources.formats import Extracted, ExtractOptions
from rag.sources.formats.containers import check_office, library_errors, require_text
from rag.sources.formats.markdown import Blocks, heading, inline, list_item, table

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_SMARTART = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_BULLETS = {f"{{{A}}}buChar", f"{{{A}}}buAutoNum", f"{{{A}}}buBlip"}
_NUMBERED = f"{{{A}}}buAutoNum"
_NO_BULLET = f"{{{A}}}buNone"


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """Every slide as Markdown; title from the core properties, else the first slide's title."""
    check_office(data, "PPTX")
    with library_errors("PPTX"):
        from pptx import Presentation

        presentation = Presentation(io.BytesIO(data))
        blocks, dropped = Blocks(), Counter()
        first_title = None
        for number, slide in enumerate(presentation.slides, start=1):
            blocks.begin(f"slide {number}")
            title = _slide(slide, blocks, dropped)
            first_title = first_title or title
        title = inline(presentation.core_properties.title or "") or first_title
        notes = tuple(f"{count} {kind} not read" for kind, count in sorted(dropped.items()))
        return require_text(blocks.extracted(title=title or None, pages=len(presentation.slides), dropped=notes))


def _slide(slide, blocks: Blocks, dropped: Counter) -> str | None:
    """Write one slide's blocks; return its title text."""
    title_shape = slide.shapes.title
    title = inline(title_shape.text_frame.text) if title_shape is not None else ""
    if title:
        blocks.add(heading(2, title))
    for shape in _reading_order(slide.shapes):
        if title_shape is None or shape.shape_id != title_shape.shape_id:
            _shape(shape, blocks, dropped)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        paragraphs = [inline(p.text) for p in frame.paragraphs] if frame is not None else []
        if any(paragraphs):
            blocks.add("Notes:\n" + "\n".join(p for p in paragraphs if p))
    return title or None


def _reading_order(shapes) -> list:
    return sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))


def _shape(shape, blocks: Blocks, dropped: Counter) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER

    kind = shape.shape_type
    if kind == MSO_SHAPE_TYPE.GROUP:
        for child in _reading_order(shape.shapes):
            _shape(child, blocks, dropped)
    elif getattr(shape, "has_table", False) and shape.has_table:
        blocks.add(table(_table_rows(shape.table)))
    elif getattr(shape, "has_chart", False) and shape.has_chart:
        dropped["charts"] += 1
    elif kind == MSO_SHAPE_TYPE.PICTURE or shape.element.tag.endswith("}pic"):
        dropped["pictures"] += 1
    elif _is_smartart(shape):
        dropped["SmartArt diagrams"] += 1
    elif kind in (MSO_SHAPE_TYPE.MEDIA, MSO_SHAPE_TYPE.EMBEDDED_OLE_OBJECT, MSO_SHAPE_TYPE.LINKED_OLE_OBJECT):
        dropped["media or embedded objects"] += 1
    elif shape.has_text_frame:
        placeholder = shape.placeholder_format.type if shape.is_placeholder else None
        if placeholder in (PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.SLIDE_NUMBER):
            return
        bulleted = placeholder in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)
        _text_frame(shape.text_frame, bulleted, blocks)


def _is_smartart(shape) -> bool:
    data = shape.element.find(f".//{{{A}}}graphicData")
    return data is not None and data.get("uri") == _SMARTART


def _text_frame(frame, bulleted: bool, blocks: Blocks) -> None:
    """Paragraphs become lines: list items where a bullet applies, else plain paragraphs."""
    items: list[str] = []
    counters: dict[int, int] = {}
    for paragraph in frame.paragraphs:
        text = inline(paragraph.text)  # line breaks (a:br) read as "\v", fields as their text
        if not text:
            continue
        marker = _bullet(paragraph, bulleted)
        if marker is None:
            blocks.add("\n".join(items))
            items = []
            blocks.add(text)
            continue
        depth = min(paragraph.level, 8)
        counters = {level: n for level, n in counters.items() if level <= depth}
        counters[depth] = counters.get(depth, 0) + 1
        items.append(list_item(text, depth, counters[depth] if marker == "number" else None))
    blocks.add("\n".join(items))


def _bullet(paragraph, bulleted: bool) -> str | None:
    """'bullet', 'number' or None: the paragraph's own bullet setting, else what its placeholder implies."""
    ppr = paragraph._p.pPr
    if ppr is not None:
        if ppr.find(_NO_BULLET) is not None:
            return None
        if ppr.find(_NUMBERED) is not None:
            return "number"
        if any(ppr.find(tag) is not None for tag in _BULLETS):
            return "bullet"
    return "bullet" if bulleted or paragraph.level > 0 else None


def _table_rows(grid) -> list[list[str]]:
    rows: list[list[str]] = []
    for row in grid.rows:
        cells: list[str] = []
        for c, cell in enumerate(row.cells):
            tc = cell._tc
            if tc.hMerge and cells:
                cells.append(cells[-1])
            elif tc.vMerge and rows and c < len(rows[-1]):
                cells.append(rows[-1][c])
            else:
                cells.append(inline(cell.text))
        rows.append(cells)
    return rows
