"""File-format readers side by side with two anchors, Kreuzberg and MarkItDown, in one run: fidelity, speed and
retrieval parity. Prints a table per format and writes bench/results/formats.json (with the machine).

Fidelity (bench/formats_score.py defines each score): our readers' Markdown and the anchors' against the Markdown
reference of each generated file (bench/formats_corpus.py: seeded specs written as PDF, DOCX, PPTX, XLSX, CSV,
HTML and EML by the usual writer libraries), as the mean over files. `--real DIR` adds files of your own: one with
a `<file>.md` beside it is scored against it; one without counts for speed and failures only.

Speed: one thread (OMP, OpenBLAS, MKL, Rayon and Kreuzberg's own pool set to 1). Every method reads every file
once (the fidelity read, which also warms it up), then `--repeats` timed passes; our passes and the anchors'
alternate over the same files in the same order (bench/formats_run.py), so both meet the same machine load. A
file's time is the median CPU seconds of its timed reads (CPU, not wall: other work on a shared machine counts
less). PDFs give pages per CPU-second (= per core), the other formats files per CPU-second. Counted apart: files a
method failed on (an exception), that ours refused with the contract's one-line error (ExtractError: encrypted, no
text layer, empty, ...), and that it read as no words. A file a method fails on scores 0 in the fidelity means.

Retrieval parity (bench/formats_parity.py): a benchmark slice's documents as PDF, DOCX and HTML read back by our
readers, LongRAG's source completeness at each budget against the original JSONL, on the report half of the fixed
split, with the paired difference and the questions gained and lost. Default: hotpotqa (~2 min); each further
`--parity-benchmark` adds its slice (musique's 966 documents take ~7 min here).

The anchors never become project dependencies: they run in their own Python, in a subprocess
(bench/formats_anchor.py); without `--anchor-python` they are skipped with a note. Their venv:

    python3 -m venv .venv-anchors
    .venv-anchors/bin/pip install kreuzberg==4.10.4 'markitdown[all]==0.1.9' lxml==5.4.0

(lxml 6 makes MarkItDown 0.1.9's DOCX pre-processing strip the XML namespaces, so every DOCX fails with "Could not
find the body element"; with lxml 5 it reads them.)

    python bench/formats.py --anchor-python .venv-anchors/bin/python    # ~6 min on 2 shared cores

Shrink a run with --specs, --formats, --repeats, --parity-limit or --no-parity.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.formats_run import NO_READER, ONE_THREAD, READERS, REFUSED  # noqa: E402
from bench.results_file import mean_of  # noqa: E402

SCORES = ("words", "pairs", "cells", "headings")
MORE_SCORES = ("cells_in_text", "headings_level", "extra")
OUTCOMES = ("failed", "refused", "empty")
EXTENSIONS = {"pdf": "pdf", "docx": "docx", "pptx": "pptx", "xlsx": "xlsx", "csv": "csv", "html": "html",
              "htm": "html", "eml": "eml"}


def corpus(folder: Path, specs: int, seed: int, formats, real: Path | None) -> list[dict]:
    """Every file of the run: {path, format, reference (Markdown or None), source}, generated ones first."""
    from bench.formats_corpus import make_spec, render

    files = []
    for i in range(specs):
        spec = make_spec(i, seed)
        for fmt in formats:
            data, reference = render(spec, fmt)
            path = folder / f"{spec.name}.{fmt}"
            path.write_bytes(data)
            files.append({"path": str(path), "name": path.name, "format": fmt, "reference": reference,
                          "source": "generated"})
    for path in sorted(real.rglob("*")) if real else []:
        fmt = EXTENSIONS.get(path.suffix.lower().lstrip("."))
        if path.is_file() and fmt in formats:
            ref = path.with_name(path.name + ".md")
            files.append({"path": str(path), "name": str(path.relative_to(real)), "format": fmt, "source": "real",
                          "reference": ref.read_text(encoding="utf-8") if ref.exists() else None})
    return files


def pages(path: str) -> int | None:
    """The PDF's page count (pdfium's), or None if pdfium cannot open it."""
    import pypdfium2

    try:
        doc = pypdfium2.PdfDocument(Path(path).read_bytes())
    except pypdfium2.PdfiumError:
        return None
    try:
        return len(doc)
    finally:
        doc.close()


def drop_long_pdfs(files: list[dict], max_pages: int) -> list[dict]:
    """The files without PDFs of more than `max_pages` pages (a note names each one dropped)."""
    kept = []
    for f in files:
        if f["format"] == "pdf":
            f["pages"] = pages(f["path"])
            if (f["pages"] or 0) > max_pages:
                print(f"note: {f['name']} left out: {f['pages']} pages > --max-pages {max_pages}")
                continue
        kept.append(f)
    return kept


def summarise(rows: list[dict], methods, formats) -> dict:
    """Per format and source (generated, real) and method: mean fidelity over the files with a reference, failures,
    and speed over the files every method read."""
    summary = {}
    for fmt in formats:
        for source in ("generated", "real"):
            mine = [r for r in rows if r["format"] == fmt and r["source"] == source]
            if mine:
                summary[fmt if source == "generated" else f"{fmt} real"] = _group(mine, methods, fmt)
    return summary


def _outcomes(results: list[dict]) -> dict[str, int]:
    """How many files a method crashed on, refused with the contract's one-line error, or read as no words."""
    errors = [r["error"] for r in results if r["error"]]
    refused = sum(e.startswith(REFUSED) for e in errors)
    return {"failed": len(errors) - refused, "refused": refused,
            "empty": sum(not r["error"] and r["words_out"] == 0 for r in results)}


