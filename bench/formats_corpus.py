"""The generated corpus of bench/formats.py: seeded Markdown specs, and each spec written as a real PDF, DOCX, PPTX,
XLSX, CSV, HTML and EML file by the writers people use (reportlab, python-docx, python-pptx, openpyxl), each with
the Markdown reference of exactly what the file holds.

A spec has a title, 3–5 sections (level 2) with level-3 subsections, paragraphs, bullet and numbered lists and
tables of 3–6 columns × 3–40 rows; every third spec has a long table that runs over pages, and a PDF of every
third spec (another third) is set in two columns. PDF pages carry a running header (the title) and a 'Page N'
footer, which the reference leaves out. A PPTX has a slide per section (title, one text frame of its paragraphs and
list items) and a slide per table of up to 12 rows (a longer table goes on over slides, header repeated); an XLSX
a sheet per table; a CSV the spec's first table; an EML the HTML as its only body.
"""
from __future__ import annotations

import csv
import html
import io
import random
import zlib
from dataclasses import dataclass
from email.message import EmailMessage

from rag.sources.formats.markdown import heading, list_item, table

FORMATS = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "eml")
_ONSETS = "b c d f g h k l m n p r s t v w br cr dr fl gr pl st tr".split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st"]
SLIDE_ROWS = 12


@dataclass(frozen=True)
class Block:
    kind: str  # heading, para, bullets, numbered, table
    text: str = ""
    level: int = 0
    items: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Spec:
    name: str
    title: str
    blocks: tuple[Block, ...]
    columns: int = 1  # the PDF's columns a page


class _Words:
    """Pseudo-words from syllables: pronounceable, no dictionary needed, the same for a seed."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def word(self) -> str:
        r = self.rng
        return "".join(r.choice(_ONSETS) + r.choice(_VOWELS) for _ in range(r.randint(1, 3))) + r.choice(_CODAS)

    def phrase(self, lo: int, hi: int) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(lo, hi)))

    def sentence(self) -> str:
        r = self.rng
        parts = [self.word() if r.random() > 0.08 else str(r.randint(2, 2030)) for _ in range(r.randint(6, 16))]
        if len(parts) > 8 and r.random() < 0.4:
            parts[r.randint(2, len(parts) - 3)] += ","
        return " ".join(parts).capitalize() + "."

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 5)))

    def cell(self) -> str:
        r = self.rng.random()
        if r < 0.25:
            return str(self.rng.randint(0, 99999))
        if r < 0.4:
            return f"{self.rng.uniform(0, 1000):.2f}"
        return self.phrase(1, 3)


def _table(w: _Words, rows: int, max_cols: int) -> Block:
    cols = w.rng.randint(3, max_cols)
    header = tuple(w.phrase(1, 2).title() for _ in range(cols))
    return Block("table", rows=(header,) + tuple(tuple(w.cell() for _ in range(cols)) for _ in range(rows - 1)))


def _section(w: _Words, long_table: bool, first: bool, max_cols: int) -> list[Block]:
    r = w.rng
    blocks = [Block("heading", w.phrase(2, 5).title(), 2)] + [Block("para", w.paragraph())
                                                               for _ in range(r.randint(1, 2))]
    for _ in range(r.randint(0, 2)):
        blocks += [Block("heading", w.phrase(2, 4).title(), 3), Block("para", w.paragraph())]
        if r.random() < 0.6:
            kind = r.choice(["bullets", "numbered"])
            blocks.append(Block(kind, items=tuple(w.phrase(3, 10) for _ in range(r.randint(3, 6)))))
    if long_table or first or r.random() < 0.5:
        blocks += [_table(w, r.randint(30, 40) if long_table else r.randint(3, 12), max_cols),
                   Block("para", w.paragraph())]
    return blocks


def make_spec(i: int, seed: int = 0) -> Spec:
    """The i-th spec of a seed: the same every run."""
    w = _Words(random.Random(seed * 1000 + i))
    title = w.phrase(2, 5).title()
    blocks = [Block("heading", title, 1), Block("para", w.paragraph())]
    sections, columns = w.rng.randint(3, 5), 2 if i % 3 == 2 else 1
    for s in range(sections):
        # A two-column page fits 4 columns of pseudo-words without breaking one inside a cell.
        blocks += _section(w, long_table=i % 3 == 1 and s == sections - 1, first=s == 0, max_cols=6 // columns + 1)
    return Spec(f"spec{i:02d}", title, tuple(blocks), columns=columns)


def markdown(blocks) -> str:
    """The Markdown of blocks, in the shape the readers write."""
    parts = []
    for b in blocks:
        if b.kind == "heading":
            parts.append(heading(b.level, b.text))
        elif b.kind == "para":
            parts.append(b.text)
        elif b.kind in ("bullets", "numbered"):
            parts.append("\n".join(list_item(t, number=k + 1 if b.kind == "numbered" else None)
                                   for k, t in enumerate(b.items)))
        else:
            parts.append(table([list(r) for r in b.rows]))
    return "\n\n".join(parts)


def styled(text: str, split_runs: bool = False) -> list[tuple[str, str]]:
    """The text as (piece, style) runs: up to two whole words bold ("b") or italic ("i"), the rest plain ("");
    with `split_runs`, a plain run is also cut inside a word, as Word's revision marks cut runs."""
    rng = random.Random(zlib.crc32(text.encode()))
    words = text.split(" ")
    marks = {rng.randrange(len(words)): rng.choice("bi") for _ in range(2)}
    runs: list[tuple[str, str]] = []
    for k, word in enumerate(words):
        piece = word + (" " if k + 1 < len(words) else "")
        if k in marks:
            runs += [(word, marks[k]), (piece[len(word):], "")]
        elif split_runs and len(word) > 3 and rng.random() < 0.2:
            runs += [(piece[:2], ""), (piece[2:], "")]
        else:
            runs.append((piece, ""))
    return [r for r in runs if r[0]]


