"""The PDF reader's speed in pages/s (one thread, by the wall clock and per CPU second) and, on PDFs whose words
are known, how many of them come back (words) and in their order (adjacent word pairs).

Generated documents (reportlab, as the tests make them): the report (headings, list, two-column page, ruled table,
running headers), pages of random-word paragraphs, and columns drawn line by line across the page.
`--pdfs DIR` also times every PDF in DIR (real PDFs, never committed); `--ocr` times OCR of a scanned page.
Writes bench/results/pdf-reader[-TAG].json.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "sources" / "formats")]

import pdf_samples  # noqa: E402

from bench.results_file import commit, write_results  # noqa: E402
from rag.sources.formats import ExtractError, ExtractOptions  # noqa: E402
from rag.sources.formats.pdf import extract  # noqa: E402


def timed(data: bytes, options: ExtractOptions = ExtractOptions()):
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        doc = extract(data, options)
    except ExtractError as error:
        return None, str(error), 0.0, 0.0
    return doc, "", time.perf_counter() - wall, time.process_time() - cpu


def recall(written: list[str], text: str) -> tuple[float, float]:
    """Share of written words read back, and of adjacent written word pairs read back adjacent."""
    read = text.split()
    from collections import Counter

    words, pairs = Counter(read), Counter(zip(read, read[1:]))
    found_words = sum(min(n, words[w]) for w, n in Counter(written).items())
    found_pairs = sum(min(n, pairs[p]) for p, n in Counter(zip(written, written[1:])).items())
    return found_words / len(written), found_pairs / max(len(written) - 1, 1)


def generated(seed: int) -> list[tuple[str, bytes, list[str] | None]]:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 11)))
                  for _ in range(3000)]
    texts = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(20, 160))) for _ in range(120)]
    columns = [w for k in range(40) for w in [pdf_samples.LEFT_WORDS[(3 * k + i) % 60] for i in range(3)]
               + ["alpha", "beta", "gamma"]]
    columns += [w for k in range(40) for w in [pdf_samples.RIGHT_WORDS[(3 * k + i) % 60] for i in range(3)]
                + ["delta", "epsilon"]]
    return [("report-40p", pdf_samples.report(pages_of_body=36), None),
            ("paragraphs", pdf_samples.paragraphs(texts), " ".join(texts).split()),
            ("interleaved-columns", pdf_samples.interleaved_columns(), ["Two", "Column", "Study"] + columns)]


def scanned_page() -> bytes:
    """Page 1 of the report rendered at 200 dpi and placed in a PDF as an image: a scan without a text layer."""
    import pypdfium2 as pdfium
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = pdfium.PdfDocument(pdf_samples.report())[0].render(scale=200 / 72).to_pil()
    buffer = io.BytesIO()
    page = canvas.Canvas(buffer, pagesize=A4)
    page.drawImage(ImageReader(image), 0, 0, width=A4[0], height=A4[1])
    page.save()
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdfs", type=Path, help="a folder of PDFs to time as well")
    parser.add_argument("--ocr", action="store_true", help="time OCR of one scanned page")
    parser.add_argument("--tag")
    args = parser.parse_args()
    extract(pdf_samples.report(), ExtractOptions())  # imports and pdfium's start-up are not the figure
    rows = []
    for name, data, written in generated(7):
        doc, refused, wall, cpu = timed(data)
        row = {"doc": name, "pages": doc.pages, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
        if written:
            row["words"], row["pairs"] = (round(x, 4) for x in recall(written, doc.text))
        rows.append(row)
    for path in sorted(args.pdfs.glob("*.pdf")) if args.pdfs else []:
        doc, refused, wall, cpu = timed(path.read_bytes())
        rows.append({"doc": path.name, "pages": doc.pages if doc else 0, "wall_s": round(wall, 3),
                     "cpu_s": round(cpu, 3), **({"refused": refused} if refused else {})})
    pages = sum(r["pages"] for r in rows)
    figures = {"commit": commit(REPO), "docs": rows, "pages": pages,
               "pages_per_s_wall": round(pages / sum(r["wall_s"] for r in rows), 1),
               "pages_per_cpu_s": round(pages / sum(r["cpu_s"] for r in rows), 1)}
    if args.ocr:
        doc, refused, wall, cpu = timed(scanned_page(), ExtractOptions(ocr=True))
        figures["ocr"] = {"seconds_per_page": round(wall, 2), "words": len(doc.text.split()) if doc else refused}
    for row in rows:
        print(row)
    print({k: v for k, v in figures.items() if k != "docs"})
    print(write_results(figures, "pdf-reader", args.tag))


if __name__ == "__main__":
    main()
