"""ELITE with the LLM policy on the local model: calls, tokens and seconds per question, and retrieval quality
against the offline policy on the same questions, for ELITE's default settings and cheaper ones.

Questions: a stratified, seeded sample of the tune half (rag.sources.benchmarks.half_of) of the benchmark's dev questions.
Writes bench/results/elite-llm-cost-<name>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench.results_file import results_path, write_json  # noqa: E402
from rag.answer.llm import chat_model  # noqa: E402
from rag.elite import EliteConfig  # noqa: E402
from rag.evaluation import EvalConfig, Evaluator, evaluate, load_questions, open_prepared  # noqa: E402
from rag.evaluation.run import answer_sample  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, half_of  # noqa: E402

SETTINGS = {"default": EliteConfig(),
            "cheap": replace(EliteConfig(), importance_chunks=2, noise_samples=1, max_rounds=2),
            # importance only where it can end the search: the judge decides from the chunks alone elsewhere
            "deciding": replace(EliteConfig(), judge_sees_importance=False),
            "deciding-cheap": replace(EliteConfig(), judge_sees_importance=False, importance_chunks=2, noise_samples=1,
                                      max_rounds=2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="hotpotqa")
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", default="cheap,default")
    parser.add_argument("--budgets", default="1000,2000")
    parser.add_argument("--reader", default="local", choices=("local", "endpoint"), help="the policy's LLM")
    parser.add_argument("--workspace-root", default=str(REPO / ".rag" / "bench"))
    add_benchmarks_option(parser)
    args = parser.parse_args()
    name = args.benchmark
    root = benchmarks_option(parser, args)
    tune = [q for q in load_questions(root / name / "questions.jsonl") if half_of(name, q.qid) == "tune"]
    chosen = answer_sample(tune, args.n, args.seed)
    questions = [q for q in tune if q.qid in chosen]
    embedder, counter = Embedder(threads=1), default_counter()
    model = chat_model(args.reader)
    budgets = tuple(int(b) for b in args.budgets.split(","))
    out = results_path(f"elite-llm-cost-{name}")
    figures = {"command": "python bench/elite_llm_cost.py " + " ".join(sys.argv[1:]), "benchmark": name,
               "half": "tune (rag.sources.benchmarks.half_of)", "questions": [q.qid for q in questions],
               "load_average": os.getloadavg(), "runs": {}}
    runs = [("offline", "default", None)] + [(f"llm:{s}", s, model) for s in args.settings.split(",")]
    for label, setting, policy_model in runs:
        prepared = open_prepared(name, Path(args.workspace_root) / name, embedder, counter)
        config = EvalConfig(("elite",), budgets, answer_sample=0,
                            elite_policy="reader" if policy_model is not None else "offline")
        start = time.perf_counter()
        try:
            evaluation = evaluate(prepared, questions, Evaluator(config, embedder, counter, policy_model,
                                                                 elite_config=SETTINGS[setting]))
        finally:
            prepared.close()
        wall = time.perf_counter() - start
        first = [r for r in evaluation.rows if r.budget == budgets[0]]  # one exploration per question
        figures["runs"][label] = {
            "settings": asdict(SETTINGS[setting]), "policy": evaluation.elite_policy, "wall_s": round(wall, 1),
            "seconds_per_question": round(sum(r.retrieve_s for r in first) / len(first), 2),
            "llm_calls_per_question": round(sum(r.llm_calls for r in first) / len(first), 1),
            "input_tokens_per_question": round(sum(r.input_tokens for r in first) / len(first)),
            "output_tokens_per_question": round(sum(r.output_tokens for r in first) / len(first)),
            "by_budget": {b: {"completeness": _mean([r.complete for r in evaluation.rows if r.budget == b]),
                              "evidence_recall": _mean([r.evidence_recall for r in evaluation.rows if r.budget == b])}
                          for b in budgets}}
        print(label, json.dumps(figures["runs"][label]), flush=True)
        write_json(out, figures)
    print(f"wrote {out}")


def _mean(values) -> float:
    return round(sum(float(v) for v in values) / len(values), 3)


if __name__ == "__main__":
    main()
