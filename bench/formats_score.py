"""Fidelity scores of an extraction against a Markdown reference, each the share of the reference's items found.

- words: case-folded word tokens (runs of letters and digits, after removing Markdown markup: heading hashes,
  bullets, table pipes and rule rows, `*` emphasis, so `**hel**lo` is one word) as a multiset; a reference word
  counts as found as many times as it occurs in both. A numbered item's number is a word: every format shows it,
  and a line of running text may start with "1805." too.
- pairs: reading order; every two consecutive reference words (across block boundaries too) as a multiset,
  found as two consecutive words of the extraction.
- cells: the non-empty cells of the reference's pipe tables (header row included), white space collapsed and
  case-folded, as a multiset, found as a cell of a pipe table of the extraction: a cell that only survives as
  running text does not count (the sub-chunker and a reader rely on the table shape). `cells_in_text`, kept in
  the results beside it, counts a cell whose words occur consecutively anywhere in the extraction.
- headings: the reference's heading texts (multiset) found as the text of a `#` heading line of the extraction,
  at any level (a PDF carries no levels, only sizes); `headings_level` also requires the same level.
- extra: the share of the extraction's words that match no reference word (running headers, page numbers, noise).
A score is None where the reference has no such item.
"""
from __future__ import annotations

import re
from collections import Counter

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+")
_RULE_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_WORD = re.compile(r"[^\W_]+")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_SPACE = re.compile(r"\s+")


def _table_row(line: str) -> list[str] | None:
    """The cells of a pipe-table row, or None if the line is not one."""
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|") and len(s) > 1) or _RULE_ROW.match(s):
        return None
    return [c.replace("\\|", "|").strip() for c in _CELL_SPLIT.split(s[1:-1])]


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text.replace("**", "").replace("__", "")).strip().casefold()


def words(markdown: str) -> list[str]:
    """The case-folded word tokens of the text, in reading order, without Markdown markup."""
    out: list[str] = []
    for line in markdown.splitlines():
        m = _HEADING.match(line)
        line = m.group(2) if m else _BULLET.sub("", line, count=1)
        out += _WORD.findall(line.replace("*", "").casefold())
    return out


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, normalised text) of every `#` heading line."""
    return [(len(m.group(1)), _norm(m.group(2))) for m in map(_HEADING.match, markdown.splitlines()) if m]


def table_cells(markdown: str) -> list[str]:
    """The normalised non-empty cells of every pipe table (rule rows skipped)."""
    return [_norm(c) for line in markdown.splitlines() for c in (_table_row(line) or []) if c.strip()]


def _found(reference: Counter, extracted: Counter) -> float | None:
    total = sum(reference.values())
    return sum((reference & extracted).values()) / total if total else None


def _pairs(tokens: list[str]) -> Counter:
    return Counter(zip(tokens, tokens[1:]))


def _in_text(cell: str, text_tokens: str) -> bool:
    cell_tokens = " ".join(_WORD.findall(cell))
    return bool(cell_tokens) and f" {cell_tokens} " in text_tokens


def score(reference: str, extracted: str) -> dict[str, float | None]:
    """Every fidelity score of `extracted` against `reference` (both Markdown)."""
    ref_words, ext_words = words(reference), words(extracted)
    ref_heads, ext_heads = headings(reference), headings(extracted)
    ref_cells = table_cells(reference)
    flat = f" {' '.join(ext_words)} "
    in_text = [c for c in ref_cells if _in_text(c, flat)]
    return {
        "words": _found(Counter(ref_words), Counter(ext_words)),
        "pairs": _found(_pairs(ref_words), _pairs(ext_words)),
        "cells": _found(Counter(ref_cells), Counter(table_cells(extracted))),
        "cells_in_text": len(in_text) / len(ref_cells) if ref_cells else None,
        "headings": _found(Counter(t for _, t in ref_heads), Counter(t for _, t in ext_heads)),
        "headings_level": _found(Counter(ref_heads), Counter(ext_heads)),
        "extra": (1 - sum((Counter(ext_words) & Counter(ref_words)).values()) / len(ext_words)) if ext_words else None,
    }
