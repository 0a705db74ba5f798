"""What an as-of read needs of a past state besides its vectors, built once per state and kept while it lives."""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from rag.retrieval.members import MemberTable, member_table
from rag.retrieval.unit_ranking import UnitCodes, unit_codes
from rag.retrieval.vectors import VectorState
from rag.store.rows import MemberRow

PAST_STATES_KEPT = 4  # past table versions whose in-memory vectors (and what is built of them) are kept
T = TypeVar("T")


@dataclass(frozen=True)
class PastUnits:
    """A past state's units and documents as numbers, each document's unit then among them (the BM25 channel's), the
    members then as a table (a hop's candidates: a catalog query per hop cost 8 of an as-of hop's 16 CPU ms), and the
    link density of the units then (the corpus link boost's)."""

    codes: UnitCodes
    table: MemberTable
    link_density: float


def past_units(state: VectorState, members: dict[str, list[MemberRow]]) -> PastUnits:
    """From the members current then (unit key → rows in position order): each document's first unit by key, as the
    current state has it now."""
    unit_of: dict[str, str] = {}
    for key in sorted(members, reverse=True):  # the first key by sort order is written last
        unit_of.update((row.doc_id, key) for row in members[key])
    return PastUnits(unit_codes(state, unit_of), member_table(members),
                     linked_share(len(rows) for rows in members.values()))


def linked_share(sizes: Iterable[int]) -> float:
    """1/k averaged over the members of units of k >= 2 members: the share of a unit's best score each member gets
    when it is divided evenly, for a typical linked document of the corpus (0 when nothing is linked)."""
    linked = [k for k in sizes if k > 1]
    return len(linked) / sum(linked) if linked else 0.0


def per_state(kept: dict[int, tuple], state: VectorState, build: Callable[[], T]) -> T:
    """What `build` makes of a past state, made once while the state lives and kept for the last PAST_STATES_KEPT;
    held by a weak reference to the state, so it never keeps a state's rows alive."""
    found = kept.get(id(state))
    if found is None or found[0]() is not state:  # an id is reused only once its state is gone
        if len(kept) >= PAST_STATES_KEPT:
            kept.pop(next(iter(kept)), None)
        found = kept[id(state)] = (weakref.ref(state), build())
    return found[1]
