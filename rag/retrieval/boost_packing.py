"""Which members a small budget packs first: members that only the link boost ranks high pack last."""
from __future__ import annotations

import numpy as np

from rag.retrieval.members import RankedRows

BOOSTED_WAIT = ("none", "mates", "all")


def boosted_wait(ranked: RankedRows, budget: int, scope: str) -> RankedRows:
    """The ranked rows with the entries whose place is the link boost's alone moved behind every other entry.

    An entry's place is the boost's alone when its own score (dense and BM25, without the boost) is below the total
    of every entry the budget packs as ranked. The boost bets that a strong member's unit holds the next hop, which
    LongRAG reads whole; a unit the budget cannot hold is not read whole, and MuSiQue's units of ~24 members fill a
    1K context with mates of one strong member. `scope` "mates" makes only the later members of units larger than
    the budget wait (a unit's size: its readable ranked members' tokens), "all" every such entry.
    """
    table, rows, plain = ranked.table, ranked.rows, ranked.plain
    if scope == "none" or not len(rows) or plain is None:
        return ranked
    packed = ranked.packed_at(budget)
    weakest = ranked.scores[packed].min() if packed else -np.inf
    waits = (ranked.scores > plain) & (plain < weakest)
    if scope == "mates":
        waits &= _large_unit_mates(ranked, budget)
    order = np.concatenate([np.flatnonzero(~waits), np.flatnonzero(waits)])
    return RankedRows(table, rows[order], ranked.scores[order], plain[order])


def _large_unit_mates(ranked: RankedRows, budget: int) -> np.ndarray:
    """Whether each row is a later member (not the highest-ranked) of a unit whose ranked members exceed the budget."""
    table, rows = ranked.table, ranked.rows
    unit = table.unit_rank[rows]
    first_entry = np.zeros(len(rows), dtype=bool)
    first_entry[np.unique(table.entry_codes[rows], return_index=True)[1]] = True  # interleave keeps each once already
    size = np.bincount(unit, weights=np.where(first_entry, table.tokens[rows], 0), minlength=int(unit.max()) + 1)
    lead = np.zeros(len(rows), dtype=bool)
    lead[np.unique(unit, return_index=True)[1]] = True
    return ~lead & (size[unit] > budget)
