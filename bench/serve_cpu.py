"""CPU per request of `rag serve`'s work inside a worker, without HTTP: validate the body, retrieve as the user from
the newest snapshot, write the JSON (orjson), as the /retrieve handler does; LongRAG and short chunks alternating.

Runs on the workspace bench/serve_load.py builds (.rag/bench/serve-load) with its users, warm (every request made
once untimed), one thread. `RAG_BENCH_CODE=DIR` runs another checkout's code on the same files, for before/after.
Prints CPU ms per request (median of --rounds passes) per method; writes bench/results/serve-cpu[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import yaml  # noqa: E402

from bench.results_file import write_results  # noqa: E402
from pipelines.server import RetrieveRequest  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions  # noqa: E402

METHODS = ("longrag", "shortchunk")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=120)
    p.add_argument("--rounds", type=int, default=3)
    add_benchmarks_option(p)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ws = REPO / ".rag" / "bench" / "serve-load"
    if not (ws / "users.yaml").is_file():
        p.exit(2, f"{ws}: no serve-load workspace; run bench/serve_load.py once first\n")
    users = {u: Caller(frozenset(g)) for u, g in yaml.safe_load((ws / "users.yaml").read_text()).items()}
    questions = [q.question for q in load_questions(benchmarks_option(p, args) / "hotpotqa")]
    rng = random.Random(1)
    asks = [(rng.choice(questions), rng.choice(list(users)), METHODS[i % 2]) for i in range(args.requests)]
    workspace = Workspace(ws / "workspace")

    def answer(question: str, user: str, method: str) -> bytes:
        body = RetrieveRequest(question=question, user=user, method=method, budget=2000)
        found = workspace.retrieve(body.method, users[body.user], body.question, body.budget,
                                   as_of=workspace.resolve_as_of(body.as_of))
        return orjson.dumps(found.to_json())

    for ask in asks:  # warm: read state, token memory, caches
        answer(*ask)
    ms: dict[str, list[float]] = {m: [] for m in METHODS}
    for _ in range(args.rounds):
        for method in METHODS:
            start = time.process_time()
            for ask in asks:
                if ask[2] == method:
                    answer(*ask)
            ms[method].append((time.process_time() - start) * 1000 / sum(a[2] == method for a in asks))
    code = os.environ.get("RAG_BENCH_CODE", str(REPO))
    figures = {"command": "python bench/serve_cpu.py " + " ".join(sys.argv[1:]), "code": code,
               "requests": args.requests, "rounds": args.rounds, "load_average": os.getloadavg(),
               "cpu_ms_per_request": {m: round(float(np.median(v)), 2) for m, v in ms.items()}}
    figures["cpu_ms_per_request"]["mean_of_methods"] = round(float(np.mean(list(
        figures["cpu_ms_per_request"].values()))), 2)
    write_results(figures, "serve-cpu", args.tag)
    print(json.dumps(figures["cpu_ms_per_request"]), "load average", figures["load_average"][0])
    workspace.close()


if __name__ == "__main__":
    main()
