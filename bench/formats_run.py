"""The passes of bench/formats.py: our readers in this process and the anchors in theirs (bench/formats_anchor.py),
interleaved pass by pass over the same files in the same order, so both see the same machine load.

Pass 0 reads every file once for fidelity (and warms each method up); passes 1..repeats time the files pass 0 read.
A method's result per file: {"text", "error", "cpu": [seconds per timed pass], "wall": [...]}.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS",
                               "NUMEXPR_NUM_THREADS", "TOKIO_WORKER_THREADS")}
# Our reader of each format: module in rag.sources.formats and its function.
READERS = {"pdf": ("pdf", "extract"), "docx": ("docx", "extract"), "pptx": ("pptx", "extract"),
           "xlsx": ("xlsx", "extract"), "csv": ("xlsx", "extract_csv"), "html": ("html", "extract"),
           "eml": ("eml", "extract")}
NO_READER = "no reader of ours for this format"
REFUSED = "refused"  # ours only: an ExtractError, the contract's one-line refusal of a file it cannot read


def our_readers(formats) -> tuple[dict, dict]:
    """{format: read(bytes) -> Extracted} for the readers present, and {format: why} for those that are not."""
    from rag.sources.formats import ExtractOptions

    found, missing = {}, {}
    for fmt in formats:
        module, function = READERS[fmt]
        try:
            extract = getattr(importlib.import_module(f"rag.sources.formats.{module}"), function)
        except (ImportError, AttributeError) as e:
            missing[fmt] = f"{type(e).__name__}: {e}"
            continue
        found[fmt] = lambda data, extract=extract: extract(data, ExtractOptions())
    return found, missing


def _ours(read, data: bytes, keep: bool) -> dict:
    from rag.sources.formats import ExtractError

    c, w = time.process_time(), time.perf_counter()
    try:
        text = read(data).text
    except ExtractError as e:
        return {"text": None, "error": f"{REFUSED} ({e.kind}): {e}"[:300]}
    except Exception as e:  # noqa: BLE001 - a reader's crash on a file is a figure of the run
        return {"text": None, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"text": text if keep else None, "error": None, "cpu": time.process_time() - c,
            "wall": time.perf_counter() - w}


def our_pass(files: list[dict], data: list[bytes], readers: dict, first: list[dict] | None) -> list[dict]:
    """One pass of our readers over the files; after pass 0 (`first`), only over the files it read."""
    out = []
    for f, raw, done in zip(files, data, first or [None] * len(files)):
        read = readers.get(f["format"])
        if read is None:
            out.append({"text": None, "error": NO_READER})
        elif done is not None and done["error"]:
            out.append(done)
        else:
            out.append(_ours(read, raw, keep=first is None))
    return out


class Anchors:
    """The anchors' own Python, driven one pass at a time; without it every pass gives nothing (and a note)."""

    def __init__(self, python: str | None, files: list[dict], scratch: Path):
        self.proc, self.scratch = None, scratch
        self.info = {"versions": {}, "libraries": {}, "skipped": {}}
        if not python:
            print("note: no --anchor-python given: the anchors (Kreuzberg, MarkItDown) are skipped")
            self.info["skipped"] = {"kreuzberg": "no --anchor-python", "markitdown": "no --anchor-python"}
            return
        self.errors = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([python, str(REPO / "bench" / "formats_anchor.py")], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
                                     env={**os.environ, **ONE_THREAD})
        info = self._ask({"files": [f["path"] for f in files]}, "info")
        if info is None:
            return
        self.info = info
        for name, why in info["skipped"].items():
            print(f"note: anchor {name} skipped: {why}")

    def _ask(self, job: dict, name: str) -> dict | None:
        out = self.scratch / f"anchor-{name}.json"
        try:
            self.proc.stdin.write(json.dumps({**job, "out": str(out)}) + "\n")
            self.proc.stdin.flush()
            answered = self.proc.stdout.readline().strip() == "done"
        except BrokenPipeError:
            answered = False
        if answered:
            return json.loads(out.read_text(encoding="utf-8"))
        self.errors.seek(0)
        why = (self.errors.read().strip().splitlines() or ["no answer"])[-1][:300]
        print(f"note: the anchors stopped: {why}")
        self.info["skipped"] = {"kreuzberg": why, "markitdown": why}
        self.close()
        return None

    def run_pass(self, k: int) -> dict[str, list[dict]]:
        return (self._ask({"pass": k}, f"pass-{k}") or {}) if self.proc else {}

    def close(self) -> None:
        if self.proc:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
            self.proc = None


def run_passes(files: list[dict], readers: dict, anchors: Anchors, repeats: int) -> dict[str, list[dict]]:
    """Every method's result per file, from 1 + `repeats` interleaved passes."""
    data = [Path(f["path"]).read_bytes() for f in files]
    passes: dict[str, list[list[dict]]] = {}
    for k in range(1 + repeats):
        if readers:
            passes.setdefault("ours", []).append(our_pass(files, data, readers, passes["ours"][0] if k else None))
        for method, rows in anchors.run_pass(k).items():
            passes.setdefault(method, []).append(rows)
    anchors.close()
    return {m: [_combined(i, ps) for i in range(len(files))] for m, ps in passes.items() if len(ps) == 1 + repeats}


def _combined(i: int, passes: list[list[dict]]) -> dict:
    first = passes[0][i]
    timed = [p[i] for p in passes[1:] if "cpu" in p[i]]
    return {"text": first["text"], "error": first["error"], "cpu": [t["cpu"] for t in timed],
            "wall": [t["wall"] for t in timed]}
