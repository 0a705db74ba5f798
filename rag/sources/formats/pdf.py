"""The PDF reader: a PDF's bytes as Markdown with one `p.N` location per page, read through pdfium.

This module owns the document: opening and refusing it, page headers and footers repeated across pages, the body
font and heading levels (from the outline when it names the headings), the title, and OCR of pages without text
(tesseract, when asked for). A page's own layout is rag.sources.formats.pdf_layout's.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass

from rag.sources.formats import Extracted, ExtractError, ExtractOptions
from rag.sources.formats import markdown as md
from rag.sources.formats.pdf_chars import Seg, rules, segments
from rag.sources.formats.pdf_layout import Style, blocks, join_lines, lines, normalise, reading_order
from rag.sources.formats.pdf_tables import ruled_tables

NO_TEXT_LAYER = "no text layer; OCR is not enabled (set RAG_OCR=1 or pass --ocr with tesseract installed)"
NO_TESSERACT = "no text layer; OCR is enabled but tesseract is not installed"
OCR_SECONDS = 120  # per page: a page tesseract cannot read in this long is dropped, not waited on
_MARGIN = 0.1  # headers and footers stand in the top and bottom tenth of the page
# A margin line that is only a page number goes even when it cannot repeat (documents of one or two pages).
_PAGE_NUMBER = re.compile(r"^[-–—(\[ ]*(page |p\. ?)?#( (of|/) #)?[-–—)\] ]*$")
_PLACEHOLDER_TITLES = {"untitled", "untitled document", "anonymous", "title", "document", "none"}


@dataclass
class _Page:
    height: float
    segs: list[Seg]
    aside: str  # text set at an angle, read after the page
    rules: tuple[list, list]
    images: bool


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """The PDF as Markdown; refuses encrypted, unreadable and textless files with an ExtractError."""
    try:
        return _extract(data, options)
    except ExtractError:
        raise
    except Exception as error:  # pdfium reports damage in many ways; the user gets one line, never a traceback
        raise ExtractError("corrupt", f"unreadable PDF: {md.inline(str(error)) or type(error).__name__}") from None


def _open(data: bytes):
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        if "password" in str(error).lower():
            raise ExtractError("encrypted", "encrypted PDF (password protected)") from None
        reason = re.sub(r"^Failed to load document \((.*)\)\.?$", r"\1", md.inline(str(error)))
        raise ExtractError("corrupt", f"not a readable PDF: damaged or truncated ({reason})") from None


def _extract(data: bytes, options: ExtractOptions) -> Extracted:
    doc = _open(data)
    try:
        pages = [_read_page(doc[i]) for i in range(len(doc))]
        if not pages:
            raise ExtractError("empty", "PDF has no pages")
        textless = [i for i, page in enumerate(pages) if not page.segs and not page.aside]
        if len(textless) == len(pages) and not options.ocr:
            if not any(page.images for page in pages):
                raise ExtractError("empty", "PDF has no text and no images")
            raise ExtractError("no text layer", NO_TEXT_LAYER)
        ocr = options.ocr and shutil.which("tesseract") is not None
        if options.ocr and not ocr and len(textless) == len(pages):
            raise ExtractError("no text layer", NO_TESSERACT)
        _drop_running_lines(pages)
        style = _style(doc, pages)
        out, dropped, unread = md.Blocks(), [], []
        first_heading = None
        for i, page in enumerate(pages):
            out.begin(f"p.{i + 1}")
            found: list[str] | None = []
            if page.segs or page.aside:
                found = _layout(page, style)
            elif page.images and ocr:
                found = _ocr(doc[i])
            elif page.images:
                dropped.append(i + 1)
            if found is None:
                unread.append(i + 1)
            for block in found or []:
                if first_heading is None and block.startswith("#"):
                    first_heading = block.lstrip("#").strip()
                out.add(block)
        if not out.text().strip():
            if dropped:
                raise ExtractError("no text layer", NO_TEXT_LAYER)
            if unread:
                raise ExtractError("no text layer", "no text layer; OCR failed on every page with an image")
            raise ExtractError("empty", "PDF has no text, OCR included" if options.ocr else "PDF has no text")
        why = "OCR is enabled but tesseract is not installed" if options.ocr else "OCR is not enabled"
        reasons = _dropped(dropped, f"no text layer; {why}") + _dropped(unread, "OCR failed")
        return out.extracted(_title(doc) or first_heading, len(pages), reasons)
    finally:
        doc.close()


def _read_page(page) -> _Page:
    import pypdfium2.raw as pdfium_c

    left, bottom, right, top = page.get_bbox()  # the visible box, in the coordinates the text is drawn in
    height = top - bottom
    textpage = page.get_textpage()
    try:
        segs, aside = segments(textpage, top)
    finally:
        textpage.close()
    segs = [s for s in segs if s.x1 > left and s.x0 < right and s.base > 0 and s.top < height]  # off the page: unseen
    found = rules(page, top) if segs else ([], [])
    images = not segs and any(True for _ in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=3))
    return _Page(height, segs, aside, found, images)


def _dropped(pages: list[int], reason: str) -> tuple[str, ...]:
    if not pages:
        return ()
    label = "page" if len(pages) == 1 else "pages"
    return (f"{label} {', '.join(map(str, pages))}: {reason}",)


def _running_key(seg: Seg, height: float) -> str | None:
    if _MARGIN * height < seg.top and seg.base < (1 - _MARGIN) * height:
        return None
    return re.sub(r"\d+", "#", md.inline(seg.text).lower())


def _drop_running_lines(pages: list[_Page]) -> None:
    """Takes out margin lines that repeat (numbers aside) on at least half the pages and at least three, and
    margin lines that are only a page number and alone on their line."""
    seen: Counter[str] = Counter()
    smallest: dict[str, float] = {}
    for page in pages:
        keys = {(key, s.size) for s in page.segs if (key := _running_key(s, page.height))}
        seen.update({key for key, _ in keys})
        for key, size in keys:
            smallest[key] = min(size, smallest.get(key, size))
    # A title set larger than the running header that repeats its words is the title, not the header.
    repeated = {key: smallest[key] * 1.15 for key, n in seen.items() if n >= 3 and n >= 0.5 * len(pages)}
    for page in pages:
        page.segs = [s for s in page.segs if not _running(s, page, repeated)]


def _running(seg: Seg, page: _Page, repeated: dict[str, float]) -> bool:
    key = _running_key(seg, page.height)
    if key is None:
        return False
    if key in repeated:
        return seg.size < repeated[key]
    return bool(_PAGE_NUMBER.match(key)) and not any(
        other is not seg and min(other.base, seg.base) > max(other.top, seg.top) for other in page.segs)


def _style(doc, pages: list[_Page]) -> Style:
    """The body size (most characters), the larger sizes headings use, and the outline's titles if they match."""
    weights: Counter[float] = Counter()
    for page in pages:
        for s in page.segs:
            weights[round(s.size * 2) / 2] += len(s.text)
    body = weights.most_common(1)[0][0] if weights else 10.0
    heading_sizes = {round(s.size * 2) / 2 for p in pages for s in p.segs if s.size >= body * 1.15 and _wordy(s.text)}
    style = Style(body, sorted(heading_sizes, reverse=True))
    outline = _outline(doc)
    if outline:
        texts = {normalise(line.text).lstrip("0123456789") for p in pages for line in lines(p.segs)}
        if sum(1 for key in outline if key in texts) >= 0.5 * len(outline):
            style.outline = outline
    return style


