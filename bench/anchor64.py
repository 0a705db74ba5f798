"""The "64-token chunks" anchor: MiniLM over sentence-aligned chunks of at most 64 tokens, exact cosine search.

Two packings under the same budget contract (rag.retrieval.context.pack): the chunks themselves with their document
header (`chunks`), and whole documents ranked by their best chunk (`documents`). Both halves of the fixed
tune/report split, bootstrap intervals. Where the questions give supporting-fact sentences (HotpotQA,
2WikiMultihopQA), also their recall in the context (rag.evaluation.metrics.sentence_recall). Vectors are cached
under .rag/bench/anchor64-<name>.npz. Prints a table and writes bench/results/anchor64-<name>[-<tag>].json.
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

from bench.results_file import write_results  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci  # noqa: E402
from rag.evaluation.metrics import sentence_recall  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.retrieval.context import ContextItem, pack  # noqa: E402
from rag.sources.benchmarks import (  # noqa: E402
    HALVES,
    add_benchmarks_option,
    benchmarks_option,
    complete,
    evidence_recall,
    load_questions,
    split_halves,
)
from rag.text.tables import markdown_table  # noqa: E402
from rag.units.chunking import subchunks  # noqa: E402
from rag.units.long_units import render_header, render_member  # noqa: E402

MAX_TOKENS = 64


def chunked(folder: Path, counter, embedder) -> tuple[list[dict], list[tuple[int, int, int]], np.ndarray]:
    """Documents, chunks (doc index, start, end) and their vectors (title + chunk, as the index embeds them)."""
    docs = [json.loads(line) for line in (folder / "docs.jsonl").open(encoding="utf-8")]
    spans = [(d, s.start, s.end) for d, doc in enumerate(docs)
             for s in subchunks(doc["text"], counter, MAX_TOKENS - 8, MAX_TOKENS)]
    cache = REPO / ".rag" / "bench" / f"anchor64-{folder.name}.npz"
    if cache.exists() and len(np.load(cache)["vectors"]) == len(spans):
        return docs, spans, np.load(cache)["vectors"]
    vectors = embedder.encode([f"{docs[d]['title']}\n{docs[d]['text'][s:e]}" for d, s, e in spans])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors)
    return docs, spans, vectors


def candidates(docs, spans, vectors, query: np.ndarray, counter) -> dict[str, list[ContextItem]]:
    """Each packing's items in rank order (budget-independent; rag.retrieval.context.pack applies a budget)."""
    order = np.argsort(-(vectors @ query))[:400]
    chunks = [ContextItem(docs[spans[i][0]]["doc_id"], "1", "", "", 0, ((spans[i][1], spans[i][2]),), 0.0)
              for i in order]
    texts = [render_header(docs[spans[i][0]]["title"], docs[spans[i][0]]["doc_id"], "1") +
             docs[spans[i][0]]["text"][spans[i][1]:spans[i][2]] + "\n" for i in order]
    chunks = [ContextItem(c.doc_id, "1", "", t, int(n), c.ranges, 0.0) for c, t, n in
              zip(chunks, texts, counter.count(texts))]
    ranked_docs = list(dict.fromkeys(spans[i][0] for i in order))[:100]
    blocks = [render_member(docs[d]["title"], docs[d]["doc_id"], "1", docs[d]["text"]) for d in ranked_docs]
    whole = [ContextItem(docs[d]["doc_id"], "1", "", b, int(n), ((0, 0),), 0.0)
             for d, b, n in zip(ranked_docs, blocks, counter.count(blocks))]
    return {"chunks": chunks, "documents": whole}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", help="default: hotpotqa, musique, 2wikimultihopqa")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--tag", default="", help="suffix of the results file")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder, counter = Embedder(threads=1), default_counter()
    budgets = [int(b) for b in args.budgets.split(",")]
    for name in args.benchmark or ["hotpotqa", "musique", "2wikimultihopqa"]:
        docs, spans, vectors = chunked(root / name, counter, embedder)
        halves = split_halves(name, load_questions(root / name))
        figures = {"command": "python bench/anchor64.py " + " ".join(sys.argv[1:]), "benchmark": name,
                   "chunks": len(spans), "max_tokens": MAX_TOKENS, "results": {}}
        rows = []
        for half in HALVES:
            per = {(k, b): ([], [], []) for k in ("chunks", "documents") for b in budgets}
            for q in halves[half]:
                ranked = candidates(docs, spans, vectors, embedder.encode_query(q.question), counter)
                for b in budgets:
                    for kind, items in ranked.items():
                        packed = pack(items, b)
                        ids = {i.doc_id for i in packed}
                        per[(kind, b)][0].append(float(complete(ids, q.gold_doc_ids)))
                        per[(kind, b)][1].append(evidence_recall(ids, q.gold_doc_ids))
                        per[(kind, b)][2].append(sentence_recall(packed, q.supporting_sentences))
            for (kind, b), (full, recall, sentences) in per.items():
                cell = {"completeness": bootstrap_ci(full).to_json(), "evidence_recall": bootstrap_ci(recall).to_json()}
                shown = [x for x in sentences if x is not None]
                if shown:
                    cell["sentence_recall"] = bootstrap_ci(shown).to_json()
                figures["results"].setdefault(kind, {}).setdefault(half, {})[str(b)] = cell
                rows.append([kind, half, b, str(bootstrap_ci(full)), str(bootstrap_ci(recall)),
                             str(bootstrap_ci(shown)) if shown else "-"])
        write_results(figures, f"anchor64-{name}" + (f"-{args.tag}" if args.tag else ""))
        print(f"\n{name}: {len(spans)} chunks of ≤{MAX_TOKENS} tokens")
        print(markdown_table(["packing", "half", "budget", "completeness", "evidence recall", "sentence recall"], rows),
              flush=True)


if __name__ == "__main__":
    main()
