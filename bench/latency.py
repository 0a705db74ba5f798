"""Warm LongRAG query latency at ≥ 100K sub-chunks, with a 20% ACL pre-filter, before and after, in one run.

Builds (once, under .rag/bench/latency) a workspace holding the three benchmark corpora five times over,
each copy readable by its own group, through the normal ingest pipeline (the copies share texts, so the
vector cache embeds each text once). Then, for the same questions and callers, times:

- after: `Workspace.retrieve("longrag", …)` end to end (query embedding, vector search, BM25, the
  snapshot's in-memory members and ACLs, text, packing), warm;
- before: the same query through the code of `--baseline REF` (default: the last commit before the read
  side), run in a subprocess from a git worktree of that commit against the same files;
- the bare pre-filtered vector search and the query embedding, for reference.

Writes bench/results/latency.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]
COPIES = 5
CALLERS = {"one group (20% of rows)": ["group-0"], "all five groups": [f"group-{k}" for k in range(COPIES)]}

# The baseline's API: longrag_retrieve(catalog, index, embed_query, counter, caller, question, budget).
BASELINE_DRIVER = """
import json, sys, time
from rag.access import Caller
from rag.catalog import Catalog
from rag.embedding import Embedder
from rag.index import SubchunkIndex
from rag.longrag import longrag_retrieve
from rag.tokens import default_counter
ws, questions, callers = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
catalog, index = Catalog(ws + "/catalog.duckdb"), SubchunkIndex(ws + "/lancedb")
embedder, counter = Embedder(threads=1), default_counter()
for groups in callers:  # the same warm-up pass as the new code gets
    for q in questions:
        longrag_retrieve(catalog, index, embedder.encode_query, counter, Caller(frozenset(groups)), q, 2000)
out = {}
for groups in callers:
    caller, seconds = Caller(frozenset(groups)), []
    for q in questions:
        t = time.perf_counter()
        longrag_retrieve(catalog, index, embedder.encode_query, counter, caller, q, 2000)
        seconds.append(time.perf_counter() - t)
    out[",".join(groups)] = seconds
print(json.dumps(out))
"""


def build(root: Path, ws: Path) -> dict:
    src = ws / "sources"
    src.mkdir(parents=True, exist_ok=True)
    for k in range(COPIES):
        for name in NAMES:
            out = src / f"copy{k}-{name}.jsonl"
            if not out.exists():
                with (root / name / "docs.jsonl").open() as f, out.open("w") as g:
                    for line in f:
                        doc = json.loads(line)
                        g.write(json.dumps({"doc_id": f"c{k}:{doc['doc_id']}", "title": doc["title"],
                                            "text": doc["text"], "acl": [f"group-{k}"]}) + "\n")
    return run_ingest(IngestSettings(workspace=str(ws), sources=[str(src)], derive_links=True))


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {p: round(float(np.percentile(ms, int(p[1:]))), 1) for p in ("p50", "p95", "p99")}


def ours(ws: Path, questions: list[str]) -> dict[str, dict]:
    reader = Workspace(ws, embedder=Embedder(threads=1))
    for groups in CALLERS.values():  # warm: every question once, so the timed pass reads memory, as a server does
        for q in questions:
            reader.retrieve("longrag", Caller(frozenset(groups)), q, 2000)
    snap, out = reader.snapshot(), {}
    for label, groups in CALLERS.items():
        caller, full, bare, embed = Caller(frozenset(groups)), [], [], []
        for q in questions:
            t = time.perf_counter()
            reader.retrieve("longrag", caller, q, 2000)
            full.append(time.perf_counter() - t)
            t = time.perf_counter()
            vector = reader.embedder.encode_query(q)
            embed.append(time.perf_counter() - t)
            t = time.perf_counter()
            state = snap.vectors
            state.nearest(state.scores(vector, caller.groups), state.mask(caller.groups), 200)
            bare.append(time.perf_counter() - t)
        out[label] = {"longrag_ms": percentiles(full), "vector_search_ms": percentiles(bare),
                      "query_embedding_ms": percentiles(embed)}
    return out


def baseline(ws: Path, questions: list[str], ref: str) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref], check=True,
                       capture_output=True)
        try:
            run = subprocess.run([sys.executable, "-c", BASELINE_DRIVER, str(ws), json.dumps(questions),
                                  json.dumps(list(CALLERS.values()))], cwd=tree, capture_output=True, text=True,
                                 env=os.environ | {"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"})
            if run.returncode:
                raise SystemExit(f"baseline {ref} failed: {run.stderr.strip().splitlines()[-1]}")
            seconds = json.loads(run.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
    return {label: {"longrag_ms": percentiles(seconds[",".join(groups)])} for label, groups in CALLERS.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--baseline", default="b8fa50f", help="git ref of the 'before' code (default: b8fa50f)")
    p.add_argument("--skip-ingest", action="store_true", help="the workspace is already built and up to date")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    ws = REPO / ".rag" / "bench" / "latency"
    counts = {"documents": len(Workspace(ws).snapshot().current.versions)} if args.skip_ingest else build(root, ws)
    questions = [q.question for name in NAMES for q in load_questions(root / name)][: args.queries]
    after = ours(ws, questions)
    before = baseline(ws, questions, args.baseline)
    snap = Workspace(ws).snapshot()
    figures = {"subchunks": snap.index.count(), "documents": counts["documents"], "queries": len(questions),
               "indices": sorted(i.name for i in snap.index.table.list_indices()), "baseline": args.baseline,
               "after": after, "before": before,
               "ratio_p50_after_over_before": {k: round(after[k]["longrag_ms"]["p50"] / before[k]["longrag_ms"]["p50"], 3)
                                               for k in CALLERS},
               "command": "python bench/latency.py " + " ".join(sys.argv[1:])}
    write_results(figures, "latency")
    print(f"{figures['subchunks']} sub-chunks, {figures['documents']} documents, {len(questions)} queries, "
          f"indices {figures['indices']}")
    print(markdown_table(
        ["caller", "after p50", "after p95", "after p99", "before p50", "before p95", "after/before p50",
         "search p50", "embed p50"],
        [[k, *after[k]["longrag_ms"].values(), before[k]["longrag_ms"]["p50"], before[k]["longrag_ms"]["p95"],
          figures["ratio_p50_after_over_before"][k], after[k]["vector_search_ms"]["p50"],
          after[k]["query_embedding_ms"]["p50"]] for k in CALLERS]))


if __name__ == "__main__":
    main()
