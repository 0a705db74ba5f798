"""The DOCX reader: the body's paragraphs, headings, lists and tables in document order, as Markdown.

Headings come from the paragraph style (Title, Heading 1-6, styles based on them) or an outline level; list
paragraphs (numbering on the paragraph or its style) become `-`/`1.` items nested by level. Tables become pipe
tables; a merged cell's text is repeated in every grid cell it covers; a table inside a cell is flattened to its
text. Text boxes are read where they are anchored (after their paragraph). Headers, footers, footnotes and comments
are not read: they repeat on every page or sit outside the running text.
"""
from __future__ import annotations

import functools
import io
import re

from rag.sources.formats import Extracted, ExtractOptions
from rag.sources.formats.containers import check_office, library_errors, require_text
from rag.sources.formats.markdown import Blocks, heading, inline, list_item, table

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_STYLE_DEPTH = re.compile(r"^List(?:Bullet|Number|Continue)?([2-9])$", re.IGNORECASE)
_TEXT_TAGS = {f"{{{W}}}t": None, f"{{{W}}}tab": "\t", f"{{{W}}}br": "\n", f"{{{W}}}cr": "\n"}
_TC, _TCPR, _GRID_SPAN, _VMERGE = (f"{{{W}}}{tag}" for tag in ("tc", "tcPr", "gridSpan", "vMerge"))
_GRID_BEFORE = f"{{{W}}}trPr/{{{W}}}gridBefore"
_SKIP_ANCESTORS = {f"{{{W}}}txbxContent", f"{{{MC}}}Fallback", f"{{{W}}}del"}


def _w(tag: str) -> str:
    return f"{{{W}}}{tag}"


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """The document's body as Markdown; title from the core properties, else the first heading."""
    check_office(data, "DOCX")
    with library_errors("DOCX"):
        import docx

        document = docx.Document(io.BytesIO(data))
        reader = _Reader(_Styles(document), _Numbering(document))
        blocks = Blocks()
        for element in _plain(document.element).find(_w("body")).iterchildren():
            reader.element(element, blocks)
        reader.flush(blocks)
        title = inline(document.core_properties.title or "") or reader.first_heading
        return require_text(blocks.extracted(title=title or None))


class _Styles:
    """Heading level and list kind of each paragraph style, following `basedOn`."""

    def __init__(self, document) -> None:
        self._by_id = {}
        for style in document.styles.element.findall(_w("style")):
            self._by_id[style.get(_w("styleId"))] = style
        # each style is resolved once per document, not once per paragraph
        self.heading_level = functools.cache(self._heading_level)
        self.numbering = functools.cache(self._numbering)

    def _heading_level(self, style_id: str | None) -> int | None:
        for style in self._chain(style_id):
            name = style.find(_w("name"))
            for label in (name.get(_w("val")) if name is not None else "", style.get(_w("styleId")) or ""):
                if label.lower() == "title":
                    return 1
                match = _HEADING_STYLE.match(label)
                if match:
                    return min(int(match.group(1)), 6)
            level = _outline(style.find(f"{_w('pPr')}/{_w('outlineLvl')}"))
            if level:
                return level
        return None

    def _numbering(self, style_id: str | None) -> tuple[str | None, int]:
        for style in self._chain(style_id):
            num = style.find(f"{_w('pPr')}/{_w('numPr')}")
            if num is not None:
                return _val(num.find(_w("numId"))), _count(num.find(_w("ilvl")), 0)
        return None, 0

    def _chain(self, style_id: str | None):
        seen = set()
        while style_id and style_id in self._by_id and style_id not in seen:
            seen.add(style_id)
            style = self._by_id[style_id]
            yield style
            style_id = _val(style.find(_w("basedOn")))


class _Numbering:
    """Whether a list (numId, level) is bulleted, from the numbering part."""

    def __init__(self, document) -> None:
        self._formats: dict[tuple[str, int], str] = {}
        try:
            root = _plain(document.part.numbering_part.element)
        except (KeyError, NotImplementedError):
            return
        abstract = {a.get(_w("abstractNumId")): a for a in root.findall(_w("abstractNum"))}
        for num in root.findall(_w("num")):
            levels = abstract.get(_val(num.find(_w("abstractNumId"))))
            for lvl in levels.findall(_w("lvl")) if levels is not None else ():
                fmt = _val(lvl.find(_w("numFmt"))) or "decimal"
                self._formats[(num.get(_w("numId")), _digits(lvl.get(_w("ilvl")), 0))] = fmt

    def bulleted(self, num_id: str, level: int) -> bool | None:
        fmt = self._formats.get((num_id, level))
        return None if fmt is None else fmt in ("bullet", "none")