def _group(mine: list[dict], methods, fmt: str) -> dict:
    present = [m for m in methods if any(m in r for r in mine)]
    timed = [r for r in mine if all(r[m]["cpu_s"] is not None for m in present)
             and (fmt != "pdf" or r["pages"] is not None)]
    units = sum(r["pages"] if fmt == "pdf" else 1 for r in timed)
    table = {}
    for m in present:
        scored = [r[m] for r in mine if "words" in r[m]]
        seconds = sum(r[m]["cpu_s"] for r in timed)
        table[m] = {**{k: mean_of(s.get(k) for s in scored) for k in (*SCORES, *MORE_SCORES)},
                    "scored_files": len(scored), **_outcomes([r[m] for r in mine]),
                    "speed": round(units / seconds, 1) if seconds > 0 else None}
    return {"files": len(mine), "scored_files": max((t["scored_files"] for t in table.values()), default=0),
            "timed_files": len(timed), "unit": "pages/s/core" if fmt == "pdf" else "files/s/core",
            "pages": units if fmt == "pdf" else None, "methods": table}


def print_tables(summary: dict, errors: dict) -> None:
    from rag.text.tables import markdown_table

    for group, s in summary.items():
        pages = f", {s['pages']} pages" if s["pages"] else ""
        scored = "" if s["scored_files"] else " (no reference: speed and failures only)"
        print(f"\n{group}: {s['files']} files{pages}{scored}; speed over the {s['timed_files']} files every method "
              f"read")
        rows = [[m, *("—" if r[k] is None else f"{r[k]:.3f}" for k in (*SCORES, "extra")),
                 *(r[k] for k in OUTCOMES), "—" if r["speed"] is None else r["speed"]] for m, r in s["methods"].items()]
        print(markdown_table(["method", *SCORES, "extra", *OUTCOMES, s["unit"]], rows))
        for method, first in errors.get(group, {}).items():
            print(f"  {method} did not read, e.g.: {first}")


def first_errors(files: list[dict], results: dict) -> dict:
    """{group: {method: its first error and the file's name}}, grouped as in the summary."""
    out: dict = {}
    for method, res in results.items():
        for f, r in zip(files, res):
            group = f["format"] if f["source"] == "generated" else f"{f['format']} real"
            if r["error"] not in (None, NO_READER) and method not in out.get(group, {}):
                out.setdefault(group, {})[method] = f"{f['name']}: {r['error']}"
    return out


