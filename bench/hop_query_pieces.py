"""What a two-hop question's second graph run embeds: its later-hop queries' word pieces, the share the batch pads,
and the CPU of that batch against the same queries run one at a time.

Runs the default LongRAG on report-half questions of a benchmark's workspace (bench/hop_latency.py's), records
each later-hop batch the embedder receives, then times every recorded batch both ways (one thread, CPU
seconds, median of `--repeats`, interleaved). Writes bench/results/hop-query-pieces[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.multihop import CALLER  # noqa: E402
from bench.query_embedding import cpu_ms  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.evaluation.prepared import prepare_workspace  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.methods import method  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--limit", type=int, default=100, help="report-half questions")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--tag", default="")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder, counter = Embedder(threads=1), default_counter()
    prepared = prepare_workspace(root / args.benchmark, REPO / ".rag" / "bench" / args.benchmark, embedder, counter)
    snap = prepared.reader.snapshot()
    batches: list[list[str]] = []
    encode_queries = embedder.encode_queries
    embedder.encode_queries = lambda texts: batches.append(list(texts)) or encode_queries(texts)
    questions = split_halves(args.benchmark, load_questions(root / args.benchmark))["report"][: args.limit]
    for q in questions:
        method("longrag").run(snap, Request(CALLER, q.question, 2000), Tools(embedder, counter))
    later = [b for b in batches if len(b) > 1]  # the question itself comes as a batch of one
    pieces = [[len(e.ids) for e in embedder.tokenizer.encode_batch(b)] for b in later]
    padded, real = sum(max(x) * len(x) for x in pieces), sum(sum(x) for x in pieces)
    batch_ms, single_ms = [], []
    for texts in later:
        batch_ms.append(cpu_ms(encode_queries, texts, args.repeats))
        single_ms.append(cpu_ms(lambda ts: [encode_queries([t]) for t in ts], texts, args.repeats))
    figures = {"command": "python bench/hop_query_pieces.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "questions": len(questions), "later_hop_batches": len(later), "load_average": os.getloadavg(),
               "pieces_per_query_p50": float(np.median([n for x in pieces for n in x])),
               "padded_share": round(1 - real / padded, 3) if padded else 0.0,
               "batch_cpu_ms_p50": round(float(np.median(batch_ms)), 2),
               "one_by_one_cpu_ms_p50": round(float(np.median(single_ms)), 2),
               "batch_cheaper_share": round(float(np.mean(np.array(batch_ms) < np.array(single_ms))), 3)}
    write_results(figures, "hop-query-pieces", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
