"""Where a `rag serve` request's CPU goes: body, caller, snapshot look-up, query embedding, ranking, packing, response,
and the HTTP server around them; LongRAG and short chunks alternating, on bench/serve_load.py's workspace.

Each stage is timed in this process (CPU clock, one thread, every request made once untimed first), as the /retrieve
handler runs it. Then a real one-worker `rag serve` of the same code answers the same requests over one kept-alive
connection, and its CPU per request (read from /proc) less the stages' sum is what uvicorn, FastAPI and the body
checks cost. `RAG_BENCH_CODE=DIR` runs another checkout's code (in process and as the server), for before/after.
Prints CPU ms per request and stage; writes bench/results/serve-cpu[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(0, str(REPO))
from bench.results_file import write_results  # noqa: E402  (this checkout's results folder, whatever CODE is)

sys.path.insert(0, str(CODE))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import orjson  # noqa: E402

from bench.serve_load import family_cpu, start_serve  # noqa: E402
from pipelines.http_body import parse_body  # noqa: E402
from pipelines.server import RetrieveRequest  # noqa: E402
from rag.query.methods import method  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import load_users, resolve_caller  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions  # noqa: E402

METHODS = ("longrag", "shortchunk")
STAGES = ("body", "caller", "snapshot", "embedding", "ranking", "packing", "response")


class TimedEmbedder:
    """The workspace's embedder, its CPU seconds added up (they are inside the ranking step)."""

    def __init__(self, embedder):
        self.embedder, self.seconds, self.name = embedder, 0.0, embedder.name

    def _timed(self, call, arg):
        start = time.process_time()
        try:
            return call(arg)
        finally:
            self.seconds += time.process_time() - start

    def encode_query(self, text):
        return self._timed(self.embedder.encode_query, text)

    def encode_queries(self, texts):
        return self._timed(self.embedder.encode_queries, texts)


def handle(workspace: Workspace, users: dict, timed: TimedEmbedder, raw: bytes, out: dict[str, float]) -> bytes:
    """The /retrieve handler's work, stage by stage, each stage's CPU seconds added to `out`."""
    clock = time.process_time
    t0 = clock()
    body = RetrieveRequest(**parse_body(raw))
    t1 = clock()
    caller = resolve_caller(user=body.user, users=users)
    t2 = clock()
    snap, as_of = workspace.snapshot(), workspace.resolve_as_of(body.as_of)
    spec, tools = method(body.method), Tools(timed, workspace.counter)
    t3 = clock()
    embedded = timed.seconds
    found = spec.rank(snap, Request(caller, body.question, body.budget, as_of), tools)
    t4 = clock()
    embedded = timed.seconds - embedded
    result = spec._packed(snap, found, body.budget, tools)
    t5 = clock()
    payload = orjson.dumps(result.to_json())
    t6 = clock()
    for stage, seconds in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, embedded, t4 - t3 - embedded, t5 - t4, t6 - t5)):
        out[stage] += seconds
    return payload


def server_cpu_per_request(ws: Path, asks: list[bytes], rounds: int) -> float:
    """CPU seconds a one-worker `rag serve` of CODE spends per request, the asks sent one at a time, kept alive."""
    server, base = start_serve(ws, CODE)
    try:
        http = httpx.Client(base_url=base, timeout=60, headers={"content-type": "application/json"})
        for raw in asks:  # warm, as the in-process stages are
            http.post("/retrieve", content=raw).raise_for_status()
        per_round = []
        for _ in range(rounds):
            before = sum(family_cpu(server.pid).values())
            for raw in asks:
                http.post("/retrieve", content=raw).raise_for_status()
            per_round.append((sum(family_cpu(server.pid).values()) - before) / len(asks))
        return float(np.median(per_round))
    finally:
        server.terminate()
        server.wait(timeout=60)


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
    users = load_users(ws / "users.yaml")
    questions = [q.question for q in load_questions(benchmarks_option(p, args) / "hotpotqa")]
    rng = random.Random(1)
    asks = [orjson.dumps({"question": rng.choice(questions), "user": rng.choice(sorted(users)),
                          "method": METHODS[i % 2], "budget": 2000}) for i in range(args.requests)]
    workspace = Workspace(ws / "workspace")
    timed = TimedEmbedder(workspace.embedder)
    scratch: dict[str, float] = defaultdict(float)
    for raw in asks:
        handle(workspace, users, timed, raw, scratch)
    rounds: list[dict[str, dict[str, float]]] = []
    for _ in range(args.rounds):
        per = {}
        for name in METHODS:
            out: dict[str, float] = defaultdict(float)
            mine = [raw for raw in asks if orjson.loads(raw)["method"] == name]
            for raw in mine:
                handle(workspace, users, timed, raw, out)
            per[name] = {s: 1000 * out[s] / len(mine) for s in STAGES}
        rounds.append(per)
    workspace.close()
    split = {m: {s: round(float(np.median([r[m][s] for r in rounds])), 3) for s in STAGES} for m in METHODS}
    mean = {s: round(float(np.mean([split[m][s] for m in METHODS])), 3) for s in STAGES}
    totals = {m: round(float(np.median([sum(r[m].values()) for r in rounds])), 2) for m in METHODS}
    totals["mean_of_methods"] = round(float(np.mean(list(totals.values()))), 2)
    server = 1000 * server_cpu_per_request(ws, asks, args.rounds)
    figures = {"command": "python bench/serve_cpu.py " + " ".join(sys.argv[1:]), "code": str(CODE),
               "requests": args.requests, "rounds": args.rounds, "load_average": os.getloadavg(),
               "cpu_ms_per_request": totals, "stages_ms": {**split, "mean_of_methods": mean},
               "server_cpu_ms_per_request": round(server, 2),
               "http_server_ms": round(server - totals["mean_of_methods"], 2)}
    write_results(figures, "serve-cpu", args.tag)
    print(json.dumps(totals), json.dumps(mean), "server", figures["server_cpu_ms_per_request"], "load average",
          round(figures["load_average"][0], 1))


if __name__ == "__main__":
    main()