def per_file(files: list[dict], results: dict) -> list[dict]:
    """Each file's scores, median CPU seconds and error by method (no texts), for a look behind the means."""
    from bench.formats_score import score, words

    out = []
    for i, f in enumerate(files):
        row = {"file": f["name"], "format": f["format"], "source": f["source"], "pages": f.get("pages")}
        for method, res in results.items():
            r = res[i]
            if r["error"] == NO_READER:
                continue
            row[method] = {"error": r["error"], "words_out": len(words(r["text"] or "")),
                           "cpu_s": round(statistics.median(r["cpu"]), 5) if r["cpu"] else None,
                           **({k: None if v is None else round(v, 4) for k, v in
                               score(f["reference"], r["text"] or "").items()} if f["reference"] else {})}
        out.append(row)
    return out


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cores": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--anchor-python", help="a Python with kreuzberg==4.10.4 and markitdown[all]==0.1.9")
    p.add_argument("--specs", type=int, default=10, help="generated specs (each written in every format)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--formats", default=",".join(READERS), help="comma-separated subset of " + ",".join(READERS))
    p.add_argument("--repeats", type=int, default=3, help="timed reads of each file after the first")
    p.add_argument("--real", type=Path, help="a folder of real files (not committed); <file>.md is a reference")
    p.add_argument("--max-pages", type=int, default=100, help="leave out PDFs longer than this")
    p.add_argument("--keep", type=Path, help="write the generated files here and keep them")
    p.add_argument("--no-parity", action="store_true", help="skip retrieval parity")
    p.add_argument("--parity-benchmark", action="append", help="a benchmark slice (repeatable; default hotpotqa)")
    p.add_argument("--parity-half", choices=("tune", "report"), default="report")
    p.add_argument("--parity-limit", type=int, help="first N questions of the half only")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--tag", help="write bench/results/formats-TAG.json instead")
    args = p.parse_args()
    os.environ.update(ONE_THREAD)
    formats = [f for f in args.formats.split(",") if f]
    if unknown := set(formats) - set(READERS):
        p.error(f"unknown formats: {', '.join(sorted(unknown))}")
    from bench.formats_run import Anchors, our_readers, run_passes

    with tempfile.TemporaryDirectory(prefix="formats-bench-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        files = drop_long_pdfs(corpus(folder, args.specs, args.seed, formats, args.real), args.max_pages)
        readers, missing = our_readers(formats)
        for fmt, why in missing.items():
            print(f"note: no reader of ours for {fmt}: {why}")
        t = time.perf_counter()
        anchors = Anchors(args.anchor_python, files, Path(scratch))
        results = run_passes(files, readers, anchors, args.repeats)
        seconds = round(time.perf_counter() - t, 1)
        rows = per_file(files, results)
    summary = summarise(rows, list(results), formats)
    print_tables(summary, first_errors(files, results))
    figures = {"formats": summary, "files": rows}
    figures.update({"command": "python bench/formats.py " + " ".join(sys.argv[1:]), "machine": machine(),
                    "anchor_versions": anchors.info["versions"],
                    "anchor_libraries": anchors.info["libraries"], "anchors_skipped": anchors.info["skipped"],
                    "readers_missing": missing, "extract_seconds": seconds})
    if not args.no_parity:
        from bench.formats_parity import parity
        from rag.sources.benchmarks import benchmark_dir

        budgets = [int(b) for b in args.budgets.split(",")]
        figures["parity"] = []
        for name in args.parity_benchmark or ["hotpotqa"]:
            figures["parity"].append(parity(benchmark_dir(name), budgets, args.parity_half, readers, args.parity_limit))
            print_parity(figures["parity"][-1], budgets)
    from bench.results_file import commit, write_results

    figures["commit"] = commit(REPO)
    print(f"\nwrote {write_results(figures, 'formats', args.tag)}")


def print_parity(par: dict, budgets: list[int]) -> None:
    from rag.text.tables import markdown_table

    print(f"\nretrieval parity: {par['benchmark']}, {par['half']} half, {par['questions']} questions, "
          f"{par['method']} source completeness (Δ vs jsonl with its 95% interval; questions gained/lost)")
    rows = []
    for r in par["rows"]:
        audit = r.get("audit")
        rows.append([r["corpus"], *(f"{r[str(b)]:.3f}" for b in budgets),
                     *(f"{r['difference'][str(b)]} +{r['gained'][str(b)]}/-{r['lost'][str(b)]}" if audit else ""
                       for b in budgets),
                     f"{audit['read']}/{audit['documents']}, {audit['same_title']}" if audit else "",
                     audit["seconds"] if audit else ""])
    print(markdown_table(["corpus", *map(str, budgets), *(f"Δ {b}" for b in budgets), "read, same title",
                          "write+read+ingest s"], rows))


if __name__ == "__main__":
    main()
