"""The PDF reader on real PDFs written by reportlab: structure, reading order, page locations and refusals."""
import re
import shutil

import pdf_samples
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.pdf import NO_TESSERACT, NO_TEXT_LAYER, extract


@pytest.fixture(scope="module")
def report():
    return extract(pdf_samples.report(), ExtractOptions())


def page_text(doc, label):
    starts = [loc.start for loc in doc.locations] + [len(doc.text)]
    i = [loc.label for loc in doc.locations].index(label)
    return doc.text[starts[i]:starts[i + 1]]


def test_headings_keep_their_levels_and_body_lines_are_not_headings(report):
    headings = re.findall(r"^(#+) (.*)$", report.text, flags=re.M)
    assert headings == [("#", "Annual Report on Widgets"), ("#", "Introduction"), ("##", "Background"),
                        ("##", "Sales by Region"), ("#", "Appendix 1")]
    assert report.title == "Annual Report on Widgets"


def in_order(text, words):
    positions = [re.search(rf"\b{word}\b", text).start() for word in words]
    return positions == sorted(positions)


def test_two_columns_are_read_left_column_first(report):
    text = page_text(report, "p.2")
    assert in_order(text, pdf_samples.LEFT_WORDS + ["end of left"] + pdf_samples.RIGHT_WORDS)


def test_columns_drawn_line_by_line_across_the_page_are_still_read_column_by_column():
    doc = extract(pdf_samples.interleaved_columns(), ExtractOptions())
    assert doc.text.startswith("# Two Column Study\n\nleftword0 leftword1 leftword2 alpha beta gamma leftword3")
    assert in_order(doc.text, pdf_samples.LEFT_WORDS + pdf_samples.RIGHT_WORDS + ["closing sentence"])
    assert doc.text.endswith("\n\nA closing sentence runs across the whole width of the page below.")


def test_repeated_header_and_footer_are_gone(report):
    assert pdf_samples.HEADER not in report.text
    assert not re.search(r"Page \d+ of \d+", report.text)


def test_ruled_table_is_a_pipe_table_with_its_header_first(report):
    rows = [" | ".join(row) for row in pdf_samples.TABLE]
    expected = "\n".join([f"| {rows[0]} |", "|---|---|---|"] + [f"| {row} |" for row in rows[1:]])
    assert expected in report.text


def test_paragraph_lines_join_and_line_end_hyphens_go(report):
    assert "Careful information gathering made the figures reliable." in report.text
    paragraph = next(p for p in report.text.split("\n\n") if p.startswith("The table above"))
    assert "\n" not in paragraph and paragraph.endswith("expects the trend to hold.")


def test_bullets_are_list_items(report):
    assert "- First bullet about gears\n\n- Second bullet about springs\n\n- Third bullet about levers" in report.text


def test_each_page_location_points_at_its_first_text(report):
    assert [loc.label for loc in report.locations] == ["p.1", "p.2", "p.3", "p.4"]
    assert report.pages == 4
    firsts = ["# Annual Report", "leftword0 ", "## Sales by Region", "# Appendix 1"]
    assert [report.text[loc.start:loc.start + len(f)] for loc, f in zip(report.locations, firsts)] == firsts


def test_password_protected_pdf_is_refused_as_encrypted():
    with pytest.raises(ExtractError) as refused:
        extract(pdf_samples.encrypted(), ExtractOptions())
    assert (refused.value.kind, str(refused.value)) == ("encrypted", "encrypted PDF (password protected)")


@pytest.mark.parametrize("data", [pdf_samples.report()[:4000], b"%PDF-1.7\n" + bytes(range(256)) * 8, b""])
def test_damaged_bytes_are_corrupt_in_one_line(data):
    with pytest.raises(ExtractError) as refused:
        extract(data, ExtractOptions())
    assert refused.value.kind == "corrupt" and "\n" not in str(refused.value)


def test_image_only_pdf_without_ocr_has_no_text_layer():
    with pytest.raises(ExtractError) as refused:
        extract(pdf_samples.scanned("Quarterly gearbox inventory"), ExtractOptions())
    assert (refused.value.kind, str(refused.value)) == ("no text layer", NO_TEXT_LAYER)


def test_image_only_page_among_text_pages_is_reported_dropped():
    doc = extract(pdf_samples.scanned("Quarterly gearbox inventory", ("typed first page", "typed second")),
                  ExtractOptions())
    assert doc.text == "typed first page\n\ntyped second"
    assert doc.dropped == ("page 3: no text layer; OCR is not enabled",) and doc.pages == 3


