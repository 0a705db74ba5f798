"""Where LongRAG's misses at one budget are, for `bench/hop_ranks.py --budget B`.

Per incomplete question, each missing gold document is `absent` (in no hop's ranked list), `no room` (ranked ahead
of the last member packed, so packing reached it and it did not fit in what was left) or `below` (ranked after the
last member packed). Per context, the packed tokens are split into gold members, other members of a gold member's
unit (the link boost's bet), and members of units with no gold member packed; `list` names the hop list (0: the
question's, 1…: the second hop's branches) whose entry put each member where it is.

Each packed member and each ranked missing document also carries its score's parts in that list: its own dense
match, the BM25 share and the link boost's share (`longrag._candidates` keeps only their sum), and `boost_placed`,
whether without the boost its list would rank it below every member that list put into the context. A ceiling: how
many questions would be complete if every non-gold later member of a unit larger than the budget (or every one
whose own part is below the weakest packed total) were left out.

With `--against FILE` (another run's hop-misses JSON on the same questions and budget), which gold documents moved:
those missing there and packed here (by where they were there), and those packed there and missing here (by where
they are here).
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bench.multihop import CALLER
from bench.results_file import write_results
from rag.retrieval.context import pack
from rag.retrieval.hop_queries import hop_queries
from rag.retrieval.longrag import _best_others, _hop, _lexical, hop_rule, link_boost, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools
from rag.text.tables import markdown_table
from rag.units.long_units import split_unit_key


def first_ranks(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, item in enumerate(items):
        out.setdefault(item.doc_id, i)
    return out


def hop_lists(snap, embedder, counter, config, question: str, budget: int) -> list[dict[str, dict]]:
    """Each hop list's first entry per document, as longrag_candidates builds them (two hops: question, branches):
    its rank and its score's parts."""
    req = Request(CALLER, question, budget)
    first, own, _, _ = _hop(snap, embedder.encode_query(question), req, counter, question, config)
    lists, seeds = [list_entries(snap, config, first, question, set())], []
    if config.hops > 1:
        for query, vector, placed in hop_queries(snap, embedder, question, first, seeds, own,
                                                 hop_rule(snap, CALLER.groups, config)):
            more, _, _, _ = _hop(snap, vector, req, counter, query, config)
            lists.append(list_entries(snap, config, more, query, placed))
    return lists


def list_entries(snap, config, ranked, query: str, placed: set[str]) -> dict[str, dict]:
    """Per document of one hop's list (the seeds it follows left out, as interleave sees it): its first rank, its
    parts, and `rank_without_boost`, where its own part alone would put it among the list's totals."""
    own, boost = score_parts(ranked, link_boost(snap, config, CALLER.groups))
    lexical = _lexical(snap, CALLER, query, config)
    out: dict[str, dict] = {}
    kept = [i for i, item in enumerate(ranked) if item.doc_id not in placed]
    totals = ranked.scores[kept]
    for rank, i in enumerate(kept):
        doc = ranked[i].doc_id
        if doc in out:
            continue
        bm25 = config.lexical_weight * lexical.get(doc, 0.0)
        out[doc] = {"rank": rank, "dense": round(float(own[i]) - bm25, 4), "bm25": round(bm25, 4),
                    "boost": round(float(boost[i]), 4), "total": round(float(ranked.scores[i]), 4),
                    "rank_without_boost": int(np.sum(np.delete(totals, rank) > own[i]))}
    return out


