"""Importance: how much the answer drawn from a chunk changes when the chunk is perturbed with character noise.

Imp(c) = 1 − mean_i cos(E(answer(c)), E(answer(noise(c, λ_i)))), λ_i drawn from (0, 1]. E embeds answers
(never the corpus). A chunk that cannot answer gives "unknown" however noisy it is (importance ≈ 0); a chunk
whose answer depends on its exact words loses the answer as noise grows (importance high).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np


class Encoder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Importance:
    score: float
    levels: tuple[float, ...]      # the noise levels λ drawn
    answers: tuple[str, ...]       # answer from the clean chunk first, then one per noisy copy


_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8).astype(np.uint32)


def perturb(text: str, level: float, rng: np.random.Generator) -> str:
    """Replace each non-space character with probability `level` by a different random letter.

    Whitespace is kept so the copy keeps its word and line structure; at level 1 every other character changes.
    """
    chars = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).copy()
    if not len(chars):
        return text
    hit = (rng.random(len(chars)) < level) & ~np.isin(chars, [9, 10, 11, 12, 13, 32])
    new = _LETTERS[rng.integers(0, 26, len(chars))]
    new = np.where(new == chars, _LETTERS[(new - 97 + 1) % 26], new)
    chars[hit] = new[hit]
    return chars.tobytes().decode("utf-32-le")


def noise_levels(rng: np.random.Generator, samples: int) -> np.ndarray:
    """λ uniform on (0, 1] (1 − U[0, 1) excludes 0, which would be no perturbation at all)."""
    return 1.0 - rng.random(samples)


def importance(question: str, passages: list[str], answer: Callable[[str, str], str], encoder: Encoder,
               samples: int, rngs: list[np.random.Generator]) -> list[Importance]:
    """Importance of every passage, each perturbed with its own generator; answers are embedded in one batch,
    each distinct answer once."""
    levels = [tuple(noise_levels(rng, samples).round(4).tolist()) for rng in rngs]
    answers = [tuple([answer(question, p)] + [answer(question, perturb(p, lam, rng)) for lam in lams])
               for p, lams, rng in zip(passages, levels, rngs)]
    distinct = sorted({a for group in answers for a in group})
    if not distinct:
        return []
    emb = np.asarray(encoder.encode(distinct), dtype=float)
    emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)   # any encoder, cosine either way
    vectors = dict(zip(distinct, emb))
    out = []
    for lams, group in zip(levels, answers):
        clean = vectors[group[0]]
        sims = [float(np.dot(clean, vectors[a])) for a in group[1:]]
        out.append(Importance(round(1.0 - float(np.mean(sims)), 4) if sims else 0.0, lams, group))
    return out
