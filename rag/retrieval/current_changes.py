"""The next snapshot's current part made from the last one's and what the catalog changed since.

A publish changes a few documents and units of a corpus, yet a build from scratch sorts and encodes every string
of it (4–5 CPU s at 742K documents). Here the catalog compares the last part's rows with its own by digest
(rag.store.schema.digest_sql, one join each for documents and units): the documents whose row changed, and the
units that are new or hold one of them, are read again; everything else is taken from the last part's arrays, and
the sorted string tables are merged, not rebuilt. The arrays are those a build from scratch gives
(tests/retrieval/test_current_changes.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rag.retrieval.current import PublishedState, digests_of, doc_units, state_arrays
from rag.retrieval.members import INT_COLUMNS, acl_numbering, renumbered, table_of_columns
from rag.retrieval.state_files import Arrays
from rag.retrieval.strings import Column, Strings, encoded, merged, narrowed
from rag.store.catalog import Catalog

MAX_CHANGED_SHARE = 0.25  # rows changed (documents and units) per document: past it, a build from scratch is as fast


def next_current_arrays(last: PublishedState, catalog: Catalog, max_share: float = MAX_CHANGED_SHARE
                        ) -> Arrays | None:
    """The current part of the catalog's snapshot, made from `last` (None when `last` holds no digests or more than
    `max_share` changed: build it from scratch)."""
    if last.doc_digests is None or last.unit_digests is None:
        return None
    gone_versions, added = catalog.versions_changed_from(_table_of(last.doc_digests, "digest"))
    gone_units, new_units = catalog.units_changed_from(_table_of(last.unit_digests, "unit"))
    if gone_versions.num_rows + added.num_rows + gone_units.num_rows + len(new_units) > max_share * len(last.docs):
        return None
    gone = _among(last.doc_digests, digests_of(gone_versions, "digest"))
    ids = added.column("doc_id").to_pylist()
    order = np.argsort(encoded(ids), kind="stable")
    docs = _docs(last, np.flatnonzero(~gone), added.take(pa.array(order)), encoded(ids)[order])
    touched = sorted(set(last.docs.decode(np.flatnonzero(gone))) | set(ids))
    reread = sorted(set(new_units) | set(catalog.units_holding(touched)))
    kept_units = ~_among(last.unit_digests, digests_of(gone_units, "unit"))
    again = last.table.units.codes(reread)
    kept_units[again[again >= 0]] = False
    return _with_units(last, docs, kept_units, catalog.current_member_columns(reread))


def _table_of(digests: np.ndarray, name: str) -> pa.Table:
    return pa.table({f"{name}_{half}": np.ascontiguousarray(digests[:, i]) for i, half in enumerate(("lo", "hi"))})


def _among(digests: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Per row of `digests`, whether `others` holds the same (lo, hi) pair."""
    order = np.lexsort((others[:, 1], others[:, 0]))
    lo, hi = others[order, 0], others[order, 1]
    start, end = np.searchsorted(lo, digests[:, 0], side="left"), np.searchsorted(lo, digests[:, 0], side="right")
    found = np.zeros(len(digests), dtype=bool)
    one = np.flatnonzero(end - start == 1)
    found[one] = hi[start[one]] == digests[one, 1]
    for i in np.flatnonzero(end - start > 1).tolist():  # a lower half held twice: never seen, but exact all the same
        found[i] = digests[i, 1] in hi[start[i]:end[i]]
    return found


@dataclass(frozen=True)
class _Docs:
    """The next part's documents: their table, columns, ACLs and digests, and each last document's new code."""

    table: Strings
    columns: dict[str, Column]
    acl_ids: np.ndarray
    acl_sets: list[tuple[str, ...]]
    digests: np.ndarray
    moved: np.ndarray  # per document code of the last part, its code here (-1: gone or read again)


