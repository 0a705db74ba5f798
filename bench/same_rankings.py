"""Do two checkouts rank alike? Every sample question, as its user, through each vector method, at three budgets.

Runs the code of this checkout, or of `RAG_BENCH_CODE=DIR` (a git worktree of another commit), on the demo
workspace (`rag demo`) and writes each (question, method, budget)'s packed documents and scores to
bench/results/rankings-<tag>.json; `--compare A B` reads two such files and reports identical lists, the
largest score difference and completeness (all gold documents in the context) per method and budget.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from bench.results_file import results_path, write_results  # noqa: E402

METHODS = ("longrag", "longrag-1hop", "shortchunk")
BUDGETS = (1000, 2000, 4000)
SAMPLES = REPO / "samples"


def collect(workspace: Path) -> dict:
    import yaml

    from rag.query.workspace import Workspace
    from rag.retrieval.callers import Caller
    from rag.sources.benchmarks import load_questions

    users = yaml.safe_load((SAMPLES / "users.yaml").read_text())
    reader, out = Workspace(workspace), {}
    for q in load_questions(SAMPLES / "questions.jsonl"):
        caller = Caller(frozenset(users[q.asked_as] if isinstance(q.asked_as, str) else q.asked_as))
        for method in METHODS:
            for budget in BUDGETS:
                result = reader.retrieve(method, caller, q.question, budget)
                out[f"{q.qid}|{method}|{budget}"] = {"docs": [i.doc_id for i in result.items],
                                                     "scores": [round(i.score, 6) for i in result.items],
                                                     "gold": list(q.gold_doc_ids)}
    return out


def compare(a: dict, b: dict) -> dict:
    report = {}
    for method in METHODS:
        for budget in BUDGETS:
            keys = [k for k in a if k.split("|")[1:] == [method, str(budget)]]
            same = sum(a[k]["docs"] == b[k]["docs"] for k in keys)
            gap = max((abs(x - y) for k in keys if a[k]["docs"] == b[k]["docs"]
                       for x, y in zip(a[k]["scores"], b[k]["scores"])), default=0.0)
            done = {n: sum(set(r[k]["gold"]) <= set(r[k]["docs"]) for k in keys) / len(keys)
                    for n, r in (("a", a), ("b", b))}
            report[f"{method}@{budget}"] = {"questions": len(keys), "identical_lists": same,
                                            "max_score_difference": round(gap, 6),
                                            "completeness": {n: round(v, 3) for n, v in done.items()},
                                            "differing": [k.split("|")[0] for k in keys if a[k]["docs"] != b[k]["docs"]]}
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, default=REPO / ".rag" / "demo")
    p.add_argument("--tag", default="after")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two tags to compare instead of collecting")
    args = p.parse_args()
    if args.compare:
        a, b = (json.loads(results_path(f"rankings-{t}").read_text())["rankings"] for t in args.compare)
        figures = {"command": "python bench/same_rankings.py " + " ".join(sys.argv[1:]), "a": args.compare[0],
                   "b": args.compare[1], "by_method_budget": compare(a, b)}
        write_results(figures, f"rankings-{args.compare[0]}-vs-{args.compare[1]}")
        print(json.dumps(figures["by_method_budget"], indent=1))
        return
    figures = {"command": "python bench/same_rankings.py " + " ".join(sys.argv[1:]),
               "code": os.environ.get("RAG_BENCH_CODE", str(REPO)), "rankings": collect(args.workspace)}
    write_results(figures, f"rankings-{args.tag}")
    print(f"{len(figures['rankings'])} rankings written")


if __name__ == "__main__":
    main()
