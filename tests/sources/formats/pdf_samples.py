"""PDFs made with reportlab for the PDF reader's tests and bench: known text laid out in known places."""
from __future__ import annotations

import io

HEADER = "ACME Corp — Confidential"
LEFT_WORDS = [f"leftword{i}" for i in range(60)]
RIGHT_WORDS = [f"rightword{i}" for i in range(60)]
TABLE = [["Region", "Units", "Revenue"], ["North", "120", "4,800"], ["South", "95", "3,100"], ["East", "143", "5,900"]]
BODY = ("The widget programme grew steadily through the year, and this report sets out what changed and why "
        "the board expects the trend to hold. ")


def report(pages_of_body: int = 0) -> bytes:
    """Title, two heading sizes, paragraphs, a bullet list, a two-column page, a ruled table, headers, footers."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import (
        BaseDocTemplate,
        Frame,
        ListFlowable,
        ListItem,
        NextPageTemplate,
        PageBreak,
        PageTemplate,
        Paragraph,
        Table,
        TableStyle,
    )

    styles = getSampleStyleSheet()
    total = 4 + pages_of_body
    width, height = A4

    def decorate(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 9)
        canvas.drawString(2 * cm, height - 1.2 * cm, HEADER)
        canvas.drawRightString(width - 2 * cm, 1.2 * cm, f"Page {doc.page} of {total}")
        canvas.restoreState()

    buffer = io.BytesIO()
    doc = BaseDocTemplate(buffer, pagesize=A4, leftMargin=2 * cm, rightMargin=2 * cm, topMargin=2.5 * cm,
                          bottomMargin=2.5 * cm)
    full = Frame(doc.leftMargin, doc.bottomMargin, doc.width, doc.height, id="full")
    half = (doc.width - 1 * cm) / 2
    columns = [Frame(doc.leftMargin, doc.bottomMargin, half, doc.height, id="left"),
               Frame(doc.leftMargin + half + 1 * cm, doc.bottomMargin, half, doc.height, id="right")]
    doc.addPageTemplates([PageTemplate("one", [full], onPage=decorate),
                          PageTemplate("two", columns, onPage=decorate)])
    story = [
        Paragraph("Annual Report on Widgets", styles["Title"]),
        Paragraph("Introduction", styles["Heading1"]),
        Paragraph(BODY * 3, styles["BodyText"]),
        Paragraph("Background", styles["Heading2"]),
        Paragraph("Careful infor-<br/>mation gathering made the figures reliable. " + BODY * 2, styles["BodyText"]),
        ListFlowable([ListItem(Paragraph(text, styles["BodyText"])) for text in
                      ("First bullet about gears", "Second bullet about springs", "Third bullet about levers")],
                     bulletType="bullet"),
        Paragraph("Closing words of the first page. " + BODY, styles["BodyText"]),
        NextPageTemplate("two"), PageBreak(),
        Paragraph(" ".join(LEFT_WORDS), styles["BodyText"]),
        Paragraph(" ".join(LEFT_WORDS[:5]) + " end of left.", styles["BodyText"]),
    ]
    story += [Paragraph(" ".join(RIGHT_WORDS), styles["BodyText"])]
    story += [NextPageTemplate("one"), PageBreak(), Paragraph("Sales by Region", styles["Heading2"]),
              Table(TABLE, style=TableStyle([("GRID", (0, 0), (-1, -1), 0.5, "black")])),
              Paragraph("The table above lists sales. " + BODY, styles["BodyText"]), PageBreak()]
    for k in range(pages_of_body + 1):
        story += [Paragraph(f"Appendix {k + 1}", styles["Heading1"])]
        story += [Paragraph(BODY * 4, styles["BodyText"]) for _ in range(2 if k == pages_of_body else 9)]
        story += [PageBreak()] if k < pages_of_body else []
    doc.build(story)
    return buffer.getvalue()


def _canvas(buffer, **options):
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    return canvas.Canvas(buffer, pagesize=A4, **options)


def encrypted() -> bytes:
    """One page of text locked with a user password."""
    buffer = io.BytesIO()
    page = _canvas(buffer, encrypt="secret")
    page.drawString(72, 720, "Nobody reads this without the password.")
    page.save()
    return buffer.getvalue()


def picture_of_text(words: str):
    """A PIL image of `words` in large black type: a scan, with no text layer."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1700, 400), 255)
    font = ImageFont.load_default(size=64)
    ImageDraw.Draw(image).text((40, 150), words, fill=0, font=font)
    return image


def scanned(words: str, text_pages: tuple[str, ...] = ()) -> bytes:
    """Pages of typed text (`text_pages`) followed by one page that is only an image of `words`."""
    from reportlab.lib.utils import ImageReader

    buffer = io.BytesIO()
    page = _canvas(buffer)
    for text in text_pages:
        page.drawString(72, 720, text)
        page.showPage()
    page.drawImage(ImageReader(picture_of_text(words)), 40, 500, width=510, height=120)
    page.showPage()
    page.save()
    return buffer.getvalue()


