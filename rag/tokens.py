"""Token counting with the embedder's own WordPiece tokenizer, offline."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from rag.model_files import model_dir


class TokenCounter:
    """Counts MiniLM word pieces (no special tokens); the one tokenizer every budget uses."""

    def __init__(self, tokenizer_path: Path | None = None):
        self._tok = Tokenizer.from_file(str(tokenizer_path or model_dir() / "tokenizer.json"))
        self._tok.no_truncation()
        self._tok.no_padding()

    def count(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.int64)
        return np.fromiter((len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)),
                           dtype=np.int64, count=len(texts))

    def count_one(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def pieces(self, text: str) -> tuple[list[tuple[int, int]], list[int]]:
        """Character span and word index of every token, for cutting text that has no sentence boundary."""
        enc = self._tok.encode(text, add_special_tokens=False)
        return enc.offsets, [w if w is not None else -1 for w in enc.word_ids]


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter()