class _Reader:
    """Walks body elements into blocks, counting numbered list items per list and level."""

    def __init__(self, styles: _Styles, numbering: _Numbering) -> None:
        self.styles, self.numbering = styles, numbering
        self.first_heading: str | None = None
        self._counters: dict[str, list[int]] = {}
        self._items: list[str] = []  # consecutive list items make one block

    def element(self, element, blocks: Blocks) -> None:
        if element.tag == _w("p"):
            text, is_item = self.paragraph(element)
            if is_item:
                self._items.append(text)
            elif text:
                self.flush(blocks)
                blocks.add(text)
            for box in _text_boxes(element):
                for child in box.iterchildren():
                    self.element(child, blocks)
        elif element.tag == _w("tbl"):
            self.flush(blocks)
            blocks.add(table(_table_rows(element)))
        elif element.tag == _w("sdt"):
            for child in element.iterchildren(_w("sdtContent")):
                for inner in child.iterchildren():
                    self.element(inner, blocks)

    def flush(self, blocks: Blocks) -> None:
        blocks.add("\n".join(self._items))
        self._items = []

    def paragraph(self, p) -> tuple[str, bool]:
        """The paragraph's Markdown line and whether it is a list item."""
        text = inline(_paragraph_text(p))
        if not text:
            return "", False
        ppr = p.find(_w("pPr"))
        style_id = _val(ppr.find(_w("pStyle"))) if ppr is not None else None
        own_level = _outline(ppr.find(_w("outlineLvl"))) if ppr is not None else None
        level = own_level or self.styles.heading_level(style_id)
        if level:
            self.first_heading = self.first_heading or text
            return heading(level, text), False
        num_id, depth = self._list(ppr, style_id)
        if num_id is None:
            return text, False
        bulleted = self.numbering.bulleted(num_id, depth)
        if bulleted is None:
            bulleted = "number" not in (style_id or "").lower()
        counts = self._counters.setdefault(num_id, [])
        del counts[depth + 1:]
        counts.extend([0] * (depth + 1 - len(counts)))
        counts[depth] += 1
        return list_item(text, depth, None if bulleted else counts[depth]), True

    def _list(self, ppr, style_id: str | None) -> tuple[str | None, int]:
        num = ppr.find(_w("numPr")) if ppr is not None else None
        style_num, style_depth = self.styles.numbering(style_id)
        if num is not None:
            num_id = _val(num.find(_w("numId"))) or style_num
            result = (num_id, _count(num.find(_w("ilvl")), style_depth))
        else:
            result = (style_num, style_depth)
        if result[0] in (None, "0"):  # numId 0 switches numbering off
            return None, 0
        # "List Bullet 2"-style paragraphs carry their depth in the style name, often with ilvl 0
        named = _STYLE_DEPTH.search(style_id or "")
        return result[0], min(max(result[1], int(named.group(1)) - 1 if named else 0), 8)


def _plain(element):
    """A copy of a part's tree with plain lxml elements: python-docx's element classes make each access slow."""
    from lxml import etree

    return etree.fromstring(etree.tostring(element), etree.XMLParser(resolve_entities=False, no_network=True))


def _outline(element) -> int | None:
    """A heading level from a `w:outlineLvl` (0-based; 9 means body text)."""
    level = _count(element, 9)
    return min(level + 1, 6) if level < 9 else None


def _count(element, default: int) -> int:
    """A level, span or skip count from a `w:val`."""
    return _digits(_val(element), default)


def _digits(value: str | None, default: int) -> int:
    """A whole number from an attribute, capped so a hostile value cannot build a huge row."""
    return min(int(value), 1000) if value and value.isascii() and value.isdigit() else default


def _val(element) -> str | None:
    return None if element is None else element.get(_w("val"))


def _paragraph_text(p) -> str:
    """The paragraph's own run text: not its text boxes, not deleted revisions, not compatibility fallbacks."""
    parts = []
    for node in p.iter(*_TEXT_TAGS):
        if node.getparent().tag != _w("r") or _inside_skipped(node, p):
            continue
        parts.append(_TEXT_TAGS[node.tag] or node.text or "")
    return "".join(parts)


def _inside_skipped(node, stop) -> bool:
    for ancestor in node.iterancestors():
        if ancestor is stop:
            return False
        if ancestor.tag in _SKIP_ANCESTORS:
            return True
    return False


def _text_boxes(p) -> list:
    return [box for box in p.iter(_w("txbxContent")) if not _inside_skipped(box, p)]


def _table_rows(tbl) -> list[list[str]]:
    """Grid rows: a horizontally merged cell repeats across its span, a vertically merged one down its rows."""
    rows: list[list[str]] = []
    above: dict[int, str] = {}
    for tr in tbl.iterchildren(_w("tr")):
        row: list[str] = [""] * _count(tr.find(_GRID_BEFORE), 0)
        for tc in tr.iterchildren(_TC):
            tcpr = tc.find(_TCPR)
            span = _count(tcpr.find(_GRID_SPAN), 1) if tcpr is not None else 1
            merge = tcpr.find(_VMERGE) if tcpr is not None else None
            continued = merge is not None and _val(merge) in (None, "continue")
            text = above.get(len(row), "") if continued else _cell_text(tc)
            for _ in range(span):
                above[len(row)] = text
                row.append(text)
        rows.append(row)
    return rows


def _cell_text(tc) -> str:
    """A cell's paragraphs joined by spaces; a nested table's cells are flattened into the same line."""
    return inline(" ".join(_paragraph_text(p) for p in tc.iter(_w("p")) if not _inside_skipped(p, tc)))
