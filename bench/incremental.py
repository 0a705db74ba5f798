"""Incremental re-publish vs full build on ≥ 10,000 documents: delete one document, bump another's version.

The three benchmark corpora together (15,934 documents) are ingested from scratch (timed), then one
document is removed and another gets version 2 with changed text, and the same sources are ingested
again (timed). Prints wall time and sub-chunks embedded for both, and their ratios (goal ≤ 2%).
Writes bench/results/incremental.json.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines.cli import run_ingest  # noqa: E402
from rag.summary import markdown_table  # noqa: E402

BENCHMARKS = REPO.parent / "shared" / "benchmarks"
NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, ws = Path(tmp) / "sources", Path(tmp) / "ws"
        src.mkdir()
        for name in NAMES:
            shutil.copy(BENCHMARKS / name / "docs.jsonl", src / f"{name}.jsonl")
        run = lambda: run_ingest(str(ws), [str(src)], default_acl=["bench"], derive_links=True)  # noqa: E731
        t = time.perf_counter()
        full = run()
        full_s = time.perf_counter() - t

        lines = (src / "musique.jsonl").read_text().splitlines()
        deleted = json.loads(lines[10])["doc_id"]
        bumped = json.loads(lines[20])
        bumped.update(version="2", text=bumped["text"] + " This paragraph was revised in version 2.")
        lines[20] = json.dumps(bumped)
        del lines[10]
        (src / "musique.jsonl").write_text("\n".join(lines) + "\n")
        t = time.perf_counter()
        incremental = run()
        incremental_s = time.perf_counter() - t

    figures = {
        "documents": full["documents"], "subchunks": full["subchunks"],
        "full_wall_s": round(full_s, 2), "full_embedded": full["embedded"],
        "incremental_wall_s": round(incremental_s, 2), "incremental_embedded": incremental["embedded"],
        "incremental_deleted": incremental["deleted"], "checks_passed": incremental["checks_passed"],
        "wall_ratio": round(incremental_s / full_s, 4),
        "embedded_ratio": round(incremental["embedded"] / max(full["embedded"], 1), 5),
        "changes": {"deleted": deleted, "new_version": f"{bumped['doc_id']} v2"},
        "command": "python bench/incremental.py",
    }
    (REPO / "bench" / "results" / "incremental.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(markdown_table(["figure", "value"], [[k, v] for k, v in figures.items()]))


if __name__ == "__main__":
    main()