def score_parts(ranked, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's own part (dense + BM25 share) and the boost's share, solved from the totals: in a unit the best
    member's total is b1 + β·b2 and every other member's b + β·b1 (longrag._candidates)."""
    totals, unit = ranked.scores, ranked.table.unit_rank[ranked.rows]
    own = totals.copy()
    for u in np.unique(unit):
        at = np.flatnonzero(unit == u)
        if len(at) < 2:
            continue
        at = at[np.argsort(-totals[at], kind="stable")]
        best = (totals[at[0]] - beta * totals[at[1]]) / (1 - beta * beta)
        own[at] = totals[at] - beta * best
        own[at[0]] = best
    boost = beta * _best_others(unit, own)
    if len(own) and np.abs(own + boost - totals).max() > 1e-6:
        raise SystemExit("score parts do not add up to the ranked totals: longrag._candidates changed its formula")
    return own, boost


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
    large = {u for u, n in unit_tokens.items() if n > budget}
    members, seen_units = [], set()
    for i in sorted(packed, key=lambda i: merged[i.doc_id]):
        source = _source_list(lists, i.doc_id)
        members.append({"doc_id": i.doc_id, "tokens": i.tokens, "rank": merged[i.doc_id], "gold": i.doc_id in gold,
                        "kind": "gold" if i.doc_id in gold else "gold's unit" if i.unit_id in gold_units
                        else "other unit", "unit_mate": i.unit_id in seen_units, "unit_members": units[i.unit_id],
                        "unit_over_budget": unit_tokens[i.unit_id] > budget, "list": source,
                        "parts": lists[source][i.doc_id] if source is not None else None})
        seen_units.add(i.unit_id)
    deepest = Counter()  # per list, the last rank of a member it put into the context
    for m in members:
        if m["parts"]:
            deepest[m["list"]] = max(deepest[m["list"]], m["parts"]["rank"])
    weakest = min((m["parts"]["total"] for m in members if m["parts"]), default=0.0)
    for m in members:
        m["boost_placed"] = bool(m["parts"]) and m["parts"]["rank_without_boost"] > deepest[m["list"]]
        # The same question across lists: is its own part below the total of every member packed?
        m["below_weakest"] = bool(m["parts"]) and m["parts"]["dense"] + m["parts"]["bm25"] < weakest
    found = {i.doc_id for i in packed}
    missing = []
    for k, doc in enumerate(q.gold_doc_ids):
        if doc in found:
            continue
        rank = merged.get(doc)
        where = "absent" if rank is None else "no room" if rank < last else "below"
        best = _source_list(lists, doc)
        missing.append({"doc_id": doc, "hop": k + 1, "where": where, "rank": rank,
                        "tokens": items[rank].tokens if rank is not None else None,
                        "ranked_tokens_before": int(used_before[rank]) if rank is not None else None,
                        "list_ranks": [e["rank"] if (e := entries.get(doc)) else None for entries in lists],
                        "best_list": best, "parts": lists[best][doc] if best is not None else None})
    return {"qid": q.qid, "hops": len(q.gold_doc_ids), "complete": not missing, "last_packed_rank": last,
            "members": members, "missing": missing,
            "complete_without_large_unit_mates": gold <= _packed_without(items, budget, gold, large, lambda doc: True),
            "complete_without_weak_large_unit_mates": gold <= _packed_without(
                items, budget, gold, large, lambda doc: _own(lists, doc) < weakest)}


def _packed_without(items, budget: int, gold: set[str], large: set[str], drop) -> set[str]:
    """What the budget packs from the ranked entries less the non-gold later members of units larger than the budget
    that `drop` names: a ceiling for a packing rule that defers such mates, since it knows which ones are gold."""
    seen, kept = set(), []
    for i in items:
        unit = split_unit_key(i.unit_id)[0]
        if unit in seen and unit in large and i.doc_id not in gold and drop(i.doc_id):
            continue
        seen.add(unit)
        kept.append(i)
    return {i.doc_id for i in pack(kept, budget)}


def _own(lists: list[dict[str, dict]], doc: str) -> float:
    """A document's own part (dense + BM25) in the list whose entry placed it."""
    entry = lists[_source_list(lists, doc)][doc]
    return entry["dense"] + entry["bm25"]


def _source_list(lists: list[dict[str, dict]], doc: str) -> int | None:
    """The list whose entry interleave kept: the lowest rank, the earlier list on a tie (round robin's order)."""
    ranks = [(e["rank"], k) for k, entries in enumerate(lists) if (e := entries.get(doc)) is not None]
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
            "complete_without_large_unit_mates": sum(r["complete_without_large_unit_mates"] for r in records),
            "complete_without_weak_large_unit_mates": sum(r["complete_without_weak_large_unit_mates"] for r in records),
            "where": dict(Counter(m["where"] for m in missed)),
            "where_by_hop": {f"{h}": dict(Counter(m["where"] for m in missed if m["hop"] == h))
                             for h in sorted({m["hop"] for m in missed})},
            "below_rank": {"<10": sum(m["where"] == "below" and m["rank"] < 10 for m in missed),
                           "10-19": sum(m["where"] == "below" and 10 <= m["rank"] < 20 for m in missed),
                           ">=20": sum(m["where"] == "below" and m["rank"] >= 20 for m in missed)},
            "best_list_rank_of_ranked": dict(Counter(_bucket(min(r for r in m["list_ranks"] if r is not None))
                                                     for m in missed if any(r is not None for r in m["list_ranks"]))),
            "spend_all": spend(records), "spend_incomplete": spend(incomplete), "parts": parts_table(records)}


