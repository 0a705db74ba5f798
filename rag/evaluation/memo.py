"""Per-question memos for the evaluation: every method embeds the same question, and each budget's context
repeats most of the smaller budgets' texts, so each is embedded or counted once per question, not per method."""
from __future__ import annotations

import time

import numpy as np


class QueryMemo:
    """The embedder, with `encode_query` remembered until `clear()`; everything else goes to the embedder.

    `seconds(text)` is what the one real embedding took, so every method that uses the vector can be charged it.
    """

    def __init__(self, embedder):
        self._embedder, self._vectors = embedder, {}

    def encode_query(self, text: str) -> np.ndarray:
        if text not in self._vectors:
            start = time.perf_counter()
            vector = self._embedder.encode_query(text)
            self._vectors[text] = (vector, time.perf_counter() - start)
        return self._vectors[text][0]

    def seconds(self, text: str) -> float:
        self.encode_query(text)
        return self._vectors[text][1]

    def clear(self) -> None:
        self._vectors.clear()

    def __getattr__(self, name):
        return getattr(self._embedder, name)


class CountMemo:
    """`count` of the token counter, with each text's count remembered until `clear()` (for the budget check)."""

    def __init__(self, counter):
        self._counter, self._counts = counter, {}

    def count(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._counts))
        self._counts |= dict(zip(todo, self._counter.count(todo).tolist()))
        return np.fromiter((self._counts[t] for t in texts), dtype=np.int64, count=len(texts))

    def clear(self) -> None:
        self._counts.clear()
