"""LongRAG retrieval: pre-filtered sub-chunk search, MaxP per unit, units assembled at read time, packed to a budget."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from rag.models.tokens import TokenCounter
from rag.retrieval.callers import Caller
from rag.retrieval.context import Candidate, ContextItem, RetrievalResult, pack
from rag.retrieval.dense import Hit, MemberHits, state_search
from rag.retrieval.hop_queries import HopRule, hop_queries, no_title, readable_title
from rag.retrieval.lexical import LexicalIndex
from rag.retrieval.members import MemberTable, RankedRows
from rag.retrieval.named import named_first, named_titles
from rag.retrieval.past_units import StateUnits
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools
from rag.retrieval.unit_ranking import at_keys, rank_units
from rag.retrieval.vectors import first_seen_codes, run_starts
from rag.units.long_units import render_member, split_unit_key


@dataclass(frozen=True)
class LongRAGConfig:
    overfetch: int = 200          # sub-chunks fetched before grouping by unit
    max_units: int = 40           # units considered for packing
    link_rule: str = "corpus"     # the link boost: "corpus" (derived, below) or "fixed" (link_boost)
    link_boost: float = 0.45      # "fixed": share of the best linked member's score a document inherits (multi-hop)
    link_share: float = 1.5       # "corpus": boost = link_share × the corpus's mean 1/k over members of linked units
    lexical_weight: float = 0.45  # weight of the BM25 channel (scaled to [0, 1]) added to a document's dense score
    lexical_depth: int = 100      # documents taken from the BM25 channel
    hops: int = 2                 # retrieval hops; each further hop follows the best documents of the one before
    hop_query: str = "residual"   # a later hop's query: "residual", "names", "novel", "sentence" (hop_queries)
    hop_merge: str = "interleave"  # the hops' lists: rank-by-rank "interleave" or by their best score ("max")
    hop_seeds: int = 2            # documents of a hop's list that each seed a query of the next hop
    hop_names: int = 3            # names a "residual"/"names" query carries from its seed (the bridge candidates)
    hop_bridges: str = "order"    # which names: sentence order, "no-dates", "titles", "only-titles" (hop_queries)
    question_titles: str = "first"  # a document the question names by its exact title leads its list (named), "off"

    def __post_init__(self):
        for name, allowed in CHOICES.items():  # a misspelt rule would otherwise run another one without a word
            if getattr(self, name) not in allowed:
                raise ValueError(f"LongRAG setting {name}={getattr(self, name)!r}: expected one of {', '.join(allowed)}")


CHOICES = {"link_rule": ("corpus", "fixed"), "hop_query": ("residual", "names", "novel", "sentence"),
           "hop_merge": ("interleave", "max"), "hop_bridges": ("order", "no-dates", "titles", "only-titles"),
           "question_titles": ("first", "off")}


# The two weights add shares of a BM25 score and of a linked member's score to a cosine, so they belong to the
# embedder's vector space: its scale and how far its ranking can be trusted. The defaults were chosen with MiniLM
# on the English multi-hop tune halves (bench/multihop.py --half tune), the hop settings with them. USE
# multilingual's dense ranking is much weaker than BM25 over jieba words on Chinese (DRCD 0.75 vs 0.955 at 1K),
# and its units' linked members crowded out single-hop answers: on the tune halves of CMRC 2018 and DRCD
# (bench/chinese.py --half tune) these weights reach the BM25 anchor at every budget, with one hop, as measured.
# Question titles stay off there: a Chinese article title is a short common word that many questions write and many
# paragraphs share, and moving its best paragraph first cost DRCD's tune half 0.012 at 1K.
EMBEDDER_WEIGHTS: dict[str, dict[str, float | str]] = {"use-multilingual": {"link_rule": "fixed", "link_boost": 0.1,
                                                                            "lexical_weight": 0.7, "hops": 1,
                                                                            "question_titles": "off"}}


def config_for(embedder_name: str, base: LongRAGConfig = LongRAGConfig()) -> LongRAGConfig:
    """The base configuration with the channel weights tuned for this embedder (the defaults for MiniLM)."""
    return replace(base, **EMBEDDER_WEIGHTS.get(embedder_name, {}))


def configured(tools: Tools) -> LongRAGConfig:
    """The tools' override, else the configuration tuned for their embedder."""
    return tools.longrag or config_for(tools.embedder.name)


