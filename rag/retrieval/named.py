"""The documents a question names by their exact title, placed first in the question's own list.

A comparison question names both of its documents ("Edward Albee or J. M. Barrie?") and a colleague's question
often names the page it is about, yet one embedding of the whole question can rank neither first.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rag.retrieval.members import RankedRows
from rag.retrieval.row_mask import RowMask
from rag.text.analysis import is_stop, word_bounds, words

MAX_TITLE_CHARS = 120  # longer slices of a question are not looked up: titles are shorter


def named_titles(question: str, is_title: Callable[[str], bool]) -> list[str]:
    """Titles written verbatim between word bounds of the question, in its order; of two that overlap the longer
    (the earlier on a tie). A title of stop words alone ("The", "Who") names nothing. `is_title` knows the caller's
    readable titles only: the choice between two overlapping titles must not reveal one the caller may not read."""
    bounds = sorted(word_bounds(question))
    spans = []
    for i, start in enumerate(bounds):
        for end in bounds[i + 1:]:
            if end - start > MAX_TITLE_CHARS:
                break
            spans.append((start, end, question[start:end]))
    among = getattr(is_title, "among", None)  # a table of titles answers for every slice at once
    titled = among([t for _, _, t in spans]) if among is not None else None
    found = [(start, end, title) for start, end, title in spans
             if (title in titled if titled is not None else is_title(title))
             and not all(is_stop(w) for w in words(title))]
    taken: list[tuple[int, int, str]] = []
    for start, end, title in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if all(end <= s or start >= e for s, e, _ in taken):
            taken.append((start, end, title))
    return [title for _, _, title in sorted(taken)]


def named_first(ranked: RankedRows, named: list[list[str]], readable: RowMask,
                score: Callable[[np.ndarray], np.ndarray]) -> RankedRows:
    """The ranked rows with one document per named title moved to the front, in the question's order.

    `named` holds each title's documents; only those with a row in `readable` count. Of several, the one the list
    ranks highest is meant; if the list holds none of them the title is ambiguous and moves nothing. A title's only
    document that the list does not hold joins with its readable rows, scored by `score` (its own match, no boost)."""
    table, listed = ranked.table, ranked.table.doc_codes[ranked.rows]
    front_rows, front_scores, moved = [], [], set()
    for ids in named:
        codes = [c for d in ids if (c := table.doc_code_of.get(d)) is not None and c not in moved]
        at = np.flatnonzero(np.isin(listed, codes))  # the list holds readable rows only
        if len(at):
            code = int(listed[at[0]])
            mine = np.flatnonzero(listed == code)
            rows, scores = ranked.rows[mine], ranked.scores[mine]
        else:  # one pass over the table, and only for a title the list does not hold
            rows = np.flatnonzero(np.isin(table.doc_codes, codes))
            rows = rows[readable[rows]]
            if len(rows) == 0 or (table.doc_codes[rows] != table.doc_codes[rows[0]]).any():
                continue
            code, scores = int(table.doc_codes[rows[0]]), score(rows)
        moved.add(code)
        front_rows.append(rows)
        front_scores.append(scores)
    if not front_rows:
        return ranked
    rest = ~np.isin(listed, list(moved))
    return RankedRows(table, np.concatenate([*front_rows, ranked.rows[rest]]),
                      np.concatenate([*front_scores, ranked.scores[rest]]))
