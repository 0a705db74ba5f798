"""The anchors of bench/formats.py, run by the anchors' own Python (never a project dependency): Kreuzberg and
MarkItDown read the files one pass at a time, when told, so the bench can interleave their passes with ours.

Protocol (JSON lines on stdin; "ready" / "done" lines on the original stdout, which the anchors' own prints never
reach): first {"files": [path, ...], "out": path}, answered by the versions, libraries and skipped anchors in `out`;
then {"pass": k, "out": path} per pass, answered by {method: [{"text", "error", "cpu", "wall"}, ...]} in `out`.
Pass 0 keeps each text (for fidelity) and each failure; later passes time the files that pass 0 read.
Standard library only at import time, so it runs under any Python that has the anchors installed.
"""
from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata

# MarkItDown's libraries whose versions change its output (lxml 6 makes its DOCX pre-processing drop namespaces).
LIBRARIES = ("kreuzberg", "markitdown", "lxml", "beautifulsoup4", "mammoth", "pdfminer.six", "python-pptx",
             "openpyxl")


def _kreuzberg():
    from kreuzberg import ConcurrencyConfig, ExtractionConfig, extract_file_sync

    # Markdown out, no cache (a repeat must read again), no OCR (as our readers run), one thread.
    config = ExtractionConfig(use_cache=False, output_format="markdown", disable_ocr=True,
                              concurrency=ConcurrencyConfig(max_threads=1))
    return lambda path: extract_file_sync(path, config=config).content


def _markitdown():
    from markitdown import MarkItDown

    converter = MarkItDown(enable_plugins=False)
    return lambda path: converter.convert(path).text_content


METHODS = {"kreuzberg": _kreuzberg, "markitdown": _markitdown}


def _read(read, path: str, keep: bool) -> dict:
    c, w = time.process_time(), time.perf_counter()
    try:
        text = read(path)
    except Exception as e:  # noqa: BLE001 - an anchor's failure on a file is a figure, not a crash
        first = str(e).strip().splitlines()
        return {"text": None, "error": f"{type(e).__name__}: {first[0] if first else ''}"[:300]}
    return {"text": text if keep else None, "error": None, "cpu": time.process_time() - c,
            "wall": time.perf_counter() - w}


def main() -> None:
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the anchors' own prints go to stderr, never into the protocol
    files, readers, failed = [], {}, set()
    for line in sys.stdin:
        job = json.loads(line)
        if "files" in job:
            files, info = job["files"], {"versions": {}, "skipped": {}}
            for name, load in METHODS.items():
                try:
                    readers[name] = load()
                    info["versions"][name] = metadata.version(name)
                except Exception as e:  # noqa: BLE001 - an anchor that does not load is skipped with its reason
                    info["skipped"][name] = f"{type(e).__name__}: {e}"[:300]
            info["libraries"] = {d: metadata.version(d) for d in LIBRARIES if _installed(d)}
            out = info
        else:
            first = job["pass"] == 0
            out = {name: [_read(read, p, first) if (name, p) not in failed else {"text": None, "error": "failed"}
                          for p in files] for name, read in readers.items()}
            if first:
                failed |= {(n, p) for n, rows in out.items() for p, r in zip(files, rows) if r["error"]}
        with open(job["out"], "w", encoding="utf-8") as f:
            json.dump(out, f)
        reply.write("done\n")
        reply.flush()


def _installed(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main()