def pack_ranked(snap: Snapshot, ranked: Ranked, budget: int) -> RetrievalResult:
    """Pack the ranked members into the budget and render them: one ranking serves every budget."""
    items = ranked.items
    packed = items.packed(budget) if isinstance(items, RankedRows) else pack(items, budget)
    return RetrievalResult("longrag", budget, _with_text(snap, packed, ranked.own), dict(ranked.trace))


Entry = Candidate | ContextItem  # a ranked member (not rendered yet), or an unindexed version rendered whole


@dataclass
class Ranked:
    """LongRAG's readable member documents in packing order (text not yet read), with each member's best hit."""

    items: RankedRows | list[Entry]
    own: MemberHits  # each member's best hit
    trace: dict
    queries: tuple[str, ...] = ()        # each hop list's query text: the question first
    placed_by: np.ndarray | None = None  # per entry of `items`, the index of the query whose list ranks it highest
    heads: tuple[int, ...] = ()          # positions in `items` of each hop list's first member, ascending


def longrag_candidates(snap: Snapshot, req: Request, tools: Tools, config: LongRAGConfig) -> Ranked:
    """Every hop's ranked members, merged by `hop_merge`; budget-independent, so hybrid methods can build on it.
    With `req.as_of`, what was current then (index and catalog)."""
    question, embedder = req.question, tools.embedder
    named = [] if config.question_titles == "off" else named_documents(snap, question, req.caller.groups)
    ranked, own, units, hits = _hop(snap, embedder.encode_query(question), req, tools.counter, question, config, named)
    lists, seeds, source, queries = [ranked], [], ranked, [question]
    rule = hop_rule(snap, req.caller.groups, config)
    asked: dict[str, tuple[np.ndarray, RankedRows | list[Entry]]] = {}
    for _ in range(1, config.hops):
        branches = []
        for query, vector, placed in hop_queries(snap, embedder, question, source, seeds, own, rule):
            if query in asked and np.array_equal(asked[query][0], vector):  # a seed copying an earlier one's text
                more = asked[query][1]                                     # makes its query: the same hop again
            else:
                more, more_own, _, _ = _hop(snap, vector, req, tools.counter, query, config)
                asked[query] = vector, more
                own = own.merged(more_own)  # a member's matched sub-chunk: its best match under any hop's query
            branches.append(_unplaced(more, placed))  # the seed is placed; find what it names
            queries.append(query)
        if not branches:
            break
        lists += branches
        source = branches[0]
    merged = interleave(lists) if config.hop_merge == "interleave" else by_best_score(lists)
    return Ranked(merged, own, {"units_ranked": len(units), "subchunk_hits": hits,
                                "queries": len(lists), "seeds": list(seeds)}, tuple(queries), *_placing(lists, merged))


def named_documents(snap: Snapshot, question: str, groups: frozenset[str]) -> list[list[str]]:
    """Per title the question names, its documents these groups may read (named_titles among their titles only)."""
    titles = snap.current.titles
    return [sorted(snap.readable_ids(titles[t], groups)) for t in named_titles(question, readable_title(snap, groups))]


def hop_rule(snap: Snapshot, groups: frozenset[str], config: LongRAGConfig) -> HopRule:
    """The configuration's hop settings; with hop_bridges "titles" or "only-titles", titles these groups may read."""
    rule = config.hop_bridges
    titled = None if rule == "order" else no_title if rule == "no-dates" else readable_title(snap, groups)
    return HopRule(config.hop_query, config.hop_names, config.hop_seeds, titled, rule == "only-titles")


