"""Token counting with the embedder's own WordPiece tokenizer, offline, bounded by characters."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from rag.models.files import model_dir

# WordPiece turns a word over 100 characters into one [UNK] and drops invisible characters, so a 2 MB
# "word" would count as one token. Every count is therefore at least one token per CHARS_PER_TOKEN
# characters (prose runs 4-7.5 characters per token, Chinese 1-2.5, so real text is unaffected).
CHARS_PER_TOKEN = 10
# BERT's normalizer works a character at a time and its pre-tokenizer splits at every one of these blanks, so a
# text's word pieces are the sum of its blank-separated runs' (checked on every bundled corpus in the tests).
_RUN = re.compile(r"[^ \t\n\r]+")
RUNS_KEPT = 200_000  # runs whose pieces count_cached remembers (~20 MB); past that it starts over
TEXTS_KEPT = 20_000  # whole texts whose count count_cached remembers (short-chunk blocks: ~15 MB); then it starts over


class TokenCounter:
    """Counts MiniLM word pieces (no special tokens); the one tokenizer every budget uses."""

    def __init__(self, tokenizer_path: Path | None = None):
        self._tok = Tokenizer.from_file(str(tokenizer_path or model_dir() / "tokenizer.json"))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._runs: dict[str, int] = {}
        self._texts: dict[str, int] = {}

    def count(self, texts: list[str]) -> np.ndarray:
        """Word pieces of each text, never fewer than len(text) / CHARS_PER_TOKEN: a budget bounds characters."""
        if not texts:
            return np.zeros(0, dtype=np.int64)
        pieces = np.fromiter((len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)),
                             dtype=np.int64, count=len(texts))
        floor = np.fromiter((-(-len(t) // CHARS_PER_TOKEN) for t in texts), dtype=np.int64, count=len(texts))
        return np.maximum(pieces, floor)

    def count_one(self, text: str) -> int:
        return int(self.count([text])[0])

    def count_cached(self, texts: list[str]) -> np.ndarray:
        """count(), with each text's count and each blank-separated run's pieces remembered: a server packs the same
        blocks again and again (~0.2 µs a text looked up against ~20 µs a block's runs), and new texts repeat words
        the process has counted before (~3 µs a piece tokenised against ~0.1 µs a run looked up)."""
        known = self._texts
        out = np.fromiter((known.get(t, -1) for t in texts), dtype=np.int64, count=len(texts))
        todo = np.flatnonzero(out < 0)
        if len(todo):
            fresh = self._count_runs([texts[i] for i in todo])
            out[todo] = fresh
            if len(known) + len(todo) > TEXTS_KEPT:  # rebound, not cleared: a concurrent call keeps its own
                self._texts = known = {}
            known.update(zip((texts[i] for i in todo), fresh.tolist()))
        return out

    def _count_runs(self, texts: list[str]) -> np.ndarray:
        """count() as the sum of each blank-separated run's pieces, the runs' pieces remembered."""
        runs = [_RUN.findall(t) for t in texts]
        known = self._runs
        missing = list({r for found in runs for r in found if r not in known})
        if missing:
            fresh = dict(zip(missing, (len(e.ids) for e in self._tok.encode_batch(missing, add_special_tokens=False))))
            if len(known) + len(fresh) > RUNS_KEPT:  # start over; rebound, not cleared: a concurrent call keeps its own
                self._runs, known = fresh, known | fresh
            else:
                known.update(fresh)
        pieces = np.fromiter((sum(map(known.__getitem__, found)) for found in runs), dtype=np.int64, count=len(texts))
        floor = np.fromiter((-(-len(t) // CHARS_PER_TOKEN) for t in texts), dtype=np.int64, count=len(texts))
        return np.maximum(pieces, floor)

    def pieces(self, text: str) -> tuple[list[tuple[int, int]], list[int]]:
        """Character span and word index of every token, for cutting text that has no sentence boundary.

        Tokens and gaps longer than CHARS_PER_TOKEN are split into pieces of that many characters, so that
        a cut after k pieces never holds more than k * CHARS_PER_TOKEN characters.
        """
        enc = self._tok.encode(text, add_special_tokens=False)
        offsets: list[tuple[int, int]] = []
        words: list[int] = []
        nexts = [s for s, _ in enc.offsets[1:]] + [len(text)]
        for gap, ((start, end), word, next_start) in enumerate(zip(enc.offsets, enc.word_ids, nexts)):
            for s in range(start, max(end, start + 1), CHARS_PER_TOKEN):
                offsets.append((s, min(s + CHARS_PER_TOKEN, end)))
                words.append(-1 if word is None else word)
            for s in range(offsets[-1][0] + CHARS_PER_TOKEN, next_start, CHARS_PER_TOKEN):
                offsets.append((s, s))  # an empty piece inside a long gap (spaces, invisible characters)
                words.append(-2 - gap)
        return offsets, words


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter()
