"""What short chunks' packing costs with the token counter's memory of word runs empty, built from other questions,
or holding the timed questions' own runs (what bench/hop_latency.py's warm pass leaves), against count() of every
candidate (the cost before the memory). CPU ms p50 per question over report-half questions of a benchmark slice,
the memory built from tune-half questions. Writes bench/results/count-memory[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.multihop import CALLER  # noqa: E402
from bench.query_embedding import median_cpu_ms  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.evaluation.prepared import prepare_workspace  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import TokenCounter  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.retrieval.shortchunk import pack_chunks, shortchunk_candidates  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--limit", type=int, default=25, help="report-half questions timed")
    p.add_argument("--others", type=int, default=100, help="tune-half questions that build the memory")
    p.add_argument("--budget", type=int, default=2000)
    add_benchmarks_option(p)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    root = benchmarks_option(p, args)
    embedder, counter = Embedder(threads=1), TokenCounter()
    prepared = prepare_workspace(root / args.benchmark, REPO / ".rag" / "bench" / args.benchmark, embedder, counter)
    snap, tools, config = prepared.reader.snapshot(), Tools(embedder, counter), LongRAGConfig()
    halves = split_halves(args.benchmark, load_questions(root / args.benchmark))
    ranked = lambda qs: [shortchunk_candidates(snap, Request(CALLER, q.question, args.budget), tools, config)  # noqa
                         for q in qs]
    timed, others = ranked(halves["report"][: args.limit]), ranked(halves["tune"][: args.others])
    pack = lambda chunks: pack_chunks(chunks, args.budget, counter)  # noqa: E731

    def empty_then_pack(chunks):
        counter._runs = {}
        pack(chunks)

    figures = {"count_every_candidate": median_cpu_ms(lambda c: [counter.count([i.text for i in c.items[k:k + 24]])
                                                           for k in range(0, len(c.items), 24)], timed),
               "memory_empty": median_cpu_ms(empty_then_pack, timed)}
    counter._runs = {}
    for chunks in others:
        pack(chunks)
    figures["memory_from_other_questions"] = median_cpu_ms(pack, timed)
    figures["memory_runs_after_other_questions"] = len(counter._runs)
    figures["memory_holding_these_questions"] = median_cpu_ms(pack, timed)
    out = {"command": "python bench/count_memory.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
           "questions": len(timed), "other_questions": len(others), "clock": "cpu",
           "load_average": os.getloadavg(), "pack_ms_p50": figures}
    write_results(out, "count-memory", args.tag)
    print(json.dumps(out, indent=1))
    prepared.close()


if __name__ == "__main__":
    main()
