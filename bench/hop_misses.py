"""Where LongRAG's misses at one budget are, for `bench/hop_ranks.py --budget B`.

Per incomplete question, each missing gold document is `absent` (in no hop's ranked list), `no room` (ranked ahead
of the last member packed, so packing reached it and it did not fit in what was left) or `below` (ranked after the
last member packed). Per context, the packed tokens are split into gold members, other members of a gold member's
unit (the link boost's bet), and members of units with no gold member packed; `list` names the hop list (0: the
question's, 1…: the second hop's branches) whose entry put each member where it is.
"""
from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from bench.multihop import CALLER
from bench.results_file import write_results
from rag.retrieval.hop_queries import hop_queries
from rag.retrieval.longrag import _hop, hop_rule, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools
from rag.text.tables import markdown_table
from rag.units.long_units import split_unit_key


def first_ranks(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, item in enumerate(items):
        out.setdefault(item.doc_id, i)
    return out


def hop_lists(snap, embedder, counter, config, question: str, budget: int) -> list[dict[str, int]]:
    """Each hop list's first rank per document, as longrag_candidates builds them (two hops: question, branches)."""
    req = Request(CALLER, question, budget)
    first, own, _, _ = _hop(snap, embedder.encode_query(question), req, counter, question, config)
    lists, seeds = [first_ranks(first)], []
    if config.hops > 1:
        for query, vector, placed in hop_queries(snap, embedder, question, first, seeds, own,
                                                 hop_rule(snap, CALLER.groups, config)):
            more, _, _, _ = _hop(snap, vector, req, counter, query, config)
            lists.append(first_ranks([i for i in more if i.doc_id not in placed]))
    return lists


def question_record(snap, embedder, counter, config, q, budget: int) -> dict:
    """One question's packed members (tokens, gold or not, unit, list) and its missing gold documents."""
    req, tools = Request(CALLER, q.question, budget), Tools(embedder, counter, longrag=config)
    ranked = longrag_candidates(snap, req, tools, config)
    items = list(ranked.items)
    packed = pack_ranked(snap, ranked, budget).items
    merged, gold = first_ranks(items), set(q.gold_doc_ids)
    lists = hop_lists(snap, embedder, counter, config, q.question, budget)
    gold_units = {i.unit_id for i in packed if i.doc_id in gold}
    last = max((merged[i.doc_id] for i in packed), default=-1)
    used_before = np.cumsum([0] + [i.tokens for i in items])  # upper bound on what was used when a rank was reached
    # Distinct entries per unit and the unit's tokens among them; a ranked entry names its unit by key (id@version),
    # a packed item by id.
    units, unit_tokens = Counter(), Counter()
    for i in {(i.doc_id, i.ranges): i for i in items}.values():
        units[split_unit_key(i.unit_id)[0]] += 1
        unit_tokens[split_unit_key(i.unit_id)[0]] += i.tokens
    members, seen_units = [], set()
    for i in sorted(packed, key=lambda i: merged[i.doc_id]):
        members.append({"doc_id": i.doc_id, "tokens": i.tokens, "rank": merged[i.doc_id], "gold": i.doc_id in gold,
                        "kind": "gold" if i.doc_id in gold else "gold's unit" if i.unit_id in gold_units
                        else "other unit", "unit_mate": i.unit_id in seen_units, "unit_members": units[i.unit_id],
                        "unit_over_budget": unit_tokens[i.unit_id] > budget,
                        "list": _source_list(lists, merged, i.doc_id)})
        seen_units.add(i.unit_id)
    found = {i.doc_id for i in packed}
    missing = []
    for k, doc in enumerate(q.gold_doc_ids):
        if doc in found:
            continue
        rank = merged.get(doc)
        where = "absent" if rank is None else "no room" if rank < last else "below"
        missing.append({"doc_id": doc, "hop": k + 1, "where": where, "rank": rank,
                        "tokens": items[rank].tokens if rank is not None else None,
                        "ranked_tokens_before": int(used_before[rank]) if rank is not None else None,
                        "list_ranks": [ranks.get(doc) for ranks in lists]})
    return {"qid": q.qid, "hops": len(q.gold_doc_ids), "complete": not missing, "last_packed_rank": last,
            "members": members, "missing": missing}


def _source_list(lists: list[dict[str, int]], merged: dict[str, int], doc: str) -> int | None:
    """The list whose entry interleave kept: the lowest rank, the earlier list on a tie (round robin's order)."""
    ranks = [(r, k) for k, ranks in enumerate(lists) if (r := ranks.get(doc)) is not None]
    return min(ranks)[1] if ranks else None


def summary(records: list[dict], budget: int) -> dict:
    missed = [m for r in records for m in r["missing"]]
    incomplete = [r for r in records if not r["complete"]]

    def spend(rs: list[dict]) -> dict:
        tokens, mates = Counter(), Counter()
        for r in rs:
            for m in r["members"]:
                tokens[m["kind"]] += m["tokens"]
                if m["unit_mate"]:
                    mates[("gold" if m["gold"] else "not gold")
                          + (", unit over budget" if m["unit_over_budget"] else ", unit fits")] += m["tokens"]
        used = sum(tokens.values())
        n = max(len(rs), 1)
        return {"contexts": len(rs), "members_mean": round(sum(len(r["members"]) for r in rs) / n, 2),
                "tokens_mean": round(used / n, 1), "unused_mean": round(budget - used / n, 1),
                "share": {k: round(v / max(used, 1), 3) for k, v in sorted(tokens.items())},
                "unit_mates_share": {k: round(v / max(used, 1), 3) for k, v in sorted(mates.items())},
                "by_list": {str(k): round(v / max(used, 1), 3) for k, v in sorted(_by_list(rs).items())}}

    return {"questions": len(records), "incomplete": len(incomplete), "missing_documents": len(missed),
            "where": dict(Counter(m["where"] for m in missed)),
            "where_by_hop": {f"{h}": dict(Counter(m["where"] for m in missed if m["hop"] == h))
                             for h in sorted({m["hop"] for m in missed})},
            "below_rank": {"<10": sum(m["where"] == "below" and m["rank"] < 10 for m in missed),
                           "10-19": sum(m["where"] == "below" and 10 <= m["rank"] < 20 for m in missed),
                           ">=20": sum(m["where"] == "below" and m["rank"] >= 20 for m in missed)},
            "best_list_rank_of_ranked": dict(Counter(_bucket(min(r for r in m["list_ranks"] if r is not None))
                                                     for m in missed if any(r is not None for r in m["list_ranks"]))),
            "spend_all": spend(records), "spend_incomplete": spend(incomplete)}


def _by_list(records: list[dict]) -> Counter:
    out = Counter()
    for r in records:
        for m in r["members"]:
            out[m["list"]] += m["tokens"]
    return out


def _bucket(rank: int) -> str:
    return "0-1" if rank < 2 else "2-3" if rank < 4 else "4-7" if rank < 8 else "8-19" if rank < 20 else ">=20"


def report(prepared, embedder, config, questions, args) -> None:
    """Measure, print the two tables and write the JSON."""
    snap, counter = prepared.reader.snapshot(), prepared.reader.counter
    records = [question_record(snap, embedder, counter, config, q, args.budget) for q in questions]
    prepared.close()
    figures = {"command": "python bench/hop_ranks.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "half": args.half, "variant": args.variant, "budget": args.budget,
               "summary": summary(records, args.budget), "records": records}
    name = f"hop-misses-{args.benchmark}-{args.half}-{args.variant.replace(':', '_').replace(',', '_')}-{args.budget}"
    write_results(figures, name, args.tag)
    s = figures["summary"]
    print(f"{s['incomplete']} of {s['questions']} incomplete at {args.budget}, {s['missing_documents']} gold missing")
    print(markdown_table(["hop", "absent", "no room", "below"],
                         [[h, c.get("absent", 0), c.get("no room", 0), c.get("below", 0)]
                          for h, c in s["where_by_hop"].items()]))
    for key in ("spend_all", "spend_incomplete"):
        print(key, s[key])
    print("below, merged rank:", s["below_rank"], "| best rank in one hop list:", s["best_list_rank_of_ranked"])
