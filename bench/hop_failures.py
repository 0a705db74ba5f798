"""Why LongRAG misses: for each question of one half that is not complete at a budget, which gold document is missing.

MuSiQue's gold documents follow its decomposition, so position k is hop k, and a hop's sub-question names the
earlier answers it builds on (`#1`): those answers are the bridge entities. Per missing gold document: its rank
in the merged list, in the first hop's list and in each second-hop branch, the ranked tokens before it (what
budget would have reached it), whether it shares a unit with a found gold document, whether its bridge names
it (in its title or text), whether the found document states the bridge, and whether a second-hop query
carries it. Also the seeds and the second-hop queries. Prints counts and writes
bench/results/hop-failures-<benchmark>-<half>.json (every record, so other counts can be read from it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import prepare  # noqa: E402
from bench.multihop import CALLER, parse_variant  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.retrieval.hop_queries import hop_queries  # noqa: E402
from rag.retrieval.longrag import _hop, hop_rule, longrag_candidates, pack_ranked  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import HALVES, add_benchmarks_option, benchmarks_option, half_of  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

REFERENCE = re.compile(r"#(\d)")


def first_ranks(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, item in enumerate(items):
        out.setdefault(item.doc_id, i)
    return out


def tokens_before(items, doc_id: str) -> int | None:
    """Tokens of the distinct members ranked before the document: the budget at which packing reaches it."""
    used, seen = 0, set()
    for item in items:
        if item.doc_id == doc_id:
            return used + item.tokens
        if (key := (item.doc_id, item.ranges)) not in seen:
            seen.add(key)
            used += item.tokens
    return None


def bridges(step: dict, steps: list[dict]) -> list[str]:
    """The earlier answers a decomposition step refers to (`#1` → the first step's answer)."""
    return [steps[int(n) - 1]["answer"] for n in REFERENCE.findall(step["question"]) if 0 < int(n) <= len(steps)]


def mentions(name: str, text: str) -> bool:
    return bool(name) and name.lower() in text.lower()


def analyse(snap, embedder, counter, config, record: dict, docs: dict, budget: int) -> dict | None:
    """One question's failure record, or None when it is complete at the budget."""
    question, gold = record["question"], record["gold_doc_ids"]
    req, tools = Request(CALLER, question, budget), Tools(embedder, counter, longrag=config)
    ranked = longrag_candidates(snap, req, tools, config)
    found = {i.doc_id for i in pack_ranked(snap, ranked, budget).items}
    if set(gold) <= found:
        return None
    first, own, _, _ = _hop(snap, embedder.encode_query(question), req, counter, question, config)
    seeds: list[str] = []
    branches, queries, rule = [], [], hop_rule(snap, CALLER.groups, config)
    for query, vector, placed in hop_queries(snap, embedder, question, first, seeds, own, rule):
        more, _, _, _ = _hop(snap, vector, req, counter, query, config)
        branches.append(first_ranks([i for i in more if i.doc_id not in placed]))
        queries.append(query)
    merged, hop1 = first_ranks(ranked.items), first_ranks(first)
    units = snap.units_of(list(gold))
    steps = record.get("decomposition") or []
    missing = []
    for k, doc_id in enumerate(gold):
        if doc_id in found:
            continue
        step = steps[k] if k < len(steps) else {"question": "", "answer": ""}
        named = bridges(step, steps)
        sources = [gold[int(n) - 1] for n in REFERENCE.findall(step["question"]) if 0 < int(n) <= len(gold)]
        title, text = docs[doc_id]
        missing.append({
            "doc_id": doc_id, "hop": k + 1, "title": title, "sub_question": step["question"], "bridges": named,
            "rank_merged": merged.get(doc_id), "tokens_to_reach": tokens_before(ranked.items, doc_id),
            "rank_hop1": hop1.get(doc_id), "rank_branches": [b.get(doc_id) for b in branches],
            "unit_shared_with_found": any(units.get(doc_id) == units.get(g) for g in found & set(gold)),
            "bridge_in_title": any(mentions(b, title) or mentions(title, b) for b in named),
            "bridge_in_text": any(mentions(b, text) for b in named),
            "bridge_in_question": any(mentions(b, question) for b in named),
            "bridge_in_found_source": any(s in found and mentions(b, docs[s][1]) for s in sources for b in named),
            "source_found": bool(sources) and all(s in found for s in sources),
            "source_seeded": any(s in seeds for s in sources),
            "bridge_in_hop_query": any(mentions(b, q) for q in queries for b in named),
            "title_in_question": mentions(title, question),
        })
    return {"qid": record["qid"], "question": question, "hops": len(gold), "gold": gold,
            "found_gold": [g for g in gold if g in found], "seeds": seeds,
            "seeds_gold_hop": [gold.index(s) + 1 if s in gold else None for s in seeds],
            "hop_queries": queries, "missing": missing}


def share(rows: list[dict], key: str) -> str:
    return f"{sum(bool(r[key]) for r in rows)}/{len(rows)}" if rows else "0/0"


def summary(failures: list[dict], n: int) -> dict:
    missing = [m for f in failures for m in f["missing"]]
    later = [m for m in missing if m["hop"] > 1]
    merged = [m["rank_merged"] for m in missing]
    reach = sorted(m["tokens_to_reach"] for m in missing if m["tokens_to_reach"] is not None)
    return {
        "questions": n, "incomplete": len(failures),
        "incomplete_by_hops": dict(Counter(f["hops"] for f in failures)),
        "missing_documents": len(missing),
        "missing_by_hop": {f"{h}": c for h, c in sorted(Counter(m["hop"] for m in missing).items())},
        "missing_last_hop": sum(m["hop"] == f["hops"] for f in failures for m in f["missing"]),
        "missing_hop1_when_later_found": sum(m["hop"] == 1 and len(f["found_gold"]) > 0
                                             for f in failures for m in f["missing"]),
        "not_ranked": sum(r is None for r in merged),
        "rank_merged": {"<10": sum(r is not None and r < 10 for r in merged),
                        "10-39": sum(r is not None and 10 <= r < 40 for r in merged),
                        ">=40": sum(r is not None and r >= 40 for r in merged)},
        "tokens_to_reach": {"<=2000": sum(t <= 2000 for t in reach), "<=4000": sum(t <= 4000 for t in reach),
                            "median": float(np.median(reach)) if reach else None},
        "in_hop1_top40": sum(m["rank_hop1"] is not None for m in missing),
        "in_a_branch": sum(any(r is not None for r in m["rank_branches"]) for m in missing),
        "in_a_branch_top5": sum(any(r is not None and r < 5 for r in m["rank_branches"]) for m in missing),
        "later_hop_paths": {f"source found {a}, seeded {b}, bridge in a query {c}": n for (a, b, c), n in sorted(
            Counter((m["source_found"], m["source_seeded"], m["bridge_in_hop_query"]) for m in later).items())},
        "later_hops": {k: share(later, k) for k in ("source_found", "source_seeded", "bridge_in_found_source",
                                                    "bridge_in_hop_query",
                                                    "bridge_in_title", "bridge_in_text", "bridge_in_question",
                                                    "unit_shared_with_found")},
        "hop1": {k: share([m for m in missing if m["hop"] == 1], k) for k in ("title_in_question",
                                                                               "unit_shared_with_found")},
        "seed_is_gold": {f"seed{i + 1}": sum(len(f["seeds_gold_hop"]) > i and f["seeds_gold_hop"][i] is not None
                                             for f in failures) for i in range(2)},
        "no_seed_gold": sum(not any(f["seeds_gold_hop"]) for f in failures),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--half", choices=HALVES, default="tune")
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--variant", default="longrag", help="a longrag variant as bench/multihop.py spells it")
    p.add_argument("--tag", default="")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    variant = parse_variant(args.variant)
    folder = root / args.benchmark
    records = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines() if line.strip()]
    records = [r for r in records if half_of(args.benchmark, r["qid"]) == args.half]
    docs = {d["doc_id"]: (d["title"], d["text"]) for d in map(json.loads, (folder / "docs.jsonl").open())}
    embedder = Embedder(threads=1)
    prepared = prepare(folder, REPO / ".rag" / "bench", "title-links", embedder)
    snap = prepared.reader.snapshot()
    failures = [f for r in records
                if (f := analyse(snap, embedder, prepared.reader.counter, variant.config, r, docs, args.budget))]
    prepared.close()
    figures = {"command": "python bench/hop_failures.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "half": args.half, "budget": args.budget, "variant": args.variant,
               "summary": summary(failures, len(records)), "failures": failures}
    write_results(figures, f"hop-failures-{args.benchmark}-{args.half}", args.tag)
    print(json.dumps(figures["summary"], indent=1))
    rows = [[f["qid"], m["hop"], m["rank_merged"], m["tokens_to_reach"], m["rank_hop1"], m["rank_branches"],
             m["bridge_in_hop_query"], m["bridge_in_title"]] for f in failures for m in f["missing"]]
    print(markdown_table(["qid", "hop", "rank", "tokens to reach", "rank hop 1", "rank branches", "bridge in query",
                          "bridge in title"], rows))


if __name__ == "__main__":
    main()
