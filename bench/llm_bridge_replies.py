"""What the LLM of longrag-llm writes after hop one, for the first tune-half questions of a benchmark, beside the
titles it read and whether hop one's first four documents hold each gold document: to read by hand (the
benchmark's own first-hop answer is printed when the file has a decomposition, for reading only).
Writes bench/results/llm-bridge-replies[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import prepare  # noqa: E402
from bench.multihop import CALLER  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.retrieval.llm_bridge import BridgeConfig, llm_bridges, passages  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--reader", choices=("local", "endpoint"), default="local")
    p.add_argument("--tag", default="")
    add_benchmarks_option(p)
    args = p.parse_args()
    folder = benchmarks_option(p, args) / args.benchmark
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.answer.llm import chat_model
    from rag.models.embedders import Embedder

    embedder, model = Embedder(threads=1), chat_model(args.reader)
    prepared = prepare(folder, REPO / ".rag" / "bench", "title-links", embedder)
    snap, tools = prepared.reader.snapshot(), Tools(embedder, prepared.reader.counter)
    raw = {r["qid"]: r for r in map(json.loads, (folder / "questions.jsonl").read_text().splitlines())}
    rows = []
    for q in split_halves(args.benchmark, load_questions(folder))["tune"][: args.limit]:
        first = longrag_candidates(snap, Request(CALLER, q.question, 4000), tools, LongRAGConfig(hops=1)).items
        top = [e.doc_id for e in list(first)[:4]]
        rows.append({"question": q.question, "read": [t for t, _ in passages(snap, q.question, first, BridgeConfig())],
                     "gold_in_first_four": [g in top for g in q.gold_doc_ids],
                     "first_hop_answer": (raw[q.qid].get("decomposition") or [{}])[0].get("answer"),
                     "query": llm_bridges(model)(snap, q.question, first)})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    write_results({"command": "python bench/llm_bridge_replies.py " + " ".join(sys.argv[1:]),
                   "reader": f"{args.reader}:{model.name}", "rows": rows}, "llm-bridge-replies", args.tag)
    prepared.close()


if __name__ == "__main__":
    main()
