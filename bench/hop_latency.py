"""Latency of each added hop: LongRAG with 1 hop, 2 hops of one and two seeds (the default), 3 hops, the hybrid
and short chunks, side by side in one run, each broken down into embedding, search, ranking and packing.

Warm (every question asked once untimed), one embedding thread, `--repeats K` times per question (each part's
least of the K kept: a loaded machine only ever adds time), the methods' registered retrieve functions at one
budget, methods interleaved question by question so load from other jobs hits them alike. Prints p50/p95 ms
per variant, the median parts and the added cost of each hop; writes bench/results/hop-latency[-TAG].json.
`RAG_BENCH_CODE=DIR` runs another checkout's code (e.g. the commit before a change, in a git worktree) on the
same workspace files, so before and after are measured by the same script. `--workspace DIR` asks the
benchmark's questions on a workspace built already (e.g. bench/replicated.py's copies at 110K or 1M sub-chunks)
as a caller of `--groups`. It also records the read state's build, part by part (what a server does once per
publish), and the process's resident memory before that build and once the questions ran (it then holds what a
serving process holds, plus what opening and checking the workspace left allocated). `--as-of` reads every question
as of now through the as-of path, and records the first question's time apart (it builds the past state's parts).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from bench.multihop import CALLER, parse_variant  # noqa: E402
from bench.results_file import commit, write_results  # noqa: E402
from rag.evaluation.prepared import open_prepared, prepare_workspace  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.hybrid import hybrid_explore, pack_hybrid  # noqa: E402
from rag.query.methods import method as registered  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.read_state import WARM_PARTS  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

SPECS = ["shortchunk", "longrag:hops=1", "longrag:hop_seeds=1", "longrag", "longrag:hops=3", "hybrid:hops=1", "hybrid"]
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # --clock cpu: the process's CPU seconds (every thread), which
# other jobs on a saturated machine inflate far less than wall time


class Parts:
    """Seconds spent in embedding, sub-chunk search (vector search and the candidate units' exact scores) and
    packing, wrapped around whichever of those functions the code under test has."""

    def __init__(self):
        import rag.retrieval.longrag as longrag

        self.seconds = {"embed": 0.0, "search": 0.0, "pack": 0.0}
        try:
            import rag.retrieval.shortchunk as shortchunk  # the baseline's own module, where it has one
        except ImportError:
            shortchunk = None
        for module in filter(None, (longrag, shortchunk)):
            for name in ("search", "rescore", "dense_hits", "nearest", "dense_search", "state_search"):
                if hasattr(module, name):
                    setattr(module, name, self.timed(getattr(module, name), "search"))
        longrag.pack_ranked = self.timed(longrag.pack_ranked, "pack")
        try:
            import rag.retrieval.extracts as extracts  # longrag-extract's packing
            extracts.pack_extracts = self.timed(extracts.pack_extracts, "pack")
        except ImportError:
            pass
        try:
            from rag.retrieval.dense import Dense
            for name in ("of_units", "unit_rows"):  # the candidate units' sub-chunks (their rows)
                if hasattr(Dense, name):
                    setattr(Dense, name, self.timed(getattr(Dense, name), "search"))
        except ImportError:
            pass

    def timed(self, fn, part):
        def wrapper(*args, **kwargs):
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] += clock() - start
        return wrapper

    def reset(self) -> dict:
        out = dict(self.seconds)
        self.seconds = dict.fromkeys(self.seconds, 0.0)
        return out


class TimedEmbedder:
    def __init__(self, embedder, parts: Parts):
        self._embedder, self.name = embedder, embedder.name
        self.encode_query = parts.timed(embedder.encode_query, "embed")
        if hasattr(embedder, "encode_queries"):
            self.encode_queries = parts.timed(embedder.encode_queries, "embed")

    def __getattr__(self, name):
        return getattr(self._embedder, name)


def call(variant, snap, embedder, counter, question: str, budget: int, caller: Caller = CALLER, as_of=None):
    request, tools = Request(caller, question, budget, as_of), Tools(embedder, counter, longrag=variant.config)
    if variant.method == "hybrid":
        return pack_hybrid(hybrid_explore(snap, request, tools, variant.config), budget)
    return registered(variant.method).run(snap, request, tools)


def read_state_build(snap) -> dict:
    """Wall and CPU seconds of building each part of the snapshot's read state, in the order a server warms them."""
    out = {}
    for part in WARM_PARTS:
        wall, cpu = time.perf_counter(), time.process_time()
        snap.build(part)
        out[part] = {"seconds": round(time.perf_counter() - wall, 2),
                     "cpu_seconds": round(time.process_time() - cpu, 2)}
    out["total"] = {k: round(sum(v[k] for v in out.values()), 2) for k in ("seconds", "cpu_seconds")}
    return out


def memory_mb() -> dict:
    """This process's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": int(status["VmRSS"].split()[0]) // 1024, "peak_rss_mb": int(status["VmHWM"].split()[0]) // 1024}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--budget", type=int, default=2000)
    p.add_argument("--limit", type=int, default=100, help="report-half questions timed")
    add_benchmarks_option(p)
    p.add_argument("--tag", default="", help="suffix of the results file (e.g. before, after)")
    p.add_argument("--embedder", choices=("minilm", "minilm-int8"), default="minilm",
                   help="the workspace's embedder (minilm-int8: the code under test must have it)")
    p.add_argument("--variants", default=";".join(SPECS), help="variants separated by ';' (bench/multihop.py's)")
    p.add_argument("--clock", choices=list(CLOCKS), default="wall",
                   help="wall time, or the process's CPU time (for a machine other jobs load)")
    p.add_argument("--repeats", type=int, default=1,
                   help="time each question this many times and keep each part's least (a loaded machine's noise)")
    p.add_argument("--workspace", type=Path, help="a built workspace to ask on (its embedder must be --embedder's)")
    p.add_argument("--groups", default="", help="the caller's groups, comma-separated (default: the benchmark's)")
    p.add_argument("--as-of", action="store_true",
                   help="read every question as of now, through the as-of path (variants that have one)")
    args = p.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    root = benchmarks_option(p, args)
    threadpool_limits(limits=1, user_api="blas")  # numpy is loaded: an environment variable set now is not read
    from rag.models.embedders import Embedder

    parts = Parts()
    int8 = args.embedder == "minilm-int8"  # a space of its own: its own workspace
    raw, counter = (Embedder(threads=1, int8=True) if int8 else Embedder(threads=1)), default_counter()
    folder = args.benchmark + (f"-{args.embedder}" if int8 else "")
    if args.workspace:
        prepared = open_prepared(args.benchmark, args.workspace, raw, counter)
    else:
        prepared = prepare_workspace(root / args.benchmark, REPO / ".rag" / "bench" / folder, raw, counter)
    caller = Caller(frozenset(args.groups.split(","))) if args.groups else CALLER
    embedder = TimedEmbedder(raw, parts)
    snap = prepared.reader.snapshot()
    opened = memory_mb()  # the workspace open and checked, its read state not built yet
    built = read_state_build(snap)
    questions = split_halves(args.benchmark, load_questions(root / args.benchmark))["report"][: args.limit]
    variants = [parse_variant(s) for s in args.variants.split(";")]
    as_of = datetime.now(timezone.utc).replace(tzinfo=None) if args.as_of else None
    start = clock()  # the first question builds what an as-of read keeps per past state (vectors, units, BM25 view)
    call(variants[0], snap, embedder, counter, questions[0].question, args.budget, caller, as_of)
    first_ms = (clock() - start) * 1000
    for q in questions:  # warm: the BM25 channel, the sentence store, LanceDB's caches
        for v in variants:
            call(v, snap, embedder, counter, q.question, args.budget, caller, as_of)
    ms: dict[str, list[float]] = {v.name: [] for v in variants}
    split: dict[str, list[dict]] = {v.name: [] for v in variants}
    for q in questions:
        for v in variants:
            runs = []
            for _ in range(args.repeats):
                parts.reset()
                start = clock()
                call(v, snap, embedder, counter, q.question, args.budget, caller, as_of)
                total, run = (clock() - start) * 1000, {k: s * 1000 for k, s in parts.reset().items()}
                runs.append({**run, "rank": total - sum(run.values()), "total": total})
            least = {k: min(r[k] for r in runs) for k in runs[0]}  # other jobs only ever add time
            ms[v.name].append(least.pop("total"))
            split[v.name].append(least)
    code = os.environ.get("RAG_BENCH_CODE", str(REPO))
    figures = {"command": "python bench/hop_latency.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "code": code, "commit": commit(code), "subchunks": snap.index.count(),
               "unindexed_documents": len(snap.current.unindexed_ids),
               "workspace": str(args.workspace or ""), "groups": sorted(caller.groups),
               "questions": len(questions), "budget": args.budget, "clock": args.clock, "embedder": args.embedder,
               "repeats": args.repeats, "as_of": str(as_of or ""), "first_question_ms": round(first_ms, 1),
               "read_state_build": built,
               "memory": {"before_read_state": opened, "after_questions": memory_mb()},
               "load_average": os.getloadavg(),
               "latency_ms": {n: {"p50": round(float(np.percentile(v, 50)), 1),
                                  "p95": round(float(np.percentile(v, 95)), 1)} for n, v in ms.items()},
               "parts_p50_ms": {n: {k: round(float(np.median([x[k] for x in rows])), 2)
                                    for k in ("embed", "search", "rank", "pack")} for n, rows in split.items()}}
    base = figures["latency_ms"].get("longrag:hops=1")
    figures["added_over_one_hop_ms"] = {n: {k: round(v[k] - base[k], 1) for k in ("p50", "p95")}
                                        for n, v in figures["latency_ms"].items()
                                        if base and n.startswith("longrag") and n != "longrag:hops=1"}
    write_results(figures, "hop-latency", args.tag)
    print(markdown_table(["variant", "p50 ms", "p95 ms", "embed", "search", "rank", "pack"],
                         [[n, v["p50"], v["p95"], *figures["parts_p50_ms"][n].values()]
                          for n, v in figures["latency_ms"].items()]))
    print("added over one hop:", figures["added_over_one_hop_ms"], "load average", figures["load_average"])
    print("read state build:", built["total"], "memory:", figures["memory"])
    prepared.close()


if __name__ == "__main__":
    main()
