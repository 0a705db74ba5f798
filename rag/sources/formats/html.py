"""The HTML reader: headings, paragraphs, nested lists and tables of a page, as Markdown; nothing on it ever runs.

lxml's HTML parser (already installed for the Office readers) builds the tree and a small walker writes blocks
through the shared Markdown writer. Scripts, styles, <noscript>, <template>, frames, embedded objects and SVG are
removed before the walk, so neither their text nor any event-handler attribute reaches the output. Navigation,
headers and footers are kept: the page's words are its content, and no boilerplate guess can drop real text.
Encoding: a byte-order mark, else the <meta> charset, else UTF-8 with replacement characters.
"""
from __future__ import annotations

import codecs
import re

from rag.sources.formats import Extracted, ExtractError, ExtractOptions
from rag.sources.formats.containers import library_errors, require_text
from rag.sources.formats.markdown import Blocks, heading, inline, list_item, table

_SCRIPTS = ("script",)
_REMOVED = ("script", "style", "noscript", "template", "iframe", "frame", "frameset", "object", "embed", "applet",
            "svg", "math", "canvas", "head", "button", "select", "input", "textarea")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote", "address",
           "figure", "figcaption", "form", "fieldset", "dl", "dt", "dd", "body", "html", "details", "summary",
           "center", "hr", "li", "caption", "legend"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """The page as Markdown; title from <title>, else the first <h1>."""
    text = decode(data)
    if not text.strip():
        raise ExtractError("empty", "no text in the file")
    with library_errors("HTML"):
        from lxml import etree

        root = etree.fromstring(_XML_DECLARATION.sub("", text, count=1), etree.HTMLParser(no_network=True))
        if root is None:
            raise ExtractError("empty", "no text in the file")
        title_element = root.find(".//title")
        title = inline(_text(title_element)) if title_element is not None else ""
        scripts = sum(1 for _ in root.iter(*_SCRIPTS))
        etree.strip_elements(root, *_REMOVED, etree.Comment, etree.ProcessingInstruction, with_tail=False)
        walker = _Walker()
        walker.walk(root)
        walker.flush()
        dropped = ("scripts dropped (never run)",) if scripts else ()
        return require_text(walker.blocks.extracted(title=title or walker.first_h1 or None, dropped=dropped))


def decode(data: bytes) -> str:
    """The page's text: BOM, else the declared <meta> charset, else UTF-8 with replacement characters."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    declared = _META_CHARSET.search(data[:4096])
    encoding = "utf-8"
    if declared:
        try:
            encoding = codecs.lookup(declared.group(1).decode("ascii")).name
        except LookupError:
            pass
    return data.decode(encoding, errors="replace")


class _Walker:
    """Walks the element tree, gathering inline text into paragraphs and writing each block element once."""

    def __init__(self) -> None:
        self.blocks = Blocks()
        self.first_h1: str | None = None
        self._inline: list[str] = []

    def flush(self) -> None:
        self.blocks.add(inline("".join(self._inline)))
        self._inline = []

    def walk(self, element) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in _HEADINGS:
            self.flush()
            text = inline(_text(element))
            if text:
                self.first_h1 = self.first_h1 or (text if tag == "h1" else None)
                self.blocks.add(heading(_HEADINGS[tag], text))
        elif tag in ("ul", "ol", "menu"):
            self.flush()
            self.blocks.add("\n".join(_list_lines(element, 0)))
        elif tag == "table":
            self.flush()
            self._table(element)
        elif tag == "pre":
            self.flush()
            self.blocks.add("```\n" + _text(element).strip("\n").replace("```", "` ` `") + "\n```")
        elif tag in _BLOCKS:
            self.flush()
            self._children(element)
            self.flush()
        else:
            self._children(element)
            if tag in ("br", "td", "th", "img"):
                self._inline.append(" ")

    def _children(self, element) -> None:
        self._inline.append(element.text or "")
        for child in element:
            self.walk(child)
            self._inline.append(child.tail or "")

    def _table(self, element) -> None:
        caption = element.find("caption")
        if caption is not None:
            self.blocks.add(inline(_text(caption)))
        self.blocks.add(table(_table_rows(element)))


def _list_lines(element, depth: int) -> list[str]:
    """One Markdown line per <li>, nested lists indented under their item; <ol start> is kept."""
    lines: list[str] = []
    start = element.get("start", "1")
    number = int(start) if start.strip().lstrip("-").isdigit() else 1
    for item in element:
        if not isinstance(item.tag, str):
            continue
        if item.tag in ("ul", "ol"):  # a list directly inside a list (invalid, common)
            lines += _list_lines(item, depth + 1)
            continue
        own, nested = _item_text(item)
        if own:
            lines.append(list_item(own, min(depth, 8), number if element.tag == "ol" else None))
            number += 1
        for sub in nested:
            lines += _list_lines(sub, depth + 1 if own else depth)
    return lines


def _item_text(item) -> tuple[str, list]:
    """An item's own text (nested lists excluded) and its nested lists."""
    parts, nested = [item.text or ""], []
    for child in item:
        if isinstance(child.tag, str) and child.tag in ("ul", "ol"):
            nested.append(child)
        else:
            parts.append(_text(child) if isinstance(child.tag, str) else "")
            parts.append(" " if isinstance(child.tag, str) and child.tag in _BLOCKS else "")
        parts.append(child.tail or "")
    return inline("".join(parts)), nested


def _table_rows(element) -> list[list[str]]:
    """The table's own rows (not a nested table's), header rows first; colspan and rowspan repeat the cell's text."""
    own = [tr for tr in element.iter("tr") if _owner(tr) is element]
    own.sort(key=lambda tr: 0 if tr.getparent().tag == "thead" else 1)
    rows: list[list[str]] = []
    pending: dict[int, tuple[str, int]] = {}  # column -> (text, rows still covered) from a rowspan above
    for tr in own:
        row: list[str] = []
        cells = [c for c in tr if isinstance(c.tag, str) and c.tag in ("td", "th")]
        for cell in cells:
            while len(row) in pending:
                row.append(_take(pending, len(row)))
            text = inline(_text(cell))
            rowspan = _span(cell, "rowspan", 65534)
            for _ in range(_span(cell, "colspan", 1000)):
                if rowspan > 1:
                    pending[len(row)] = (text, rowspan - 1)
                row.append(text)
        while len(row) in pending:
            row.append(_take(pending, len(row)))
        rows.append(row)
    return rows


def _text(element) -> str:
    return "".join(element.itertext())


def _take(pending: dict[int, tuple[str, int]], column: int) -> str:
    text, left = pending.pop(column)
    if left > 1:
        pending[column] = (text, left - 1)
    return text


def _span(cell, name: str, cap: int) -> int:
    value = cell.get(name)
    if value is None:
        return 1
    value = value.strip()
    return min(max(int(value), 1), cap) if value.isdigit() else 1


def _owner(tr):
    for ancestor in tr.iterancestors("table"):
        return ancestor
    return None
