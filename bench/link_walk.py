"""Issue 26: a walk with restart over the link graph (rag/retrieval/link_walk.py) against the default LongRAG.

Variants: `longrag` (the default), `walk:restart=R` (the default's hops with the walk's list after hop one's),
`walk:restart=R,hops=1` (hop one and the walk only), `walkonly:restart=R` (the walk's ranking alone, seeded by hop
one). Each question is ranked once and packed at every budget; CPU seconds per question are this process's
(time.process_time, one torch thread). Prints completeness per budget and writes
bench/results/link-walk-<tag>.json with bootstrap intervals and paired differences to the first variant.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import prepare  # noqa: E402
from bench.multihop import NAMES, summarise  # noqa: E402
from bench.results_file import results_path, write_json  # noqa: E402
from rag.query.methods import rank_once  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.link_walk import doc_graph, walk, walk_candidates  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig, Ranked, longrag_candidates, pack_ranked  # noqa: E402
from rag.retrieval.members import RankedRows  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import (  # noqa: E402
    HALVES,
    add_benchmarks_option,
    benchmarks_option,
    complete,
    evidence_recall,
    load_questions,
    split_halves,
)
from rag.units.linking import mentionable, mentioned_titles  # noqa: E402

CALLER = Caller(frozenset({"bench"}))


def ranker(spec: str):
    """`name[:key=value,...]` → a function (snap, request, tools) → Ranked."""
    name, _, settings = spec.partition(":")
    opts = dict(p.split("=") for p in filter(None, settings.split(",")))
    config = replace(LongRAGConfig(), hops=int(opts.get("hops", LongRAGConfig.hops)))
    restart, seeds = float(opts.get("restart", 0.5)), int(opts.get("seeds", 0))
    if name == "longrag":
        return lambda snap, req, tools: longrag_candidates(snap, req, tools, config)
    if name == "walk":
        return lambda snap, req, tools: walk_candidates(snap, req, tools, config, restart, seeds)
    if name == "named":
        def named(snap, req, tools) -> Ranked:
            first = longrag_candidates(snap, req, tools, replace(config, hops=1))
            return longrag_candidates(snap, req, tools, config, lambda ranked: [named_in_best_match(snap, req, first)])
        return named
    if name == "walkonly":
        def only(snap, req, tools) -> Ranked:
            first = longrag_candidates(snap, req, tools, replace(config, hops=1))
            return Ranked(walk(snap, req.caller.groups, first.items, restart, seeds), first.own, first.trace)
        return only
    raise SystemExit(f"variant {spec!r}: unknown name {name!r}")


def named_in_best_match(snap, req: Request, first: Ranked) -> RankedRows:
    """The alternative to the walk: members of the documents whose exact title hop one's best document's matched
    sub-chunk mentions, in the order of their first mention (the seed itself left out)."""
    items, table = first.items, first.items.table
    if not len(items):
        return RankedRows(table, items.rows[:0], items.scores[:0])
    top = items[0]
    hit = first.own.get((top.unit_id, top.doc_id, top.part))
    if hit is None:
        return RankedRows(table, items.rows[:0], items.scores[:0])
    _, text = snap.texts([(top.doc_id, top.doc_version)])[(top.doc_id, top.doc_version)]
    chunk = text[hit.start:hit.end]
    titles = {t for t in snap.current.titles if mentionable(t)}
    found = sorted(mentioned_titles(chunk, titles), key=chunk.find)
    docs = [d for t in found for d in sorted(snap.current.titles[t]) if d != top.doc_id]
    readable = snap.readable_ids(docs, req.caller.groups)
    codes = [table.doc_code_of[d] for d in docs if d in readable and d in table.doc_code_of]
    rows = np.concatenate([np.flatnonzero(table.doc_codes == c) for c in codes] or [np.zeros(0, np.int64)])
    rows = rows[table.readable(req.caller.groups)[rows]]
    return RankedRows(table, rows, -np.arange(len(rows), dtype=np.float64))


def gold_links(snap, questions) -> dict:
    """How the gold documents sit in the link graph: the walk can only reach a gold document linked to another."""
    graph = doc_graph(snap)
    edges = set(zip(graph.src.tolist(), graph.dst.tolist()))
    degree = np.bincount(graph.src, minlength=len(graph.ids))
    golds = [[graph.node_of[d] for d in q.gold_doc_ids if d in graph.node_of] for q in questions]
    linked = [any((a, b) in edges for b in g if b != a) for g in golds for a in g]
    return {"documents": len(graph.ids), "links": len(edges) // 2, "unlinked_documents": int((degree == 0).sum()),
            "gold_documents_unlinked": round(float(np.mean([degree[a] == 0 for g in golds for a in g])), 3),
            "gold_documents_linked_to_another_gold": round(float(np.mean(linked)), 3),
            "questions_with_every_gold_linked_to_another": round(float(np.mean(
                [all(any((a, b) in edges for b in g if b != a) for a in g) for g in golds])), 3)}


def measure(snap, embedder, counter, rank, questions, budgets: list[int]) -> dict:
    """Per budget, completeness, evidence recall and tokens per question; CPU seconds per question; and, at the first
    budget, how many gold documents are missing and how many of those are linked to a gold document packed."""
    per = {b: {"complete": [], "recall": [], "tokens": []} for b in budgets}
    cpu, missing = [], {"missing": 0, "linked_to_a_packed_gold": 0}
    graph = doc_graph(snap)
    edges = set(zip(graph.src.tolist(), graph.dst.tolist()))
    tools = Tools(embedder, counter)
    for q in questions:
        req = Request(CALLER, q.question, max(budgets))
        start = time.process_time()
        results = rank_once(lambda: rank(snap, req, tools), lambda r, b: pack_ranked(snap, r, b), budgets)
        cpu.append(time.process_time() - start)
        for (result, _), b in zip(results, budgets):
            ids = {i.doc_id for i in result.items}
            per[b]["complete"].append(float(complete(ids, q.gold_doc_ids)))
            per[b]["recall"].append(evidence_recall(ids, q.gold_doc_ids))
            per[b]["tokens"].append(result.tokens)
            if b == budgets[0]:
                found = [graph.node_of[d] for d in q.gold_doc_ids if d in ids]
                lost = [graph.node_of[d] for d in q.gold_doc_ids if d not in ids]
                missing["missing"] += len(lost)
                missing["linked_to_a_packed_gold"] += sum(any((a, f) in edges for f in found) for a in lost)
    return {"per_budget": per, "seconds": cpu, "missing_at_first_budget": missing}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    p.add_argument("--variants", default="longrag;walk:restart=0.5", help="separated by ';' (the first is the reference)")
    p.add_argument("--half", choices=HALVES, default="tune")
    p.add_argument("--limit", type=int, help="the half's first N questions only (a probe)")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--tag", required=True)
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder, budgets, specs = Embedder(threads=1), [int(b) for b in args.budgets.split(",")], args.variants.split(";")
    out = {"command": "python bench/link_walk.py " + " ".join(sys.argv[1:]), "half": args.half, "budgets": budgets,
           "reference": specs[0], "cpu_note": "latency_ms holds CPU ms per question (rank once, pack every budget)",
           "benchmarks": {}}
    for name in args.benchmark or NAMES:
        prepared = prepare(root / name, REPO / ".rag" / "bench", "title-links", embedder)
        snap, counter = prepared.reader.snapshot(), prepared.reader.counter
        snap.lexical  # noqa: B018 - built before the first timed query, as a warm service has it
        start = time.process_time()
        walk(snap, CALLER.groups, longrag_candidates(snap, Request(CALLER, "warm", 1000), Tools(embedder, counter),
                                                     replace(LongRAGConfig(), hops=1)).items, 0.5)
        graph_cpu = time.process_time() - start
        questions = split_halves(name, load_questions(root / name))[args.half][: args.limit]
        figures = {"questions": len(questions), "graph_and_warm_cpu_s": round(graph_cpu, 2),
                   "gold_links": gold_links(snap, questions), "variants": {}}
        print(f"{name} {args.half} gold links: {figures['gold_links']}", flush=True)
        raws = {}
        for spec in specs:
            raws[spec] = measure(snap, embedder, counter, ranker(spec), questions, budgets)
            figures["variants"][spec] = summarise(raws[spec], raws[specs[0]] if spec != specs[0] else None)
            cells = figures["variants"][spec]
            cpu = np.array(raws[spec]["seconds"])
            cells["missing_at_first_budget"] = raws[spec]["missing_at_first_budget"]
            cells["cpu_s"] = {"p50": round(float(np.percentile(cpu, 50)), 3), "p95": round(float(np.percentile(cpu, 95)),
                              3), "mean": round(float(cpu.mean()), 3)}
            print(f"{name} {args.half} {spec}: " + " ".join(
                f"C@{b} {cells[str(b)]['completeness']['mean']:.3f}" for b in budgets)
                + f" R@{budgets[0]} {cells[str(budgets[0])]['evidence_recall']['mean']:.3f}"
                + f" CPU p50 {cells['cpu_s']['p50']} s missing@{budgets[0]} {cells['missing_at_first_budget']}",
                flush=True)
        prepared.close()
        out["benchmarks"][name] = figures
    path = results_path("link-walk", args.tag)
    write_json(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
