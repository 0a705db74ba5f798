"""What an as-of read needs of a past state besides its vectors, built once per state and kept while it lives."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import numpy as np

from rag.retrieval.members import MemberTable, first_unit_of, member_table
from rag.retrieval.unit_ranking import UnitCodes, unit_codes
from rag.retrieval.vectors import VectorState
from rag.store.rows import MemberRow

PAST_STATES_KEPT = 4  # past table versions whose in-memory vectors (and what is built of them) are kept
T = TypeVar("T")


@dataclass(frozen=True)
class StateUnits:
    """A vector state's units and documents as numbers, each document's unit among them (the BM25 channel's), the
    members as a table (a hop's candidates: for a past state, a catalog query per hop cost 8 of an as-of hop's 16 CPU
    ms), where the state's member codes lie in it, and the units' link density (the corpus link boost's): the
    snapshot's (Snapshot.state_units) or those current at a past time (past_units)."""

    codes: UnitCodes
    table: MemberTable
    code_rows: np.ndarray


def past_units(state: VectorState, members: dict[str, list[MemberRow]]) -> StateUnits:
    """From the members current then (unit key → rows in position order): each document's first unit by key, as the
    current state has it now."""
    table = member_table(members)
    return StateUnits(unit_codes(state, first_unit_of(members)), table, code_rows(state, table))


def code_rows(state: VectorState, table: MemberTable) -> np.ndarray:
    """Per member code of the state's rows (VectorState.member_codes), its row in the table; -1 for a member the
    table does not hold (its document deleted or replaced since the index step)."""
    first = state.code_of.first_rows
    units = table.units.codes_of(state.unit_keys.strings.table)[state.unit_keys.codes[first]]
    docs = table.doc_ids.strings.codes_of(state.doc_ids.strings.table)[state.doc_ids.codes[first]]
    return table.rows_of(units, docs, state.parts[first].astype(np.int64))


def per_state(kept: dict[tuple[int, datetime], tuple], state: VectorState, moment: datetime,
              build: Callable[[], T]) -> T:
    """What `build` makes of a past state as the catalog's history stood at `moment` (kept_last); held by a weak
    reference to the state, so it never keeps a state's rows alive. One state can serve several moments: a documents
    step changes what was current before its publish does."""
    key = (id(state), moment)
    if key in kept and kept[key][0]() is not state:  # an id is reused only once its state is gone
        del kept[key]
    return kept_last(kept, key, lambda: (weakref.ref(state), build()))[1]


def kept_last(kept: dict, key, build: Callable[[], T]) -> T:
    """kept[key], built on a miss; the oldest entry makes room once PAST_STATES_KEPT are kept."""
    found = kept.get(key)
    if found is None:
        if len(kept) >= PAST_STATES_KEPT:
            kept.pop(next(iter(kept)), None)
        found = kept[key] = build()
    return found
