"""Hop coverage: order a hop's ranked members so that together they cover its query's terms.

A member's lexical share rewards the query terms it matches. Once a member placed ahead of it matches a term,
that term's share no longer counts for the members after it, so a document that matches only what is already
covered gives way to one that adds a term the context lacks (the other hop of a multi-hop question). The
shares are the BM25 channel's own, at its own weight: no weight is added.
"""
from __future__ import annotations

import numpy as np


def covering_order(scores: np.ndarray, shares: np.ndarray) -> list[int]:
    """Greedy order of the rows: each next is the best `scores` row once the `shares` (rows × terms) of the terms
    matched by the rows already taken are taken off; ties keep the rows' order."""
    n = len(scores)
    covered = np.zeros(shares.shape[1], dtype=bool)
    left = np.arange(n)
    order: list[int] = []
    while len(left):
        adjusted = scores[left] - shares[left][:, covered].sum(axis=1)
        ranked = left[np.argsort(-adjusted, kind="stable")]
        for k, row in enumerate(ranked):  # the order holds until a row adds a term
            order.append(int(row))
            new = (shares[row] > 0) & ~covered
            if new.any():
                covered |= new
                left = np.sort(ranked[k + 1:])
                break
        else:
            left = left[:0]
    return order
