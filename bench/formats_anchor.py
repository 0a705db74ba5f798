"""The anchors of bench/formats.py, run by the anchors' own Python (never a project dependency): Kreuzberg and
MarkItDown read each file once for fidelity, then `repeats` more times for speed, in the order given.

Reads {"files": [path, ...], "repeats": N, "out": path} as JSON on stdin and writes to `out` (stdout is left to
the anchors' own prints):
{"versions": {method: version}, "skipped": {method: why}, "results": {method: [{"text", "error", "cpu", "wall"}]}}.
Standard library only at import time, so it runs under any Python that has the anchors installed.
"""
from __future__ import annotations

import json
import sys
import time
from importlib import metadata


def _kreuzberg():
    from kreuzberg import ConcurrencyConfig, ExtractionConfig, extract_file_sync

    # Markdown out, no cache (a repeat must read again), no OCR (the files have text; our readers run without it).
    config = ExtractionConfig(use_cache=False, output_format="markdown", disable_ocr=True,
                              concurrency=ConcurrencyConfig(max_threads=1))
    return lambda path: extract_file_sync(path, config=config).content


def _markitdown():
    from markitdown import MarkItDown

    converter = MarkItDown(enable_plugins=False)
    return lambda path: converter.convert(path).text_content


METHODS = {"kreuzberg": (_kreuzberg, "kreuzberg"), "markitdown": (_markitdown, "markitdown")}
# MarkItDown's readers whose versions change its output (lxml 6 makes its DOCX pre-processing drop namespaces).
LIBRARIES = ("lxml", "beautifulsoup4", "mammoth", "pdfminer.six", "python-pptx", "openpyxl")


def _run(read, path: str, repeats: int) -> dict:
    try:
        text = read(path)
    except Exception as e:  # noqa: BLE001 - an anchor's failure on a file is a figure, not a crash
        return {"text": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300],
                "cpu": [], "wall": []}
    cpu, wall = [], []
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        read(path)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return {"text": text, "error": None, "cpu": cpu, "wall": wall}


def main() -> None:
    job = json.load(sys.stdin)
    out: dict = {"versions": {}, "skipped": {}, "results": {}, "libraries": {}}
    for dist in LIBRARIES:
        try:
            out["libraries"][dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    for name, (load, dist) in METHODS.items():
        try:
            read = load()
            out["versions"][name] = metadata.version(dist)
        except Exception as e:  # noqa: BLE001 - an anchor that does not import is skipped with its reason
            out["skipped"][name] = f"{type(e).__name__}: {e}"[:300]
            continue
        out["results"][name] = [_run(read, path, job["repeats"]) for path in job["files"]]
    with open(job["out"], "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
