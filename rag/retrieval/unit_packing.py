"""Which members a small budget packs first: a unit too large for the budget offers its best member, not its mates."""
from __future__ import annotations

import numpy as np

from rag.retrieval.members import RankedRows

UNIT_MATES = ("ranked", "wait")


def mates_wait(ranked: RankedRows, budget: int) -> RankedRows:
    """The ranked rows with the later members of units larger than the budget moved behind every other entry.

    The link boost bets that a strong member's unit holds the next hop, which LongRAG reads whole; a unit the
    budget cannot hold is not read whole, and its mates (MuSiQue's units have ~24 members) take the places of
    other units' documents. A unit's size is its readable ranked members' tokens, so unreadable ones weigh nothing.
    """
    table, rows = ranked.table, ranked.rows
    if not len(rows):
        return ranked
    unit = table.unit_rank[rows]
    first_entry = np.zeros(len(rows), dtype=bool)
    first_entry[np.unique(table.entry_codes[rows], return_index=True)[1]] = True  # interleave keeps each once already
    size = np.bincount(unit, weights=np.where(first_entry, table.tokens[rows], 0), minlength=int(unit.max()) + 1)
    lead = np.zeros(len(rows), dtype=bool)
    lead[np.unique(unit, return_index=True)[1]] = True  # each unit's highest-ranked row
    waits = ~lead & (size[unit] > budget)
    order = np.concatenate([np.flatnonzero(~waits), np.flatnonzero(waits)])
    return RankedRows(table, rows[order], ranked.scores[order])
