"""Percentile bootstrap confidence intervals over questions (per benchmark, never pooled)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean over n questions and its bootstrap confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    def to_json(self) -> dict:
        return {"mean": round(self.mean, 4), "low": round(self.low, 4), "high": round(self.high, 4), "n": self.n}

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_ci(values, resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0) -> Interval | None:
    """Mean of `values` with a percentile bootstrap interval; None when there are no values."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    if data.size == 0:
        return None
    # A fixed seed makes the nightly report reproducible: the same rows always give the same interval.
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(data.mean()), float(low), float(high), int(data.size))


def paired_difference_ci(a, b, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                         seed: int = 0) -> Interval | None:
    """Mean of a − b over the same questions, resampling questions jointly (pairs with a None are dropped)."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return bootstrap_ci([float(x) - float(y) for x, y in pairs], resamples, confidence, seed)