PDF_TAGS = {"b": ("<b>", "</b>"), "i": ("<i>", "</i>")}
HTML_TAGS = {"b": ("<strong>", "</strong>"), "i": ("<em>", "</em>")}
HTML_LIST_TAGS = {"b": ("<b>", "</b>"), "i": ("<a href='#more'>", "</a>")}


def _markup(text: str, tags: dict[str, tuple[str, str]]) -> str:
    """Escaped text with its styled words between their tags ({"b": ("<b>", "</b>"), ...})."""
    return "".join(tags[s][0] + html.escape(t) + tags[s][1] if s else html.escape(t) for t, s in styled(text))


def render_pdf(spec: Spec) -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate

    page_w, page_h = A4
    margin, gap = 54, 18
    width = (page_w - 2 * margin - gap * (spec.columns - 1)) / spec.columns
    frames = [Frame(margin + k * (width + gap), margin, width, page_h - 2 * margin, id=f"c{k}")
              for k in range(spec.columns)]

    def furniture(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(margin, page_h - margin / 2, spec.title)
        canvas.drawCentredString(page_w / 2, margin / 2, f"Page {doc.page}")
        canvas.restoreState()

    out = io.BytesIO()
    doc = BaseDocTemplate(out, pagesize=A4, title=spec.title, leftMargin=margin, rightMargin=margin,
                          topMargin=margin, bottomMargin=margin)
    doc.addPageTemplates([PageTemplate(frames=frames, onPage=furniture)])
    styles = getSampleStyleSheet()
    doc.build([_flowable(b, styles, width) for b in spec.blocks])
    return out.getvalue()


def _flowable(b: Block, styles, width: float):
    from reportlab.lib import colors
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, Table, TableStyle

    body = styles["BodyText"]
    if b.kind == "heading":
        return Paragraph(html.escape(b.text), styles[f"Heading{b.level}"])
    if b.kind == "para":
        return Paragraph(_markup(b.text, PDF_TAGS), body)
    if b.kind in ("bullets", "numbered"):
        return ListFlowable([ListItem(Paragraph(_markup(t, PDF_TAGS), body)) for t in b.items],
                            bulletType="bullet" if b.kind == "bullets" else "1")
    small = ParagraphStyle("cell", body, fontSize=7, leading=8.5)
    bold = ParagraphStyle("head", small, fontName="Helvetica-Bold")
    cols = len(b.rows[0])
    data = [[Paragraph(html.escape(c), bold if r == 0 else small) for c in row] for r, row in enumerate(b.rows)]
    return Table(data, colWidths=[width / cols] * cols, repeatRows=1, style=TableStyle(
        [("GRID", (0, 0), (-1, -1), 0.5, colors.grey), ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey)]))


def render_docx(spec: Spec) -> bytes:
    from docx import Document

    doc = Document()
    doc.core_properties.title = spec.title
    for b in spec.blocks:
        if b.kind == "heading":
            doc.add_heading(b.text, b.level)
        elif b.kind in ("para", "bullets", "numbered"):
            style = {"para": None, "bullets": "List Bullet", "numbered": "List Number"}[b.kind]
            for t in b.items or (b.text,):
                paragraph = doc.add_paragraph(style=style)
                for piece, mark in styled(t, split_runs=True):
                    run = paragraph.add_run(piece)
                    run.bold, run.italic = mark == "b" or None, mark == "i" or None
        else:
            grid = doc.add_table(rows=len(b.rows), cols=len(b.rows[0]))
            grid.style = "Table Grid"
            for r, row in enumerate(b.rows):
                for c, value in enumerate(row):
                    grid.cell(r, c).text = value
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def _sections(spec: Spec) -> list[tuple[str, list[Block]]]:
    """The spec cut at its level-1 and level-2 headings: (heading text, the blocks under it)."""
    out: list[tuple[str, list[Block]]] = []
    for b in spec.blocks:
        if b.kind == "heading" and b.level <= 2:
            out.append((b.text, []))
        else:
            out[-1][1].append(b)
    return out