def _hop(snap: Snapshot, query: np.ndarray, req: Request, counter: TokenCounter, text: str, config: LongRAGConfig,
         named: list[list[str]] = ()):
    """One retrieval hop for `text` (embedded as `query`): dense and lexical channels, units by MaxP, member
    documents in packing order, the `named` titles' documents first. With `req.as_of`, the same over the state
    then (rag.retrieval.past_units)."""
    caller = req.caller
    if req.as_of is None:
        state, view, past = snap.vectors, snap.state_units, None
    else:  # its vectors, units and members, BM25 over the texts then and the link boost its units gave
        state, view = snap.past_units_at(req.as_of)
        past = snap.lexical_at(req.as_of, state)
    lexical = _lexical(snap, caller, text, config, past)
    dense = state_search(state, query, caller, config.overfetch)
    units = rank_units(view.codes, dense.near, dense.scores, lexical, config.lexical_weight, config.max_units)
    # The candidate units' other sub-chunks are scored already; only each member's best one becomes a Hit.
    rows = np.concatenate([dense.near, dense.unit_rows(list(units))])
    own, floor = dense.best_per_member(rows), float(dense.scores[rows].min()) if len(rows) else 0.0
    candidates = _candidates(view, caller, own, floor, lexical, units, config)
    if named:
        candidates = named_first(candidates, named, view.table.readable(caller.groups),
                                 partial(_member_scores, view, own, floor, lexical, config.lexical_weight))
    if req.as_of is None and snap.current.unindexed_ids:  # documents between the documents and index steps (rare)
        candidates = _with_unindexed(snap, caller, counter, candidates, dense.hits(rows), lexical, config)
    return candidates, own, units, len(rows)


def _unplaced(entries: RankedRows | list[Entry], placed: set[str]) -> RankedRows | list[Entry]:
    if isinstance(entries, RankedRows):
        return entries.without_docs(placed)
    return [i for i in entries if i.doc_id not in placed]


def by_best_score(lists: list[RankedRows | list[Entry]]) -> RankedRows | list[Entry]:
    """Every hop's members by their best score under any hop (scores of one scale: cosine plus shares of BM25); a
    member keeps its first entry with that score, and equal scores keep the order of first appearance."""
    flat = _entry_codes(lists)
    score = -np.array([i.score for ranked in lists for i in ranked]) if len(flat) else np.zeros(0)  # rounded
    order = np.lexsort((np.arange(len(flat)), score, flat))
    best = order[run_starts(flat[order])]
    _, first_seen = np.unique(flat, return_index=True)  # per code, ascending, as best is
    return _pick(lists, best[np.lexsort((first_seen, score[best]))])


def interleave(lists: list[RankedRows | list[Entry]]) -> RankedRows | list[Entry]:
    """Rank-by-rank round robin over the hops' lists, first occurrence kept: no weight between hops to tune."""
    flat = _entry_codes(lists)
    rank = np.concatenate([np.arange(len(x)) for x in lists] or [np.zeros(0, np.int64)])
    order = np.lexsort((np.repeat(np.arange(len(lists)), [len(x) for x in lists]), rank))
    _, first = np.unique(flat[order], return_index=True)
    return _pick(lists, order[np.sort(first)])


def _placing(lists: list[RankedRows | list[Entry]], merged: RankedRows | list[Entry]) -> tuple[np.ndarray, tuple]:
    """Per merged entry, the list ranking it highest (the earlier list on a tie: what interleave keeps); and the
    merged positions of each list's first entry. From codes alone, so any merge serves (longrag-extract reads both)."""
    codes = _entry_codes([*lists, merged])
    sizes = [len(x) for x in lists]
    flat, picked = codes[:sum(sizes)], codes[sum(sizes):]
    if not len(flat):
        return np.zeros(0, np.int64), ()
    which = np.repeat(np.arange(len(lists)), sizes)
    order = np.lexsort((which, np.concatenate([np.arange(n) for n in sizes]), flat))
    best = order[run_starts(flat[order])]  # per code, ascending: its highest rank over the lists
    placed_by = which[best][np.searchsorted(flat[best], picked)]
    starts = (np.cumsum(sizes) - sizes)[np.array(sizes) > 0]
    return placed_by, tuple(np.flatnonzero(np.isin(picked, flat[starts])).tolist())


