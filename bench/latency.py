"""Query latency at ≥ 100K sub-chunks, with and without a selective ACL pre-filter.

Builds (once, under .rag/bench/latency) a workspace holding the three benchmark corpora five times over,
each copy readable by its own group, through the normal ingest pipeline (the copies share texts, so the
vector cache embeds each text once). Then times `longrag_retrieve` end to end (query embedding, vector
search, second pass, BM25, catalog read, packing) and the bare vector search, for a caller in one group
(a 20% pre-filter) and a caller in all five. Writes bench/results/latency.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines.cli import run_ingest  # noqa: E402
from rag.access import Caller  # noqa: E402
from rag.benchmarks import load_questions  # noqa: E402
from rag.catalog import Catalog  # noqa: E402
from rag.embedding import Embedder  # noqa: E402
from rag.index import SubchunkIndex  # noqa: E402
from rag.longrag import longrag_retrieve  # noqa: E402
from rag.summary import markdown_table  # noqa: E402
from rag.tokens import default_counter  # noqa: E402

BENCHMARKS = REPO.parent / "shared" / "benchmarks"
NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]
COPIES = 5


def build(ws: Path) -> dict:
    src = ws / "sources"
    src.mkdir(parents=True, exist_ok=True)
    for k in range(COPIES):
        for name in NAMES:
            out = src / f"copy{k}-{name}.jsonl"
            if not out.exists():
                with (BENCHMARKS / name / "docs.jsonl").open() as f, out.open("w") as g:
                    for line in f:
                        doc = json.loads(line)
                        g.write(json.dumps({"doc_id": f"c{k}:{doc['doc_id']}", "title": doc["title"],
                                            "text": doc["text"], "acl": [f"group-{k}"]}) + "\n")
    return run_ingest(str(ws), [str(src)], derive_links=True)


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50": round(float(np.percentile(ms, 50)), 1), "p95": round(float(np.percentile(ms, 95)), 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args()
    ws = REPO / ".rag" / "bench" / "latency"
    counts = build(ws)
    catalog, index = Catalog(ws / "catalog.duckdb"), SubchunkIndex(ws / "lancedb")
    embedder, counter = Embedder(threads=1), default_counter()
    questions = [q.question for name in NAMES for q in load_questions(BENCHMARKS / name)][: args.queries]
    callers = {"one group (20% of rows)": Caller(frozenset({"group-0"})),
               "all five groups": Caller(frozenset(f"group-{k}" for k in range(COPIES)))}
    longrag_retrieve(catalog, index, embedder.encode_query, counter, callers["all five groups"], "warm up", 2000)
    rows, figures = [], {"subchunks": index.count(), "documents": counts["documents"],
                         "indices": sorted(i.name for i in index.table.list_indices())}
    for label, caller in callers.items():
        full, bare, embed = [], [], []
        for q in questions:
            t = time.perf_counter()
            vector = embedder.encode_query(q)
            embed.append(time.perf_counter() - t)
            t = time.perf_counter()
            index.search(vector, sorted(caller.groups), 200)
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            longrag_retrieve(catalog, index, embedder.encode_query, counter, caller, q, 2000)
            full.append(time.perf_counter() - t)
        figures[label] = {"longrag_retrieve_ms": percentiles(full), "vector_search_ms": percentiles(bare),
                          "query_embedding_ms": percentiles(embed)}
        rows.append([label, *percentiles(full).values(), *percentiles(bare).values(), *percentiles(embed).values()])
    figures["command"] = "python bench/latency.py " + " ".join(sys.argv[1:])
    (REPO / "bench" / "results" / "latency.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(f"{figures['subchunks']} sub-chunks, {figures['documents']} documents, indices {figures['indices']}")
    print(markdown_table(["caller", "retrieve p50", "retrieve p95", "search p50", "search p95", "embed p50",
                          "embed p95"], rows))


if __name__ == "__main__":
    main()
