"""Do two checkouts rank alike? Every sample question, as its user, through each vector method, at three budgets.

Runs the code of this checkout, or of `RAG_BENCH_CODE=DIR` (a git worktree of another commit), on the demo
workspace (`rag demo`), or with `--benchmark NAME` on that benchmark's questions as one caller (the workspace
bench/hop_latency.py prepares, .rag/bench/NAME), and writes each (question, method, budget)'s packed documents and scores to
bench/results/rankings-<tag>.json; `--compare A B` reads two such files and reports identical lists, the
largest score difference and completeness (all gold documents in the context) per method and budget. `--as-of`
reads every question as of now, through the as-of path (the past-version state of the newest publish).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from bench.results_file import results_path, write_results  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402

METHODS = ("longrag", "longrag-1hop", "longrag-extract", "shortchunk")  # those the checkout registers
BENCH_CALLER = Caller(frozenset({"bench"}))  # what the benchmark workspaces' documents admit (bench/multihop.py)
BUDGETS = (1000, 2000, 4000)
SAMPLES = REPO / "samples"


def collect(workspace: Path, benchmark: Path | None, as_of: bool) -> dict:
    import yaml

    from rag.query.methods import METHODS as REGISTERED
    from rag.query.workspace import Workspace
    from rag.retrieval.callers import Caller
    from rag.sources.benchmarks import load_questions

    users = yaml.safe_load((SAMPLES / "users.yaml").read_text())
    reader, out = Workspace(workspace), {}
    when = reader.resolve_as_of(datetime.now(timezone.utc).isoformat()) if as_of else None
    for q in load_questions(benchmark or SAMPLES / "questions.jsonl"):
        caller = BENCH_CALLER if benchmark else Caller(frozenset(users[q.asked_as] if isinstance(q.asked_as, str)
                                                                 else q.asked_as))
        for method in (m for m in METHODS if m in REGISTERED):
            for budget in BUDGETS:
                result = reader.retrieve(method, caller, q.question, budget, as_of=when)
                out[f"{q.qid}|{method}|{budget}"] = {"docs": [i.doc_id for i in result.items],
                                                     "scores": [round(i.score, 6) for i in result.items],
                                                     "gold": list(q.gold_doc_ids)}
    return out


def prepared(folder: Path) -> tuple[Path, Path]:
    """The benchmark's questions file and its workspace, brought up to date (as bench/hop_latency.py does)."""
    from rag.evaluation.prepared import prepare_workspace
    from rag.models.embedders import Embedder
    from rag.models.tokens import default_counter

    workspace = REPO / ".rag" / "bench" / folder.name
    prepare_workspace(folder, workspace, Embedder(threads=1), default_counter()).reader.close()
    return folder / "questions.jsonl", workspace


def compare(a: dict, b: dict) -> dict:
    report = {}
    for method in METHODS:
        for budget in BUDGETS:
            keys = [k for k in a if k.split("|")[1:] == [method, str(budget)] and k in b]
            if not keys:  # a method one checkout does not register
                continue
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
    p.add_argument("--benchmark", help="a benchmark's questions on its prepared workspace instead of the demo's")
    add_benchmarks_option(p)
    p.add_argument("--as-of", action="store_true", help="read as of now, through the as-of path")
    args = p.parse_args()
    if args.compare:
        a, b = (json.loads(results_path(f"rankings-{t}").read_text())["rankings"] for t in args.compare)
        figures = {"command": "python bench/same_rankings.py " + " ".join(sys.argv[1:]), "a": args.compare[0],
                   "b": args.compare[1], "by_method_budget": compare(a, b)}
        write_results(figures, f"rankings-{args.compare[0]}-vs-{args.compare[1]}")
        print(json.dumps(figures["by_method_budget"], indent=1))
        return
    benchmark, workspace = None, args.workspace
    if args.benchmark:
        benchmark, workspace = prepared(benchmarks_option(p, args) / args.benchmark)
    figures = {"command": "python bench/same_rankings.py " + " ".join(sys.argv[1:]),
               "code": os.environ.get("RAG_BENCH_CODE", str(REPO)),
               "rankings": collect(workspace, benchmark, args.as_of)}
    write_results(figures, f"rankings-{args.tag}")
    print(f"{len(figures['rankings'])} rankings written")


if __name__ == "__main__":
    main()
