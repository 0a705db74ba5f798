"""BM25 as it stood at a past time, built from the current index and what changed since.

The documents whose version then is still current are scored by the current partitions as they are; the current
versions that were not current then count for nobody (out of N, document frequencies, the mean length and the
results), and the versions current then that are not now are scored from their own texts in one more part, readable
under their ACL then. So the statistics and scores are exactly those of an index of the texts current then, and a
past state costs, once, in proportion to what changed since it: a query on it costs what a current one does.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import ChainMap
from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np

from rag.retrieval.lexical import LexicalIndex, acl_codes, postings
from rag.store.catalog import Catalog
from rag.store.settings import as_of_retention


def past_lexical(current: LexicalIndex, catalog: Catalog, as_of: datetime) -> LexicalIndex:
    """The current index seen as of `as_of`, from the catalog's versions changed since then."""
    newer, older = catalog.versions_changed_since(as_of)
    return past_view(current, newer, older, _all_texts(catalog, as_of))


def past_view(current: LexicalIndex, newer: list[tuple[str, str]], older: list[tuple[str, str, tuple]],
              text_of: Callable[[list[str]], dict[str, str]]) -> LexicalIndex:
    """The current index with `newer` (doc_id, content hash) left out and `older` (doc_id, content hash, ACL) added,
    their texts by hash from `text_of`; with no change, the current index itself."""
    if not newer and not older:
        return current
    gone = [d for d, _ in newer]
    acl_ids = []
    for part, ids in zip(current.parts, current.acl_ids):
        ids = ids.copy()
        ids[_rows_of(part.doc_ids, gone)] = -1
        acl_ids.append(ids)
    parts, sets, vocab = list(current.parts), {s: i for i, s in enumerate(current.acl_sets)}, current.vocab
    if older:
        known = ChainMap(*(p.texts for p in current.parts))  # tokenised already: only the texts of then are read
        vocab = vocab.growable()  # a mapped vocabulary is read-only: its ids, and the texts' of then after them
        parts.append(postings("then", [(d, h) for d, h, _ in older], text_of, vocab, known))
        acl_ids.append(acl_codes(parts[-1].doc_ids, {d: acl for d, _, acl in older}, sets))
    return LexicalIndex(parts, vocab, acl_ids, list(sets))


def _rows_of(ids: list[str], wanted: list[str]) -> np.ndarray:
    """The rows of `ids` (sorted by code point, as DuckDB's ORDER BY sorts UTF-8) holding the wanted ids: a
    bisection each, so this costs in proportion to what changed, not to the partition."""
    rows = []
    for doc_id in wanted:
        at = bisect_left(ids, doc_id)
        if at < len(ids) and ids[at] == doc_id:
            rows.append(at)
    return np.array(rows, dtype=np.int64)


def _all_texts(catalog: Catalog, as_of: datetime):
    """The catalog's texts by hash, failing in one line for a text dropped past the retention: scoring a version
    without its own text would rank it by something it never said."""
    def text_of(hashes: list[str]) -> dict[str, str]:
        found = catalog.texts_by_hash(hashes)
        missing = sorted(set(hashes) - found.keys())
        if missing:
            raise LookupError(f"as of {as_of:%Y-%m-%d %H:%M:%S}: the text of a version current then (content "
                              f"{missing[0][:12]}) is no longer kept; as-of reads reach back "
                              f"{as_of_retention() / timedelta(days=1):g} days (RAG_INDEX_RETENTION_DAYS)")
        return found
    return text_of