def paragraphs(texts: list[str]) -> bytes:
    """Each text a body paragraph, flowed over as many pages as it takes."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate

    buffer = io.BytesIO()
    style = getSampleStyleSheet()["BodyText"]
    SimpleDocTemplate(buffer, pagesize=A4).build([Paragraph(text, style) for text in texts])
    return buffer.getvalue()


def interleaved_columns(lines: int = 40) -> bytes:
    """A full-width title, two columns drawn line by line across the page (left, right, left...), a closing line."""
    buffer = io.BytesIO()
    page = _canvas(buffer)
    page.setFont("Helvetica-Bold", 16)
    page.drawString(72, 780, "Two Column Study")
    page.setFont("Helvetica", 10)
    for k in range(lines):
        y = 750 - 13 * k
        page.drawString(72, y, " ".join(LEFT_WORDS[(3 * k + i) % 60] for i in range(3)) + " alpha beta gamma")
        page.drawString(322, y, " ".join(RIGHT_WORDS[(3 * k + i) % 60] for i in range(3)) + " delta epsilon")
    page.drawString(72, 750 - 13 * lines - 20, "A closing sentence runs across the whole width of the page below.")
    page.save()
    return buffer.getvalue()


def outlined() -> bytes:
    """Headings in the body's own font, named by the PDF's outline (bookmarks) at two levels; an unruled table."""
    buffer = io.BytesIO()
    page = _canvas(buffer)
    page.setFont("Times-Roman", 11)
    y = 760
    for level, heading in ((0, "Overview"), (1, "Details of the method"), (None, ALIGNED), (0, "Results")):
        if level is None:
            for row in heading:
                for x, cell in zip((72, 220, 380), row):
                    page.drawString(x, y, cell)
                y -= 14
            y -= 14
            continue
        page.bookmarkPage(heading)
        page.addOutlineEntry(heading, heading, level=level)
        page.drawString(72, y, heading)
        page.drawString(72, y - 20, f"Body text under {heading.lower()} runs on one line here.")
        y -= 48
    page.save()
    return buffer.getvalue()


ALIGNED = [["Metal", "Melting point", "Density"], ["Iron", "1538 C", "7.87 g/cm3"], ["Copper", "1085 C", "8.96 g/cm3"],
           ["Zinc", "420 C", "7.14 g/cm3"]]


def oddities() -> bytes:
    """One page: a line that begins like Markdown, a boxed paragraph, a lone page number at the foot."""
    buffer = io.BytesIO()
    page = _canvas(buffer)
    page.setFont("Helvetica", 10)
    page.drawString(72, 760, "# of widgets sold rose again this year.")
    page.drawString(72, 746, "1. The first quarter was the strongest.")
    page.rect(66, 640, 460, 90)
    page.rect(66, 600, 460, 40)
    page.rect(66, 600, 230, 130)
    for k, text in enumerate([BODY[:90], BODY[90:], BODY[:90]]):
        page.drawString(72, 715 - 12 * k, text)
    page.drawString(300, 620, "A boxed note beside it.")
    page.drawString(290, 40, "7")
    page.save()
    return buffer.getvalue()


BANDED = [["State", "Permits", "Handguns"]] + [[f"State{k}", str(100 + k), str(7 * k)] for k in range(1, 9)]


def banded_table() -> bytes:
    """A table ruled by columns, with a horizontal rule only under every second row."""
    from reportlab.platypus import SimpleDocTemplate, Table, TableStyle

    style = [("BOX", (0, 0), (-1, -1), 0.5, "black"), ("LINEAFTER", (0, 0), (-2, -1), 0.5, "black"),
             ("LINEBELOW", (0, 0), (-1, 0), 0.5, "black")]
    style += [("LINEBELOW", (0, row), (-1, row), 0.5, "black") for row in range(2, len(BANDED) - 1, 2)]
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer).build([Table(BANDED, style=TableStyle(style))])
    return buffer.getvalue()


def sections() -> bytes:
    """Headings a layout shows only by capitals or numbering, and a bold list of names that is not one."""
    buffer = io.BytesIO()
    page = _canvas(buffer)
    y = 760
    for font, size, text in [("Helvetica-Bold", 10, "Alice Smith, Bob Jones, Carol White"), (None, 0, ""),
                             ("Times-Roman", 8, "I. INTRODUCTION"), (None, 0, ""),
                             ("Times-Roman", 10, BODY[:95]), ("Times-Roman", 10, BODY[95:]), (None, 0, ""),
                             ("Times-Bold", 10, "2.1 Method details"), (None, 0, ""),
                             ("Times-Roman", 10, BODY[:95]), ("Times-Roman", 10, BODY[95:])]:
        if font:
            page.setFont(font, size)
            page.drawString(72, y, text)
        y -= 13
    page.save()
    return buffer.getvalue()
