"""Each sub-chunk row's member (unit key, document, part) as one number, and the look-up from a member to it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag.retrieval.strings import Column, FoundByGet, Strings


@dataclass(frozen=True)
class MemberCodes(FoundByGet):
    """(unit key, doc_id, part) → the member code of its rows: the key packed into one integer, found by bisection."""

    units: Strings
    docs: Strings
    packed: np.ndarray      # sorted distinct packed keys
    codes: np.ndarray       # per packed key, its member code
    first_rows: np.ndarray  # per member code, the first row holding it
    parts: int              # one more than the largest part

    def get(self, key: tuple[str, str, int], default=None):
        unit, doc = self.units.code(key[0]), self.docs.code(key[1])
        if unit < 0 or doc < 0 or not isinstance(key[2], (int, np.integer)) or not 0 <= key[2] < self.parts or not len(self.packed):
            return default
        wanted = (unit * len(self.docs) + doc) * self.parts + key[2]
        at = min(int(np.searchsorted(self.packed, wanted)), len(self.packed) - 1)
        return int(self.codes[at]) if self.packed[at] == wanted else default

    def __len__(self) -> int:
        return len(self.first_rows)


def member_numbering(units: Column, docs: Column, parts: np.ndarray) -> tuple[np.ndarray, MemberCodes]:
    """Per row a number shared by the rows of one (unit key, doc_id, part), in order of first appearance."""
    span = int(parts.max()) + 1 if len(parts) else 1
    if len(units.strings) * len(docs.strings) * span >= 2**62:
        raise ValueError("too many units, documents and parts to number their members in 64 bits")
    packed = (units.codes.astype(np.int64) * len(docs.strings) + docs.codes) * span + parts
    keys, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(keys))
    return rank[inverse.reshape(-1)], MemberCodes(units.strings, docs.strings, keys, rank, np.sort(first), span)
