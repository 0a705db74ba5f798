"""What one folder ACL file's edit costs over a large folder: a revocation re-published in place.

A folder of N small Markdown files (no front matter) under one `.access.yaml` is published with the real
embedder; then the folder file drops a group. The next publish is measured step by step: wall time, bytes the
process wrote (/proc/self/io), documents updated in place and sub-chunks embedded (must be 0), and whether a
reader of the revoked group still sees any document after the documents step and after the whole publish.
Prints and writes bench/results/acl_changes.json.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.access import ACCESS_FILE  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

WORDS = ("ledger invoice audit quarter revenue margin gateway antenna firmware certificate rotation budget payroll "
         "supplier contract renewal forecast variance approval travel expense policy region north south").split()
QUESTIONS = ("quarter revenue forecast", "supplier contract renewal", "travel expense approval")


def written() -> int:
    """Bytes this process has caused to be written to storage so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def make_folder(src: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    folder = src / "finance"
    folder.mkdir(parents=True)
    (folder / ACCESS_FILE).write_text("acl: [finance, audit]\n")
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(40))
        (folder / f"note-{i:05d}.md").write_text(f"Finance note {i}: {words}.\n")


def seen(workspace: Path, embedder, groups: frozenset[str]) -> int:
    ws = Workspace(workspace, embedder=embedder)
    try:
        return sum(len(ws.retrieve("longrag", Caller(groups), q, 2000).items) for q in QUESTIONS)
    finally:
        ws.close()


def step(fn, *args):
    started, before = time.perf_counter(), written()
    out = fn(*args)
    return out, round(time.perf_counter() - started, 3), written() - before


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    embedder, counter = Embedder(threads=2), default_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src, ws = Path(tmp) / "src", Path(tmp) / "ws"
        make_folder(src, args.docs, args.seed)
        settings = IngestSettings(sources=[str(src)])
        catalog, index = Catalog(ws / "catalog.duckdb"), SubchunkIndex(ws / "lancedb")
        started = time.perf_counter()
        publish_documents(catalog, settings)
        publish_units(catalog, counter, settings)
        first = publish_index(catalog, index, embedder.encode, counter, settings)
        first_s = time.perf_counter() - started
        audit_before = seen(ws, embedder, frozenset({"audit"}))

        (src / "finance" / ACCESS_FILE).write_text("acl: [finance]\n")
        (changes, _), docs_s, docs_b = step(publish_documents, catalog, settings)
        audit_after_documents = seen(ws, embedder, frozenset({"audit"}))
        _, units_s, units_b = step(publish_units, catalog, counter, settings)
        report, index_s, index_b = step(publish_index, catalog, index, embedder.encode, counter, settings)
        audit_after, finance_after = seen(ws, embedder, frozenset({"audit"})), seen(ws, embedder,
                                                                                    frozenset({"finance"}))
        catalog.close()
    figures = {
        "documents": args.docs, "first_publish_s": round(first_s, 1), "first_publish_embedded": first.embedded,
        "revocation": {
            "updated_in_place": len(changes.updated_in_place), "new_versions": len(changes.new),
            "files_read": changes.reading["files_read"], "subchunks_embedded": report.embedded,
            "seconds": {"documents": docs_s, "units": units_s, "index": index_s,
                        "total": round(docs_s + units_s + index_s, 3)},
            "bytes_written": {"documents": docs_b, "units": units_b, "index": index_b,
                              "total": docs_b + units_b + index_b}},
        "items_seen_by_audit": {"before": audit_before, "after_documents_step": audit_after_documents,
                                "after_publish": audit_after},
        "items_seen_by_finance_after": finance_after,
        "command": f"python bench/acl_changes.py --docs {args.docs} --seed {args.seed}",
    }
    write_results(figures, "acl_changes")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