def _entry_codes(lists: list[RankedRows | list[Entry]]) -> np.ndarray:
    """Every entry of the lists, in list order, as one number per (doc_id, doc_version, ranges): packing's identity."""
    if _one_table(lists):
        return lists[0].table.entry_codes[np.concatenate([x.rows for x in lists])]
    keys = [(i.doc_id, i.doc_version, i.ranges) for ranked in lists for i in ranked]
    return first_seen_codes({}, keys, len(keys))


def _one_table(lists: list[RankedRows | list[Entry]]) -> bool:
    """Whether the lists are rows of one member table (the snapshot's or a past state's; not with unindexed entries)."""
    return bool(lists) and all(isinstance(x, RankedRows) for x in lists) and len({id(x.table) for x in lists}) == 1


def _pick(lists: list[RankedRows | list[Entry]], chosen: np.ndarray) -> RankedRows | list[Entry]:
    """The entries at these positions of the lists taken as one (ranked rows stay rows)."""
    if _one_table(lists):
        return RankedRows(lists[0].table, np.concatenate([x.rows for x in lists])[chosen],
                          np.concatenate([x.scores for x in lists])[chosen])
    flat = [i for ranked in lists for i in ranked]
    return [flat[i] for i in chosen.tolist()]


def _lexical(snap: Snapshot, caller: Caller, question: str, config: LongRAGConfig,
             past: LexicalIndex | None = None) -> dict[str, float]:
    """BM25 scores of the documents the caller may read, with statistics over those alone (LexicalIndex.search),
    over the current texts or, with `past`, those current at its time."""
    if config.lexical_weight <= 0:
        return {}
    return (snap.lexical if past is None else past).search(question, config.lexical_depth, caller.groups)


def _candidates(view: StateUnits, caller: Caller, own: MemberHits, floor: float, lexical: dict[str, float],
                units: dict[str, float], config: LongRAGConfig) -> RankedRows:
    """Whole member documents of the ranked units, readable ones only, ordered for packing (text not yet read).

    A member's score is its own MaxP (plus the lexical channel) and a share of the best other readable
    member of its unit: the unit's links are LongRAG's bet that a document next to a strong match carries
    the next hop, and packing members (not whole units) keeps that bet affordable under small budgets.
    Token counts are the exact ones stored at ingest for the rendered block. Scores and order are numpy over
    the state's member table (the snapshot's or a past one's); ties go to the unit key, then the position in the unit.
    """
    weight, table = config.lexical_weight, view.table
    rows = table.of_units(list(units))
    rows = rows[table.readable(caller.groups)[rows]]  # a hit on one member never authorises the rest of its unit
    if not len(rows):
        return RankedRows(table, rows, np.zeros(0))
    score = _member_scores(view, own, floor, lexical, weight, rows)
    unit = table.unit_rank[rows]
    total = score + boost_of(config, table.link_density(caller.groups)) * _best_others(unit, score)
    order = np.lexsort((table.position[rows], unit, -total))
    return RankedRows(table, rows[order], total[order])


def _member_scores(view: StateUnits, own: MemberHits, floor: float, lexical: dict[str, float], weight: float,
                   rows: np.ndarray) -> np.ndarray:
    """Each row's own score before the link boost: its best sub-chunk's (or `floor`) plus the BM25 channel's share."""
    return _own_scores(view.code_rows, own, rows, floor) + weight * _lexical_scores(view.table, lexical, rows)


def _own_scores(code_rows: np.ndarray, own: MemberHits, rows: np.ndarray, floor: float) -> np.ndarray:
    """Each row's member's best sub-chunk score, `floor` for a member without a hit."""
    members, scores = code_rows[own.codes], own.scores
    kept = members >= 0  # -1: rows of a member the table does not hold (its document deleted since the index step)
    return at_keys(members[kept], scores[kept], rows, floor)


def _lexical_scores(table: MemberTable, lexical: dict[str, float], rows: np.ndarray) -> np.ndarray:
    """Each row's document's scaled BM25 score (0 without one)."""
    docs = table.doc_ids.strings.codes(list(lexical))
    scores = np.fromiter(lexical.values(), dtype=np.float64, count=len(lexical))
    return at_keys(docs[docs >= 0], scores[docs >= 0], table.doc_codes[rows], 0.0)


