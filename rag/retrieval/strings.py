"""Strings as arrays a process can map from a file: a sorted table of distinct strings, and columns of codes into it.

A read state's ids (units, documents, terms) were Python strings in dicts and object arrays: each worker built and
held its own, and an object array cannot be mapped. Here a table is one fixed-width byte array of distinct UTF-8
strings in sorted order (byte order of UTF-8 is code point order, so a string's code is its rank under Python's
`sorted`), found by binary search; a column is an int32 code per row. Both are plain numpy arrays that np.load can
map read-only, so every worker of a host shares one copy through the page cache.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.store.arrow_sql import whole


def encoded(values: Iterable[str]) -> np.ndarray:
    """The strings as one fixed-width byte array (UTF-8); a string may not end in NUL (the width pads with NULs)."""
    out = np.array([v.encode() for v in values], dtype=bytes)
    if out.dtype.itemsize == 0 or not len(out):
        return out.astype("S1")
    return out


@dataclass(frozen=True)
class Strings(Sequence):
    """Distinct strings in sorted order; a string's code is its position."""

    table: np.ndarray  # dtype S<width>, sorted, distinct

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [s.decode() for s in self.table[i].tolist()]
        return self.table[i].decode()

    def __contains__(self, value) -> bool:
        return isinstance(value, str) and self.code(value) >= 0

    def code(self, value: str) -> int:
        """The string's code, -1 when the table lacks it (or it is not a string)."""
        if not isinstance(value, str) or not len(self.table):
            return -1
        raw = value.encode()
        if len(raw) > self.table.dtype.itemsize:  # a longer string than any in the table
            return -1
        at = int(self.table.searchsorted(raw))
        return at if at < len(self.table) and self.table[at] == raw else -1

    def codes(self, values: Sequence[str]) -> np.ndarray:
        """Each string's code (int64), -1 for one the table lacks (a Column's table is looked up once, not each row)."""
        if not len(values):
            return np.zeros(0, dtype=np.int64)
        if isinstance(values, Column):
            return self.codes_of(values.strings.table)[values.codes]
        return self.codes_of(encoded(values))

    def codes_of(self, wanted: np.ndarray) -> np.ndarray:
        """codes() of strings already encoded (any width)."""
        width = self.table.dtype.itemsize
        out = np.full(len(wanted), -1, dtype=np.int64)
        if not len(self.table):
            return out
        fits = np.char.str_len(wanted) <= width if wanted.dtype.itemsize > width else np.ones(len(wanted), bool)
        probe = wanted[fits].astype(self.table.dtype)  # cut to the table's width only where nothing is cut
        at = np.minimum(np.searchsorted(self.table, probe), len(self.table) - 1)
        out[np.flatnonzero(fits)] = np.where(self.table[at] == probe, at, -1)
        return out

    def decode(self, codes: np.ndarray) -> list[str]:
        return [s.decode() for s in self.table[codes].tolist()]


def strings_of(values: Sequence[str] | np.ndarray) -> "Column":
    """The values as a column of codes into their sorted distinct strings."""
    raw = values if isinstance(values, np.ndarray) and values.dtype.kind == "S" else encoded(values)
    table, codes = np.unique(raw, return_inverse=True)
    return Column(codes.reshape(-1).astype(np.int32), Strings(table))


