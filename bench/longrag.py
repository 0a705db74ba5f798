"""LongRAG retrieval benchmark: evidence recall and source completeness at several budgets, side by side with
the short-chunk baseline, plus query latency, on one half of the fixed tune/report split (rag.sources.benchmarks.half_of;
report by default), with bootstrap intervals. Prints a table and writes bench/results/longrag-<name>-<half>.json.

Each benchmark's whole docs.jsonl is the corpus (links derived from titles, one default ACL); the workspace
is kept under .rag/bench/<name> so a re-run only ingests what changed.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.query.methods import method as registered  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import (  # noqa: E402
    HALVES,
    add_benchmarks_option,
    benchmarks_option,
    complete,
    evidence_recall,
    load_questions,
    split_halves,
)
from rag.store.settings import IngestSettings  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

METHODS = ("longrag", "shortchunk")  # through the registry, with the config under test


def run(folder: Path, budgets: list[int], limit: int | None, config: LongRAGConfig, half: str) -> dict:
    name = folder.name
    ws = REPO / ".rag" / "bench" / name
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(folder / "docs.jsonl")], default_acl=("bench",),
                              derive_links=True))
    reader = Workspace(ws, embedder=Embedder(threads=1))
    snap, embedder, counter, caller = reader.snapshot(), reader.embedder, reader.counter, Caller(frozenset({"bench"}))
    questions = split_halves(name, load_questions(folder))[half][:limit]
    rows, latency = [], {m: [] for m in METHODS}
    tools = Tools(embedder, counter, longrag=config)
    for method in METHODS:
        for budget in budgets:
            recall, full, used = [], [], []
            for q in questions:
                t = time.perf_counter()
                result = registered(method).run(snap, Request(caller, q.question, budget), tools)
                latency[method].append(time.perf_counter() - t)
                assert result.tokens <= budget
                ids = {i.doc_id for i in result.items}
                recall.append(evidence_recall(ids, q.gold_doc_ids))
                full.append(complete(ids, q.gold_doc_ids))
                used.append(result.tokens)
            rows.append({"method": method, "budget": budget, "evidence_recall": str(bootstrap_ci(recall)),
                         "completeness": str(bootstrap_ci(full)), "mean_tokens": round(float(np.mean(used)))})
    ms = {m: np.array(v) * 1000 for m, v in latency.items()}
    return {"benchmark": name, "half": half, "questions": len(questions), "config": vars(config), "results": rows,
            "latency_ms": {m: {"p50": round(float(np.percentile(v, 50)), 1), "p95": round(float(np.percentile(v, 95)), 1)}
                           for m, v in ms.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", help="hotpotqa, musique, 2wikimultihopqa (default: all three)")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--limit", type=int, help="first N questions of the half only")
    p.add_argument("--half", choices=HALVES, default="report", help="tune only to choose weights; report to quote")
    p.add_argument("--link-boost", type=float, help="a fixed link boost (default: derived from the corpus)")
    p.add_argument("--lexical-weight", type=float, default=LongRAGConfig.lexical_weight)
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    config = LongRAGConfig(lexical_weight=args.lexical_weight)
    if args.link_boost is not None:
        config = replace(config, link_rule="fixed", link_boost=args.link_boost)
    budgets = [int(b) for b in args.budgets.split(",")]
    for name in args.benchmark or ["hotpotqa", "musique", "2wikimultihopqa"]:
        figures = run(root / name, budgets, args.limit, config, args.half)
        figures["command"] = "python bench/longrag.py " + " ".join(sys.argv[1:])
        write_results(figures, f"longrag-{name}-{args.half}")
        print(f"\n{name} ({args.half} half, {figures['questions']} questions), latency ms {figures['latency_ms']}")
        print(markdown_table(["method", "budget", "evidence recall", "completeness", "mean tokens"],
                             [list(r.values()) for r in figures["results"]]))


if __name__ == "__main__":
    main()