def test_ocr_without_tesseract_is_refused(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ExtractError) as refused:
        extract(pdf_samples.scanned("Quarterly gearbox inventory"), ExtractOptions(ocr=True))
    assert (refused.value.kind, str(refused.value)) == ("no text layer", NO_TESSERACT)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_ocr_reads_the_image_only_page():
    doc = extract(pdf_samples.scanned("Quarterly gearbox inventory", ("typed first page",)), ExtractOptions(ocr=True))
    assert [loc.label for loc in doc.locations] == ["p.1", "p.2"]
    assert "Quarterly gearbox inventory" in doc.text[doc.locations[1].start:] and not doc.dropped


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(WORD, min_size=1, max_size=120), min_size=1, max_size=12))
@example([["a"], ["a"]])  # one-letter lines pdfium's text runs together without a line end
def test_paragraphs_come_back_with_their_words_in_order(texts):
    written = [word for words in texts for word in words]
    read = extract(pdf_samples.paragraphs([" ".join(words) for words in texts]), ExtractOptions()).text.split()
    # Longest common subsequence: words found, in the order written.
    previous = [0] * (len(read) + 1)
    for word in written:
        current = [0]
        for j, other in enumerate(read):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    assert previous[-1] >= 0.98 * len(written)


def test_outline_names_the_headings_and_aligned_columns_make_a_table():
    doc = extract(pdf_samples.outlined(), ExtractOptions())
    assert re.findall(r"^#+ .*$", doc.text, flags=re.M) == ["# Overview", "## Details of the method", "# Results"]
    rows = ["| " + " | ".join(row) + " |" for row in pdf_samples.ALIGNED]
    assert "\n".join([rows[0], "|---|---|---|"] + rows[1:]) in doc.text
    assert doc.title == "Overview"


def test_markdown_lookalikes_page_numbers_and_rules_across_text_are_not_structure():
    doc = extract(pdf_samples.oddities(), ExtractOptions())
    assert doc.text.startswith("\\# of widgets sold rose again this year.\n\n1. The first quarter")
    assert "|" not in doc.text and "7" not in doc.text.split()
    assert doc.text.endswith("A boxed note beside it.")


def test_rows_between_rules_drawn_every_second_row_stay_rows():
    doc = extract(pdf_samples.banded_table(), ExtractOptions())
    rows = ["| " + " | ".join(row) + " |" for row in pdf_samples.BANDED]
    assert doc.text == "\n".join([rows[0], "|---|---|---|"] + rows[1:])


def test_capitals_alone_are_headings_numbers_set_levels_and_name_lists_are_not():
    doc = extract(pdf_samples.sections(), ExtractOptions())
    assert re.findall(r"^#+ .*$", doc.text, flags=re.M) == ["# I. INTRODUCTION", "## 2.1 Method details"]
    assert doc.text.startswith("Alice Smith, Bob Jones, Carol White\n\n")


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_a_page_tesseract_cannot_read_is_reported(monkeypatch):
    import subprocess

    def timeout(*args, **kwargs):
        raise subprocess.TimeoutExpired("tesseract", 1)

    monkeypatch.setattr(subprocess, "run", timeout)
    doc = extract(pdf_samples.scanned("Quarterly gearbox inventory", ("typed first page",)), ExtractOptions(ocr=True))
    assert doc.text == "typed first page" and doc.dropped == ("page 2: OCR failed",)


def test_without_tesseract_a_scanned_page_among_text_pages_is_dropped_not_the_file(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    doc = extract(pdf_samples.scanned("Quarterly gearbox inventory", ("typed first page",)), ExtractOptions(ocr=True))
    assert doc.text == "typed first page"
    assert doc.dropped == ("page 2: no text layer; OCR is enabled but tesseract is not installed",)


def test_a_title_that_ends_in_brackets_keeps_them():
    import io

    from reportlab.pdfgen import canvas

    for title in ("Aladdin (2019 film)", "Report [draft] 2026"):
        buffer = io.BytesIO()
        page = canvas.Canvas(buffer)
        page.setTitle(title)
        page.drawString(72, 720, "The film was released in May.")
        page.save()
        assert extract(buffer.getvalue(), ExtractOptions()).title == title


def test_a_title_that_the_running_header_repeats_stays_the_title():
    import io

    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    page = canvas.Canvas(buffer)
    for n in range(1, 4):
        page.setFont("Helvetica", 9)
        page.drawString(72, 810, "Quarterly Review")
        if n == 1:
            page.setFont("Helvetica-Bold", 20)
            page.drawString(72, 780, "Quarterly Review")
        page.setFont("Helvetica", 11)
        page.drawString(72, 700, f"Body text of page {n} says what happened in the quarter.")
        page.showPage()
    page.save()
    text = extract(buffer.getvalue(), ExtractOptions()).text
    assert text.count("Quarterly Review") == 1 and "# Quarterly Review" in text
