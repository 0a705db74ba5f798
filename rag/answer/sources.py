"""Numbered sources: the context as the reader's prompt lists it, `[1]`-style citations mapped back to documents,
and the JSON schema that constrains a long answer to statements with source numbers.

Small models copy a number far more reliably than an id. Source k is the context's k-th item; `[k]` becomes that
item's citation (`doc_id`, or `doc_id p.7` when the item has a place). A number outside 1…n is left out, so a
statement citing only such numbers is left without a citation (and attributed, rag.answer.citations).
"""
from __future__ import annotations

import json
import re

from rag.retrieval.context import ContextItem

MAX_STATEMENTS = 3
MAX_SOURCES_PER_STATEMENT = 3

_BRACKETS = re.compile(r"\[([^\[\]\n]+)\]")
_NUMBER = re.compile(r"^\s*(?:source\s*)?(\d+)\s*$", re.IGNORECASE)
_RENDERED_HEADER = re.compile(r"\A## [^\n]*\n\[[^\]\n]*\]\n")
# A truncated or slightly malformed JSON answer still yields its complete {statement, sources} pairs.
_PAIR = re.compile(r'"statement"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"sources"\s*:\s*\[([\d\s,]*)\]')


def source_line(n: int, item: ContextItem) -> str:
    """`[n] title · doc_id · version v (· p.7)`: how the prompt introduces source n."""
    parts = (item.title, item.doc_id, f"version {item.doc_version}", item.location)
    return f"[{n}] " + " · ".join(p for p in parts if p)


def numbered_context(items: list[ContextItem]) -> str:
    """The context as numbered sources: each item's source line, then its text without the rendered header."""
    return "\n\n".join(f"{source_line(n, item)}\n{_RENDERED_HEADER.sub('', item.text).strip()}"
                       for n, item in enumerate(items, 1))


def _mapped(bracket: str, items: list[ContextItem]) -> str | None:
    """A bracket of source numbers as item citations ("" when no number is a source); None when it is not numbers."""
    parts = [_NUMBER.match(p) for p in re.split(r"[,;]", bracket)]
    if not all(parts):
        return None
    numbers = [int(m.group(1)) for m in parts]
    labels = dict.fromkeys(items[n - 1].citation for n in numbers if 1 <= n <= len(items))
    return "; ".join(labels)


def resolve_numbers(text: str, items: list[ContextItem]) -> str:
    """`text` with every bracket of source numbers replaced by the items' citations; other brackets kept."""
    def swap(match: re.Match) -> str:
        mapped = _mapped(match.group(1), items)
        if mapped is None:
            return match.group(0)
        return f"[{mapped}]" if mapped else ""

    return _BRACKETS.sub(swap, text)


def answer_schema(sources: int) -> dict:
    """JSON schema of a long answer: 1–3 statements, each with 1–3 source numbers from 1…`sources`."""
    number = {"type": "integer", "enum": list(range(1, sources + 1))}
    statement = {"type": "object", "properties": {
        "statement": {"type": "string"},
        "sources": {"type": "array", "items": number, "minItems": 1, "maxItems": MAX_SOURCES_PER_STATEMENT}},
        "required": ["statement", "sources"]}
    return {"type": "object", "properties": {
        "statements": {"type": "array", "items": statement, "minItems": 1, "maxItems": MAX_STATEMENTS}},
        "required": ["statements"]}


def statements_of(reply: str) -> list[tuple[str, list[int]]]:
    """The (statement, source numbers) pairs of a constrained reply, complete pairs only."""
    out = []
    for text, numbers in _PAIR.findall(reply):
        try:
            statement = json.loads(f'"{text}"')
        except json.JSONDecodeError:
            continue
        if statement.strip():
            out.append((statement.strip(), [int(n) for n in re.findall(r"\d+", numbers)]))
    return out


def render_statements(pairs: list[tuple[str, list[int]]], items: list[ContextItem]) -> str:
    """Statements as text, each with its sources as a numbered citation resolved to documents."""
    texts = []
    for statement, numbers in pairs:
        body = statement.rstrip(" .")
        cited = f" [{', '.join(map(str, numbers))}]" if numbers else ""
        texts.append(f"{body}{cited}.")
    return resolve_numbers(" ".join(texts), items)
