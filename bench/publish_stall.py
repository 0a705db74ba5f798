"""How long a serving worker's queue waits around a publish, in CPU seconds (so a loaded machine does not blur it).

One worker's retrieval queue is run in this process as `rag serve` runs it: one thread, first come first served,
`--depth` requests always waiting (8 clients on 2 workers keep 4 in each queue), LongRAG and short chunks
alternating as random users of the serve-load workspace (bench/serve_load.py builds it). Mid-way, a real
`rag ingest` re-publishes 10% of the documents (it publishes twice: documents, then the index). Every job the
queue runs (a request, or a part of a publish's read state) is timed on the queue's thread clock; a request's
CPU latency is the CPU of the jobs it waited behind plus its own. Runs both ways to build a publish's read
state, back to back: by the request that first sees it (`--build-on-request`, the only way before session 38)
and a part at a time between requests (the default). `RAG_BENCH_CODE=DIR` runs another checkout's read side on the
same workspace. Writes bench/results/publish-stall[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402  (this checkout's results folder, whatever CODE is)

sys.path.insert(0, str(CODE))

from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions  # noqa: E402

READ_SIDE = Path(sys.modules["rag"].__file__).parent.parent  # the checkout whose rag/ runs: CODE's
from bench.serve_load import GROUPS, republish_tenth  # noqa: E402  (its own rag imports: READ_SIDE's, already loaded)


def run(ws: Path, src: Path, questions: list[str], between: bool, seconds: float, depth: int, seed: int) -> dict:
    """One queue for `seconds`, a re-publish started a quarter in: every job's kind, CPU and the CPU waited."""
    workspace = Workspace(ws)
    workspace.embedder.encode_query("warm up")
    workspace.snapshot().warm()
    compute = ThreadPoolExecutor(max_workers=1)
    jobs: list[tuple[str, float]] = []  # (kind, CPU s), in run order
    clock = [0.0]  # the queue thread's CPU so far

    def timed(kind: str, call):
        def job():
            start = time.thread_time()
            result = call()
            used = time.thread_time() - start
            clock[0] += used
            jobs.append((kind, used))
            return result, clock[0]
        return job

    if between:
        workspace.build_between(lambda step: compute.submit(timed("build", step)))
    rng, users = random.Random(seed), [frozenset(random.Random(k).sample(GROUPS, 2)) for k in range(10)]
    waits: list[float] = []  # per request, the queue's CPU from its arrival to its answer

    def ask(n: int):
        caller, method = Caller(rng.choice(users)), ("longrag", "shortchunk")[n % 2]
        question = rng.choice(questions)
        arrived = clock[0]  # jobs still running when it arrives count in full: an upper bound by one job
        return compute.submit(timed("request", lambda: workspace.retrieve(method, caller, question, 2000))), arrived

    stop, pending, n, publish = time.monotonic() + seconds, [], 0, None
    ingest_at = time.monotonic() + seconds / 4

    def going() -> bool:  # until `seconds` have passed and the ingest's last publish has been served for 5 s
        if publish is not None and publish.poll() is None:
            return True
        return time.monotonic() < max(stop, ended[0] + 5)

    ended = [0.0]
    while going() or pending:
        if publish is not None and publish.poll() is not None and not ended[0]:
            ended[0] = time.monotonic()
        while len(pending) < depth and going():
            pending.append(ask(n))
            n += 1
        future, arrived = pending.pop(0)
        waits.append(future.result()[1] - arrived)
        if publish is None and time.monotonic() >= ingest_at:
            republish_tenth(src, seed + n)
            publish = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(src),
                                        "--workspace", str(ws), "--derive-links", "titles", "--json"], cwd=REPO,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    compute.shutdown()
    returncode = publish.wait() if publish is not None else None
    latency = np.array(waits) * 1000
    builds = [cpu for kind, cpu in jobs if kind == "build"]
    requests = [cpu for kind, cpu in jobs if kind == "request"]
    return {"mode": "between requests" if between else "on request", "requests": len(requests),
            "ingest_returncode": returncode,
            "request_cpu_ms": {"p50": round(float(np.percentile(requests, 50)) * 1000, 1),
                               "max": round(max(requests) * 1000, 1)},
            "largest_job_cpu_ms": round(max(cpu for _, cpu in jobs) * 1000, 1),
            "build_parts_cpu_ms": [round(c * 1000, 1) for c in builds],
            "cpu_latency_ms": {p: round(float(np.percentile(latency, int(p[1:]))), 1) for p in ("p50", "p95", "p99")}
            | {"max": round(float(latency.max()), 1)},
            "slowest_requests_cpu_ms": [round(float(x), 1) for x in sorted(latency)[-8:]]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmarks_option(p)
    p.add_argument("--seconds", type=float, default=30, help="at least; it runs until 5 s after the ingest")
    p.add_argument("--depth", type=int, default=4, help="requests waiting in the worker's queue")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    root = REPO / ".rag" / "bench" / "serve-load"
    if not (root / "workspace").exists():
        p.exit(2, "run bench/serve_load.py first: it builds the workspace this bench re-publishes\n")
    questions = [q.question for q in load_questions(benchmarks_option(p, args) / "hotpotqa")]
    runs = [run(root / "workspace", root / "docs.jsonl", questions, between, args.seconds, args.depth, args.seed)
            for between in (False, True)]
    figures = {"runs": runs, "load_average": os.getloadavg(), "code": str(READ_SIDE),
               "command": "python bench/publish_stall.py " + " ".join(sys.argv[1:])}
    write_results(figures, "publish-stall", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