def render_pptx(spec: Spec) -> tuple[bytes, str]:
    """The deck and its reference: a slide title is a heading; text, list items and tables as placed."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    reference: list[Block] = []
    for title, blocks in _sections(spec):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        reference.append(Block("heading", title, 2))
        lines = [t for b in blocks if b.kind != "table" for t in (b.items or (b.text,))]
        frame = slide.placeholders[1].text_frame
        frame.text = lines[0] if lines else ""
        for line in lines[1:]:
            frame.add_paragraph().text = line
        reference += [Block("para", t) for t in lines]
        for k, b in enumerate(x for x in blocks if x.kind == "table"):
            for start in range(1, len(b.rows), SLIDE_ROWS):
                rows = (b.rows[0],) + b.rows[start:start + SLIDE_ROWS]
                slide = deck.slides.add_slide(deck.slide_layouts[5])
                slide.shapes.title.text = f"{title}: table {k + 1}"
                shape = slide.shapes.add_table(len(rows), len(rows[0]), Inches(0.5), Inches(1.5), Inches(9),
                                               Inches(0.3) * len(rows))
                for r, row in enumerate(rows):
                    for c, value in enumerate(row):
                        shape.table.cell(r, c).text = value
                reference += [Block("heading", f"{title}: table {k + 1}", 2), Block("table", rows=rows)]
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), markdown(reference)


def _number(value: str) -> str | int | float:
    try:
        return int(value) if value.isdigit() else float(value) if value.replace(".", "", 1).isdigit() else value
    except ValueError:
        return value


def render_xlsx(spec: Spec) -> tuple[bytes, str]:
    """A sheet per table (numbers as numbers); the reference is each sheet's name as a heading and its table."""
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    reference: list[Block] = []
    for k, b in enumerate(x for x in spec.blocks if x.kind == "table"):
        sheet = book.create_sheet(f"Table {k + 1}")
        for r, row in enumerate(b.rows):
            sheet.append(list(row) if r == 0 else [_number(v) for v in row])
            for cell in sheet[sheet.max_row]:
                if isinstance(cell.value, float):
                    cell.number_format = "0.00"  # shown as written ("724.10"), as a reader should show it
        reference += [Block("heading", sheet.title, 2), b]
    out = io.BytesIO()
    book.save(out)
    return out.getvalue(), markdown(reference)


def render_csv(spec: Spec) -> tuple[bytes, str]:
    first = next(b for b in spec.blocks if b.kind == "table")
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(first.rows)
    return out.getvalue().encode(), markdown([first])


def render_html(spec: Spec) -> str:
    """Hand-written HTML: h1–h3, p, ul/ol, tables with thead; a script and a style that a reader must drop."""
    e = html.escape
    parts = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{e(spec.title)}</title>",
             "<style>body { font-family: sans-serif } td { padding: 2px }</style>",
             "<script>window.tracking = {id: 'do-not-index'};</script></head><body>",
             "<nav><a href='/'>Home</a> <a href='/archive'>Archive</a></nav><main>"]
    for b in spec.blocks:
        if b.kind == "heading":
            parts.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif b.kind == "para":
            parts.append(f"<p>{_markup(b.text, HTML_TAGS)}</p>")
        elif b.kind in ("bullets", "numbered"):
            tag = "ul" if b.kind == "bullets" else "ol"
            items = "".join(f"<li>{_markup(t, HTML_LIST_TAGS)}</li>" for t in b.items)
            parts.append(f"<{tag}>{items}</{tag}>")
        else:
            head = "".join(f"<th>{e(c)}</th>" for c in b.rows[0])
            body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in b.rows[1:])
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "\n".join(parts + ["</main><footer>Copyright Example Press</footer></body></html>"])


def render_eml(spec: Spec) -> bytes:
    msg = EmailMessage()
    msg["Subject"], msg["From"], msg["To"] = spec.title, "bench@example.com", "reader@example.com"
    msg.set_content(render_html(spec), subtype="html")
    return msg.as_bytes()


def render(spec: Spec, fmt: str) -> tuple[bytes, str]:
    """The file of `spec` in format `fmt` and the Markdown reference of what it holds."""
    if fmt in ("pptx", "xlsx", "csv"):
        return {"pptx": render_pptx, "xlsx": render_xlsx, "csv": render_csv}[fmt](spec)
    data = {"pdf": render_pdf, "docx": render_docx, "eml": render_eml}.get(fmt)
    return (data(spec) if data else render_html(spec).encode()), markdown(spec.blocks)