def _floor(hits: list[Hit]) -> float:
    """The score a member without a hit of its own gets: the weakest hit's."""
    return min((h.score for h in hits), default=0.0)


def _best_others(unit: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Per member, the best score among the other members of its unit (0 for a unit of one); `unit` is sorted."""
    order = np.lexsort((-score, unit))
    ranked = score[order]
    starts = np.flatnonzero(run_starts(unit[order]))
    counts = np.diff(np.append(starts, len(order)))
    first, second = ranked[starts], ranked[np.minimum(starts + 1, len(order) - 1)]
    group = np.empty(len(order), dtype=np.int64)
    group[order] = np.repeat(np.arange(len(starts)), counts)
    best, other = first[group], second[group]
    return np.where(counts[group] < 2, 0.0, np.where(score == best, other, best))


def link_boost(snap: Snapshot, config: LongRAGConfig, groups: frozenset[str] | None = None) -> float:
    """The share of its unit's best other member's score a member inherits in the snapshot (boost_of), for a caller
    of these groups; without groups, the corpus's (every member counted)."""
    return boost_of(config, snap.current.link_density if groups is None else snap.member_table.link_density(groups))


def boost_of(config: LongRAGConfig, link_density: float) -> float:
    """link_share × the units' mean 1/k over linked documents (MuSiQue 0.15, HotpotQA 0.31, 2WikiMultihopQA 0.45;
    chosen in docs/quality.md), or link_boost: a past state's units give the boost a read then had."""
    if config.link_rule == "corpus":
        return config.link_share * link_density
    return config.link_boost


def _with_unindexed(snap: Snapshot, caller: Caller, counter: TokenCounter, candidates: RankedRows,
                    hits: list[Hit], lexical: dict[str, float], config: LongRAGConfig) -> list[Entry]:
    """Add current versions the documents step recorded but no unit holds yet, whole, in their place.

    Between the documents step and the index step (or after a run killed between them) the old version is
    already hidden; this serves the new one instead of nothing. Its rank comes from its previous version's
    sub-chunks, still in the index, and from the lexical channel, which reads the current text.
    """
    if not snap.current.unindexed_ids:  # the usual case: every current version is in a unit
        return candidates
    dense: dict[str, float] = {}
    for h in hits:
        dense[h.doc_id] = max(dense.get(h.doc_id, -1.0), h.score)
    wanted = snap.readable_ids(sorted(set(dense) | set(lexical)), caller.groups)
    fresh = snap.unindexed(sorted(wanted))
    if not fresh:
        return candidates
    floor = _floor(hits)
    texts = snap.texts([(v.doc_id, v.version) for v in fresh])
    extra = []
    for v in fresh:
        _, text = texts[(v.doc_id, v.version)]
        rendered = render_member(v.title, v.doc_id, v.version, text)
        score = dense.get(v.doc_id, floor) + config.lexical_weight * lexical.get(v.doc_id, 0.0)
        extra.append(ContextItem(v.doc_id, v.version, v.title, rendered, counter.count_one(rendered),
                                 ((0, len(text)),), round(score, 6)))
    return sorted([*candidates, *extra], key=lambda item: -item.score)


def _with_text(snap: Snapshot, items: list[Entry], own: MemberHits) -> list[ContextItem]:
    """Render the packed members from the catalog: header, the member's range of the text, matched sub-chunk."""
    texts = snap.texts([(i.doc_id, i.doc_version) for i in items])
    hits = own.get_many([(i.unit_id, i.doc_id, i.part) for i in items])
    out = []
    for item, hit in zip(items, hits):
        if item.unit_id is None:  # an unindexed version, rendered whole already
            out.append(item)
            continue
        title, text = texts[(item.doc_id, item.doc_version)]
        (start, end), = item.ranges
        out.append(ContextItem(item.doc_id, item.doc_version, item.title,
                               render_member(title, item.doc_id, item.doc_version, text[start:end], item.part),
                               item.tokens, item.ranges, item.score, split_unit_key(item.unit_id)[0],
                               text[hit.start:hit.end] if hit else None, item.part))
    return out