def _wordy(text: str) -> bool:
    """Reads like words, not figure labels or numbers: the text a heading has."""
    letters = sum(c.isalpha() for c in text)
    return letters >= 3 and letters >= 0.5 * len(text.replace(" ", "")) and len(text) <= 150


def _outline(doc) -> dict[str, int]:
    out: dict[str, int] = {}
    for mark in doc.get_toc(max_depth=6):
        key = normalise(mark.get_title() or "").lstrip("0123456789")
        if key:
            out.setdefault(key, min(mark.level + 1, 6))
    return out


def _layout(page: _Page, style: Style) -> list[str]:
    segs = ruled_tables(page.segs, *page.rules, style.body)
    found = [block for flow in reading_order(segs) for block in blocks(flow, style)]
    return found + [join_lines([page.aside])] if page.aside else found


def _title(doc) -> str | None:
    title = md.inline(doc.get_metadata_value("Title") or "")
    if title[:1] + title[-1:] in ("()", "[]"):   # a PDF string's own delimiters, written into the value
        title = title[1:-1].strip()
    lowered = title.lower()
    if (len(title) < 3 or lowered in _PLACEHOLDER_TITLES or not any(c.isalpha() for c in title)
            or lowered.endswith((".doc", ".docx", ".pdf", ".tex", ".dvi", ".indd", ".ps"))
            or lowered.startswith(("microsoft word -", "microsoft powerpoint -", "untitled"))
            or (" " not in title and re.search(r"[-_]|\.\w{2,4}$", title))):  # a file name, not a title
        return None
    return title


def _ocr(page) -> list[str] | None:
    """The paragraphs tesseract reads on a page rendered at 300 dpi; None if it fails or runs out of time."""
    import io

    image = page.render(scale=300 / 72, grayscale=True).to_pil()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    try:
        done = subprocess.run(["tesseract", "-", "-", "--psm", "3"], input=buffer.getvalue(), capture_output=True,
                              timeout=OCR_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    text = done.stdout.decode("utf-8", errors="replace")
    paragraphs = re.split(r"\n\s*\n", text)
    return [joined for p in paragraphs if (joined := join_lines(p.splitlines()))]