def _docs(last: PublishedState, kept: np.ndarray, added: pa.Table, ids: np.ndarray) -> _Docs:
    """The last part's documents at `kept` (codes) and the `added` rows (sorted by their encoded `ids`) as the next
    part's."""
    table, kept_at, added_at = merged(last.docs.table[kept], ids)
    table = narrowed(table)
    columns = {name: _column(getattr(last, attr).take(kept), kept_at, added.column(field).to_pylist(), added_at)
               for name, attr, field in (("versions", "versions_of", "version"), ("titles", "titles_of", "title"),
                                         ("hashes", "hashes", "content_hash"))}
    sets = {s: i for i, s in enumerate(last.acl_sets)}
    new_ids, new_sets = acl_numbering(added.column("acl"))
    remap = np.array([sets.setdefault(s, len(sets)) for s in new_sets] or [0], dtype=np.int32)
    ids = np.empty(len(table), dtype=np.int32)
    ids[kept_at], ids[added_at] = last.acl_ids[kept], remap[new_ids]
    acl_ids, acl_sets = renumbered(ids, list(sets))
    digests = np.empty((len(table), 2), dtype=np.uint64)
    digests[kept_at], digests[added_at] = last.doc_digests[kept], digests_of(added, "digest")
    moved = np.full(len(last.docs), -1, dtype=np.int64)
    moved[kept] = kept_at
    return _Docs(Strings(table), columns, acl_ids, acl_sets, digests, moved)


def _column(kept: Column, kept_at: np.ndarray, added: list[str], added_at: np.ndarray) -> Column:
    """A per-document column of the kept rows and the added strings, over the strings it uses, sorted."""
    strings = encoded(added)
    extra = np.unique(strings[kept.strings.codes_of(strings) < 0]) if len(strings) else strings
    table, old_at, _ = merged(kept.strings.table, extra)
    codes = np.empty(len(kept_at) + len(added_at), dtype=np.int64)
    codes[kept_at], codes[added_at] = old_at[kept.codes], Strings(table).codes_of(strings)
    used = np.zeros(len(table), dtype=bool)
    used[codes] = True
    rank = np.cumsum(used) - 1
    return Column(rank[codes].astype(np.int32), Strings(narrowed(table[used])))


def _with_units(last: PublishedState, docs: _Docs, kept_units: np.ndarray, rows: pa.Table) -> Arrays | None:
    """The next part: the last table's rows of the `kept_units` (a mask over its units), and `rows` (the members of
    the units read again); None if a kept row lost its document."""
    old = last.table
    kept = np.flatnonzero(kept_units)
    keys = rows.column("unit_key").to_pylist()
    units, kept_at, _ = merged(old.units.table[kept], encoded(sorted(set(keys))))
    units = narrowed(units)
    moved = np.full(len(old.units), -1, dtype=np.int64)
    moved[kept] = kept_at
    old_rows = np.flatnonzero(kept_units[old.unit_rank])
    new_units = Strings(units).codes_of(encoded(keys))
    unit = np.concatenate([moved[old.unit_rank[old_rows]], new_units])
    doc = np.concatenate([docs.moved[old.doc_ids.codes[old_rows]], docs.table.codes_of(encoded(
        rows.column("doc_id").to_pylist()))])
    if (doc < 0).any():  # a kept unit's member whose document changed (never: units_holding lists its unit)
        return None
    ints = {name: np.concatenate([getattr(old, attr)[old_rows], rows.column(column).to_numpy().astype(np.int64)])
            for (name, column), attr in zip(INT_COLUMNS.items(), ("position", "parts", "starts", "ends", "tokens"))}
    order = np.lexsort((ints["position"], unit))
    unit, doc, ints = unit[order], doc[order], {name: values[order] for name, values in ints.items()}
    strings = [Column(doc.astype(np.int32), docs.table), *(c.take(doc) for c in docs.columns.values())]
    table = table_of_columns(Strings(units), np.bincount(unit, minlength=len(units)).astype(np.int64), strings, ints,
                             *renumbered(docs.acl_ids[doc], docs.acl_sets))
    digests = np.empty((len(units), 2), dtype=np.uint64)
    digests[kept_at] = last.unit_digests[kept]
    codes, first = np.unique(new_units, return_index=True)
    digests[codes] = digests_of(rows, "unit")[first]
    return state_arrays(table, docs.table, docs.columns, docs.acl_ids, docs.acl_sets,
                        doc_units(table, len(docs.table)), {"doc_digests": docs.digests, "unit_digests": digests})
