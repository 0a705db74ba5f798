"""Latency of each added hop: LongRAG with 1 hop, 2 hops of one and two seeds (the default), 3 hops, the hybrid
and short chunks, side by side in one run.

Warm (every question asked once untimed), one torch thread, the methods' registered retrieve functions at one
budget, methods interleaved question by question so load from other jobs hits them alike. Prints p50/p95 ms
per variant and the added cost of each hop; writes bench/results/hop-latency.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.multihop import CALLER, parse_variant  # noqa: E402
from rag.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.evaluation.workspace import prepare_workspace  # noqa: E402
from rag.hybrid import hybrid_retrieve  # noqa: E402
from rag.longrag import longrag_retrieve, shortchunk_retrieve  # noqa: E402
from rag.summary import markdown_table  # noqa: E402
from rag.tokens import default_counter  # noqa: E402


def call(variant, snap, embedder, counter, question: str, budget: int):
    if variant.method == "hybrid":
        return hybrid_retrieve(snap, embedder, counter, CALLER, question, budget, variant.config)
    fn = longrag_retrieve if variant.method == "longrag" else shortchunk_retrieve
    return fn(snap, embedder.encode_query, counter, CALLER, question, budget, variant.config)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--limit", type=int, default=100, help="report-half questions timed")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.embedding import Embedder

    embedder, counter = Embedder(threads=1), default_counter()
    prepared = prepare_workspace(root / args.benchmark, REPO / ".rag" / "bench" / args.benchmark, embedder,
                                 counter)
    snap = prepared.reader.snapshot()
    questions = split_halves(args.benchmark, load_questions(root / args.benchmark))["report"][: args.limit]
    specs = ["shortchunk", "longrag:hops=1", "longrag:hop_seeds=1", "longrag", "longrag:hops=3", "hybrid:hops=1",
             "hybrid"]
    variants = [parse_variant(s) for s in specs]
    for q in questions:  # warm: the BM25 channel, the sentence store, LanceDB's caches
        for v in variants:
            call(v, snap, embedder, counter, q.question, args.budget)
    ms: dict[str, list[float]] = {v.name: [] for v in variants}
    for q in questions:
        for v in variants:
            start = time.perf_counter()
            call(v, snap, embedder, counter, q.question, args.budget)
            ms[v.name].append((time.perf_counter() - start) * 1000)
    figures = {"command": "python bench/hop_latency.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "questions": len(questions), "budget": args.budget, "load_average": os.getloadavg(),
               "latency_ms": {n: {"p50": round(float(np.percentile(v, 50)), 1),
                                  "p95": round(float(np.percentile(v, 95)), 1)} for n, v in ms.items()}}
    base = figures["latency_ms"]["longrag:hops=1"]
    figures["added_over_one_hop_ms"] = {n: {k: round(v[k] - base[k], 1) for k in ("p50", "p95")}
                                        for n, v in figures["latency_ms"].items()
                                        if n.startswith("longrag") and n != "longrag:hops=1"}
    (REPO / "bench" / "results" / "hop-latency.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(markdown_table(["variant", "p50 ms", "p95 ms"],
                         [[n, v["p50"], v["p95"]] for n, v in figures["latency_ms"].items()]))
    print("added over one hop:", figures["added_over_one_hop_ms"], "load average", figures["load_average"])
    prepared.close()


if __name__ == "__main__":
    main()
