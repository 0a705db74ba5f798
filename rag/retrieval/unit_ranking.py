"""A hop's units by their best member (MaxP plus the lexical channel), over numbers built once per snapshot.

A hop ranks a few hundred (unit, document) pairs, from its nearest sub-chunks and its BM25 documents; as Python
dictionaries keyed by strings that was a fifth of the hop. Here a pair is one integer: unit code × documents +
document code, where unit codes follow the keys' sorted order, so a tie on the code is a tie on the key.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rag.retrieval.row_scores import RowScores
from rag.retrieval.state_files import Arrays
from rag.retrieval.strings import Column, Strings, strings_of, union_of
from rag.retrieval.vectors import VectorState, run_starts


@dataclass(frozen=True)
class UnitCodes:
    """Per row of the serving vectors its (unit, document) pair; per document its current unit's pair."""

    unit_keys: Strings                  # sorted: a unit's code is its position
    docs: Strings                       # a document's code is its position
    row_pairs: np.ndarray               # per vector row, unit code × documents + document code
    doc_pair: np.ndarray                # per document code, the pair of the unit holding its current version (or -1)

    @property
    def documents(self) -> int:
        return max(len(self.docs), 1)


def unit_codes(state: VectorState, unit_of: Mapping[str, str]) -> UnitCodes:
    """The codes of the vector rows' units and documents and of the current documents' units."""
    docs, units = doc_units(unit_of)
    all_units = union_of([state.unit_keys.strings.table, units.strings.table])
    all_docs = union_of([state.doc_ids.strings.table, docs.table])
    documents = max(len(all_docs), 1)
    row_units = all_units.codes_of(state.unit_keys.strings.table)[state.unit_keys.codes]
    row_docs = all_docs.codes_of(state.doc_ids.strings.table)[state.doc_ids.codes]
    doc_pair = np.full(len(all_docs), -1, dtype=np.int64)
    held = all_docs.codes_of(docs.table)
    doc_pair[held] = all_units.codes_of(units.strings.table)[units.codes] * documents + held
    return UnitCodes(all_units, all_docs, row_units * documents + row_docs, doc_pair)


def unit_code_arrays(codes: UnitCodes) -> Arrays:
    return Arrays({"units": codes.unit_keys.table, "docs": codes.docs.table, "row_pairs": codes.row_pairs,
                   "doc_pair": codes.doc_pair}, {})


def unit_codes_of(found: Arrays) -> UnitCodes:
    return UnitCodes(Strings(found["units"]), Strings(found["docs"]), found["row_pairs"], found["doc_pair"])


def doc_units(unit_of: Mapping[str, str]) -> tuple[Strings, Column]:
    """Documents (sorted) and each one's unit, as arrays (a mapped mapping gives its own)."""
    if hasattr(unit_of, "arrays"):
        return unit_of.arrays()
    docs = strings_of(list(unit_of))
    order = np.argsort(docs.codes, kind="stable")
    units = list(unit_of.values())
    return docs.strings, strings_of([units[i] for i in order.tolist()])


def rank_units(codes: UnitCodes, near: np.ndarray, scores: RowScores, lexical: dict[str, float], weight: float,
               limit: int) -> dict[str, float]:
    """The `limit` best units (key → score) by their best pair: the best score of its nearest rows plus `weight`
    × its document's BM25 share; a BM25 document without a near row of its unit counts the weakest near row's."""
    pair_of = codes.row_pairs[near]
    found = scores[near].astype(np.float64)
    floor = float(found.min()) if len(found) else 0.0
    by_pair = np.lexsort((-found, pair_of))  # per pair, its best row first
    first = by_pair[run_starts(pair_of[by_pair])]
    pairs, best = pair_of[first], found[first]
    docs, held, lex = _lexical_codes(codes, lexical)
    dense = best + weight * at_keys(docs, lex, pairs % codes.documents, 0.0)
    extra = held[held >= 0]
    boosted = at_keys(pairs, best, extra, floor) + weight * lex[held >= 0]
    units = np.concatenate([pairs // codes.documents, extra // codes.documents])
    score = np.concatenate([dense, boosted])
    order = np.lexsort((-score, units))  # per unit, its best first
    first = order[run_starts(units[order])]
    top = first[np.lexsort((units[first], -score[first]))][:limit]
    keys = codes.unit_keys
    return {keys[u]: s for u, s in zip(units[top].tolist(), score[top].tolist())}


def _lexical_codes(codes: UnitCodes, lexical: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The BM25 documents that have a code (every other has no row and no unit): their codes, their units' pairs
    (-1 without one) and their scores."""
    docs = codes.docs.codes(list(lexical))
    known = docs >= 0
    scores = np.fromiter(lexical.values(), dtype=np.float64, count=len(lexical))
    return docs[known], codes.doc_pair[docs[known]], scores[known]


def at_keys(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: float) -> np.ndarray:
    """values[k] for each wanted key k of `keys` (distinct), `missing` for the others."""
    if not len(keys):
        return np.full(len(wanted), missing)
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], missing)