def member_class(m: dict) -> str:
    """Gold or not; first member of its unit packed, or a mate of a unit that fits the budget or is larger."""
    place = "mate, unit over budget" if m["unit_mate"] and m["unit_over_budget"] else \
        "mate, unit fits" if m["unit_mate"] else "first of its unit"
    return f"{'gold' if m['gold'] else 'not gold'}, {place}"


def parts_table(records: list[dict]) -> dict:
    """Per class of packed member, and for the ranked missing gold documents: medians of the score's parts in the
    member's list, and how many owe their place to the boost (`boost_placed`)."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        for m in r["members"]:
            if m["parts"]:
                groups.setdefault(member_class(m), []).append(m)
        for m in r["missing"]:
            if m["parts"]:
                groups.setdefault(f"missing gold, {m['where']}", []).append(m)
    used = sum(m["tokens"] for r in records for m in r["members"])
    out = {}
    for name, ms in sorted(groups.items()):
        parts = {k: np.array([m["parts"][k] for m in ms]) for k in ("dense", "bm25", "boost", "total")}
        packed = "missing" not in name
        out[name] = {"n": len(ms), "tokens_share": round(sum(m["tokens"] for m in ms) / max(used, 1), 3) if packed else None,
                     **{f"median_{k}": round(float(np.median(v)), 3) for k, v in parts.items()},
                     "median_boost_of_total": round(float(np.median(parts["boost"] / parts["total"])), 3),
                     "boost_placed": sum(m["boost_placed"] for m in ms) if packed else None,
                     "boost_placed_tokens_share": round(sum(m["tokens"] for m in ms if m["boost_placed"])
                                                        / max(used, 1), 3) if packed else None,
                     "below_weakest": sum(m["below_weakest"] for m in ms) if packed else None,
                     "by_list": dict(sorted(Counter(m["list" if packed else "best_list"] for m in ms).items())),
                     "median_rank_without_boost": float(np.median([m["parts"]["rank_without_boost"] for m in ms]))}
    return out


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
    if args.against:
        figures["against"] = moved(json.loads(Path(args.against).read_text()), records, args.budget)
    name = f"hop-misses-{args.benchmark}-{args.half}-{args.variant.replace(':', '_').replace(',', '_')}-{args.budget}"
    write_results(figures, name, args.tag)
    s = figures["summary"]
    print(f"{s['incomplete']} of {s['questions']} incomplete at {args.budget}, {s['missing_documents']} gold missing; "
          f"complete with no non-gold mate of a unit over the budget {s['complete_without_large_unit_mates']}, with "
          f"none of those below the weakest packed total {s['complete_without_weak_large_unit_mates']} (ceilings)")
    print(markdown_table(["hop", "absent", "no room", "below"],
                         [[h, c.get("absent", 0), c.get("no room", 0), c.get("below", 0)]
                          for h, c in s["where_by_hop"].items()]))
    for key in ("spend_all", "spend_incomplete"):
        print(key, s[key])
    print("below, merged rank:", s["below_rank"], "| best rank in one hop list:", s["best_list_rank_of_ranked"])
    columns = ("n", "tokens_share", "median_dense", "median_bm25", "median_boost", "median_boost_of_total",
               "boost_placed", "boost_placed_tokens_share", "below_weakest", "median_rank_without_boost", "by_list")
    print(markdown_table(["member", *columns], [[name, *(row[c] for c in columns)] for name, row in s["parts"].items()]))
    if args.against:
        print("against", args.against, figures["against"])


def moved(before: dict, records: list[dict], budget: int) -> dict:
    """Gold documents missing in `before` (another run's file) and packed now, and packed there and missing now."""
    if before["budget"] != budget or {r["qid"] for r in before["records"]} != {r["qid"] for r in records}:
        raise SystemExit("--against: the file's budget or questions differ from this run's")
    was = {(r["qid"], m["doc_id"]): m["where"] for r in before["records"] for m in r["missing"]}
    now = {(r["qid"], m["doc_id"]): m["where"] for r in records for m in r["missing"]}
    moved_in = [k for k in was if k not in now]
    fell_out = [k for k in now if k not in was]
    return {"file": before.get("variant"), "missing_before": len(was), "missing_now": len(now),
            "moved_in": len(moved_in), "moved_in_by_where_before": dict(Counter(was[k] for k in moved_in)),
            "fell_out": len(fell_out), "fell_out_by_where_now": dict(Counter(now[k] for k in fell_out)),
            "complete_before": sum(r["complete"] for r in before["records"]),
            "complete_now": sum(r["complete"] for r in records),
            "moved_in_docs": [list(k) for k in moved_in], "fell_out_docs": [list(k) for k in fell_out]}
