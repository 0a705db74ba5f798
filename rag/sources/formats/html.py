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
_MAX_LIST_DEPTH = 50
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_WHOLE = {"ul", "ol", "menu", "table", "pre", *_HEADINGS}  # written in one piece
# td, th and tr are walked only in a layout table
_BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote", "address",
           "figure", "figcaption", "form", "fieldset", "dl", "dt", "dd", "body", "html", "details", "summary",
           "center", "hr", "li", "caption", "legend", "td", "th", "tr"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """The page as Markdown; title from <title>, else the first <h1>."""
    return from_text(decode(data))


def from_text(text: str) -> Extracted:
    """An already decoded page (an e-mail's HTML body) as Markdown."""
    if not text.strip():
        raise ExtractError("empty", "no text in the file")
    with library_errors("HTML"):
        from lxml import etree

        parser = etree.HTMLParser(no_network=True, huge_tree=True)
        root = etree.fromstring(_XML_DECLARATION.sub("", text, count=1), parser)
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
        if any("depth" in entry.message.lower() for entry in parser.error_log):
            dropped += ("elements nested deeper than the parser's limit not read",)
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
    if encoding.startswith("utf-16"):  # a UTF-16 page starts with a BOM; without one the declaration is wrong
        encoding = "utf-8"
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

    def walk(self, root) -> None:
        """Depth first without recursion: a page may nest thousands of elements."""
        stack = [(root, False)]
        while stack:
            element, leaving = stack.pop()
            tag = element.tag if isinstance(element.tag, str) else ""
            if leaving:
                if tag in _BLOCKS:
                    self.flush()
                elif tag in ("br", "img"):
                    self._inline.append(" ")
                self._inline.append(element.tail or "")
            elif self._whole_block(element, tag):
                self._inline.append(element.tail or "")
            else:
                if tag in _BLOCKS:
                    self.flush()
                self._inline.append(element.text or "")
                stack.append((element, True))
                stack.extend((child, False) for child in reversed(element))

    def _whole_block(self, element, tag: str) -> bool:
        """Write a heading, list, table or preformatted block in one piece; False for any other element."""
        if tag not in _WHOLE or tag == "table" and _layout(element):
            return False
        self.flush()
        if tag in _HEADINGS:
            text = inline(_text(element))
            if text:
                self.first_h1 = self.first_h1 or (text if tag == "h1" else None)
                self.blocks.add(heading(_HEADINGS[tag], text))
        elif tag == "table":
            self._table(element)
        elif tag == "pre":
            self.blocks.add("```\n" + _text(element).strip("\n").replace("```", "` ` `") + "\n```")
        else:
            self.blocks.add("\n".join(_list_lines(element, 0)))
        return True

    def _table(self, element) -> None:
        caption = element.find("caption")
        if caption is not None:
            self.blocks.add(inline(_text(caption)))
        self.blocks.add(table(_table_rows(element)))


def _layout(table_element) -> bool:
    """A table used for page layout (it holds headings, or tables but no header cells): its cells are read as blocks."""
    if any(True for _ in table_element.iterdescendants(*_HEADINGS)):
        return True
    return any(True for _ in table_element.iterdescendants("table")) and not any(
        _owner(th) is table_element for th in table_element.iterdescendants("th"))


def _list_lines(element, depth: int, nesting: int = 0) -> list[str]:
    """One Markdown line per <li>, nested lists indented under their item; <ol start> is kept."""
    lines: list[str] = []
    start = element.get("start", "1").strip()
    number = int(start) if start.isascii() and start.lstrip("-").isdigit() else 1
    for item in element:
        if not isinstance(item.tag, str):
            continue
        if nesting >= _MAX_LIST_DEPTH:  # deeper lists are flattened into their item's line
            lines += [list_item(_text(item), 8)] if _text(item).strip() else []
            continue
        if item.tag in ("ul", "ol"):  # a list directly inside a list (invalid, common)
            lines += _list_lines(item, depth + 1, nesting + 1)
            continue
        own, nested = _item_text(item)
        if own:
            lines.append(list_item(own, min(depth, 8), number if element.tag == "ol" else None))
            number += 1
        for sub in nested:
            lines += _list_lines(sub, depth + 1 if own else depth, nesting + 1)
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
    return min(max(int(value), 1), cap) if value.isascii() and value.isdigit() else 1


def _owner(tr):
    for ancestor in tr.iterancestors("table"):
        return ancestor
    return None
