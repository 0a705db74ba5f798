"""Answers from the local LLM reader on a stratified, seeded sample, every method, paired CIs and win counts.

The sample is drawn (by question type × hops, in proportion, seeded) from the report half of the benchmark's dev
questions (rag.sources.benchmarks.half_of; the tune half is where ELITE's settings are chosen, bench/elite_llm_cost.py). Writes
bench/results/eval-llm-sample-<name>.json and the full report under bench/results/eval/llm-sample-<name>/.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import RESULTS, write_results  # noqa: E402
from rag.answer.llm import chat_model  # noqa: E402
from rag.evaluation import (  # noqa: E402
    EvalConfig,
    Evaluator,
    evaluate,
    load_questions,
    open_prepared,
    summarise,
    write_report,
)
from rag.evaluation.run import answer_sample  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, half_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="hotpotqa")
    parser.add_argument("--n", type=int, default=8, help="questions in the sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="longrag,longrag-units,elite,hybrid,shortchunk")
    parser.add_argument("--budgets", default="1000,2000")
    parser.add_argument("--reader", default="local", choices=("local", "endpoint"))
    parser.add_argument("--workspace-root", default=str(REPO / ".rag" / "bench"))
    add_benchmarks_option(parser)
    args = parser.parse_args()
    name = args.benchmark
    root = benchmarks_option(parser, args)
    report_half = [q for q in load_questions(root / name / "questions.jsonl") if half_of(name, q.qid) == "report"]
    chosen = answer_sample(report_half, args.n, args.seed)
    questions = [q for q in report_half if q.qid in chosen]
    config = EvalConfig(tuple(args.methods.split(",")), tuple(int(b) for b in args.budgets.split(",")))
    embedder, counter = Embedder(threads=1), default_counter()
    model = chat_model(args.reader)
    command = "python bench/eval_llm_sample.py " + " ".join(sys.argv[1:])
    prepared = open_prepared(name, Path(args.workspace_root) / name, embedder, counter)
    start = time.perf_counter()
    try:
        evaluation = evaluate(prepared, questions, Evaluator(config, embedder, counter, model))
        summary = summarise(evaluation, prepared, command)
    finally:
        prepared.close()
    wall = time.perf_counter() - start
    write_report(RESULTS / "eval" / f"llm-sample-{name}", evaluation, summary)
    figures = {"command": command, "benchmark": name, "half": "report (rag.sources.benchmarks.half_of)", "seed": args.seed,
               "questions": [q.qid for q in questions], "strata": sorted({f"{q.kind}/{q.hops}" for q in questions}),
               "reader": summary["reader"], "wall_s": round(wall, 1), "load_average": os.getloadavg(),
               "cells": [{k: c[k] for k in ("method", "budget", "f1", "exact_match", "completeness", "cited_gold",
                                            "answer_in_gold", "generate_s", "input_tokens_mean")}
                         for c in summary["results"]],
               "differences": [d for d in summary["differences"] if d["metric"] == "f1"]}
    out = write_results(figures, f"eval-llm-sample-{name}")
    print(f"{name}: {len(questions)} questions × {len(config.methods)} methods × {len(config.budgets)} budgets, "
          f"reader {summary['reader']}, {wall:.0f} s")
    for c in figures["cells"]:
        f1 = c["f1"]
        print(f"  {c['method']:>14} @{c['budget']}: F1 {f1['mean']:.3f} [{f1['low']:.3f}, {f1['high']:.3f}]  "
              f"cited gold {c['cited_gold']['mean']:.2f}  answer in gold {c['answer_in_gold']['mean']:.2f}")
    for d in figures["differences"]:
        print(f"  @{d['budget']} {d['a']} − {d['b']}: F1 {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}], "
              f"wins {d['a_wins']}/{d['b_wins']}/{d['ties']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