def column_of(values: pa.ChunkedArray | pa.Array) -> "Column":
    """strings_of an Arrow string column: a hash pass finds the distinct strings, Arrow sorts them (by bytes, as
    numpy does, at a fraction of numpy's cost for fixed-width bytes)."""
    found = pc.dictionary_encode(whole(values))
    order = pc.array_sort_indices(found.dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return Column(rank[found.indices.to_numpy()], Strings(encoded(found.dictionary.take(order).to_pylist())))


@dataclass(frozen=True)
class Column:
    """A column of strings as codes into a table: indexing with rows gives an object array, with an int a string."""

    codes: np.ndarray  # int32 per row
    strings: Strings

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        if isinstance(i, (int, np.integer)):
            return self.strings.table[self.codes[i]].decode()
        return np.array(self.strings.decode(self.codes[i]), dtype=object).reshape(-1)

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        return self.strings.decode(self.codes)

    def take(self, rows: np.ndarray) -> "Column":
        return Column(self.codes[rows], self.strings)

    @property
    def dtype(self):
        return np.dtype(object)


def as_column(values) -> Column:
    """A Column of these strings (itself when it is one)."""
    return values if isinstance(values, Column) else strings_of([str(v) for v in values])


def concat_columns(columns: list[Column]) -> Column:
    """The columns one after the other, over the union of their tables."""
    tables = [c.strings.table for c in columns]
    union = union_of(tables).table if tables else encoded([])
    codes = [np.searchsorted(union, t.astype(union.dtype))[c.codes] if len(c) else c.codes
             for c, t in zip(columns, tables)]
    return Column(np.concatenate(codes or [np.zeros(0, np.int32)]).astype(np.int32), Strings(union))


def union_of(tables: list[np.ndarray]) -> Strings:
    """The distinct strings of these string tables (each sorted and distinct), sorted: the first with the others'
    missing strings merged in, not a sort of them all (the tables of one corpus differ in a few strings)."""
    out = tables[0]
    for table in tables[1:]:
        out = merged(out, table[Strings(out).codes_of(table) < 0])[0]
    return Strings(out.astype(f"S{max(t.dtype.itemsize for t in tables)}"))


def merged(kept: np.ndarray, added: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two sorted string tables without a common string as one sorted table (at the wider width), and the positions
    each one's strings went to."""
    common = f"S{max(kept.dtype.itemsize, added.dtype.itemsize, 1)}"  # compared at one width: none cut short
    kept, added = kept.astype(common), added.astype(common)
    at = np.searchsorted(kept, added)
    added_at = at + np.arange(len(added))
    kept_at = np.arange(len(kept)) + np.searchsorted(at, np.arange(len(kept)), side="right")
    table = np.empty(len(kept) + len(added), dtype=common)
    table[kept_at], table[added_at] = kept, added
    return table, kept_at, added_at


def narrowed(table: np.ndarray) -> np.ndarray:
    """A string table at the width of its longest string (what encoding its strings gives)."""
    return table.astype(f"S{max(int(np.char.str_len(table).max(initial=0)), 1)}")


class FoundByGet:
    """`[key]` and `in` from the class's `get` (a search that finds a key's value or None, no dict behind it)."""

    def __getitem__(self, key):
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key) -> bool:
        return self.get(key) is not None


@dataclass(frozen=True)
class RowsByKey(FoundByGet, Mapping):
    """Key → the rows holding it (ascending), from a column's codes: `order` lists rows by code, `bounds` cuts it."""

    strings: Strings
    order: np.ndarray
    bounds: np.ndarray

    def get(self, key, default=None):
        code = self.strings.code(key) if isinstance(key, str) else -1
        if code < 0 or self.bounds[code + 1] == self.bounds[code]:  # a table's string whose rows were all left out
            return default
        return self.order[self.bounds[code]:self.bounds[code + 1]]

    def rows(self, keys: list[str]) -> list[np.ndarray]:
        """The rows of each key the table holds rows of, in the keys' order (one search for all)."""
        codes = self.strings.codes(keys)
        codes = codes[codes >= 0]
        lo, hi = self.bounds[codes].tolist(), self.bounds[codes + 1].tolist()
        return [self.order[a:b] for a, b in zip(lo, hi) if b > a]

    def __iter__(self):
        return (self.strings[c] for c in np.flatnonzero(np.diff(self.bounds)).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(np.diff(self.bounds)))


def rows_by_key(column: Column) -> RowsByKey:
    """Each key's rows in row order (a stable sort of the codes)."""
    order = np.argsort(column.codes, kind="stable")
    bounds = np.searchsorted(column.codes[order], np.arange(len(column.strings) + 1))
    return RowsByKey(column.strings, order, bounds)
