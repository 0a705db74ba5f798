"""Benchmark folders in the shared format: docs.jsonl (the corpus) and questions.jsonl (gold evidence).

Where they are is one setting, resolved by benchmarks_root(): a --benchmarks option, else $RAG_BENCHMARKS, else the
small slices shipped in samples/benchmarks/ (bench/make_slices.py derives them), so nothing outside the repository
is read unless named.

A workspace keeps its own question set in the same format, beside its sources; each question may also say who
asks (`asked_as`: a list of groups or a user name from the users file) and what must happen (`expect`: "answer",
the default; "not_found", the gold documents are ones the asker may not read and no byte of them may appear; or
{"absent_version": V}, version V of the gold documents must not appear).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from rag.sources.documents import UnorderableVersion, version_order
from rag.text.analysis import MAX_QUESTION_CHARS

EXPECTATIONS = ("answer", "not_found", "absent_version")
BENCHMARKS_ENV = "RAG_BENCHMARKS"
BUNDLED = Path(__file__).resolve().parents[2] / "samples" / "benchmarks"


class BenchmarksError(ValueError):
    """A benchmarks folder that was named is missing or incomplete; the message is one line."""


def benchmarks_root(named: str | Path | None = None) -> Path:
    """The folder of benchmark folders: `named` (a --benchmarks option), else $RAG_BENCHMARKS, else the bundled slices."""
    origin = "--benchmarks" if named else BENCHMARKS_ENV
    named = named or os.environ.get(BENCHMARKS_ENV)
    if not named:
        return BUNDLED
    root = Path(named).expanduser()
    if not root.is_dir():
        raise BenchmarksError(f"{root}: no such benchmarks folder (named by {origin})")
    return root


def benchmark_dir(name: str, named: str | Path | None = None) -> Path:
    """One benchmark's folder under benchmarks_root(named), or a one-line BenchmarksError."""
    folder = benchmarks_root(named) / name
    if not ((folder / "docs.jsonl").is_file() and (folder / "questions.jsonl").is_file()):
        raise BenchmarksError(f"{folder}: not a benchmark folder (needs docs.jsonl and questions.jsonl)")
    return folder


def add_benchmarks_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmarks", metavar="DIR", help=f"folder of benchmark folders (default: ${BENCHMARKS_ENV}, "
                        "else the slices in samples/benchmarks/)")


def benchmarks_option(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """The parsed --benchmarks folder resolved by benchmarks_root; a missing one ends the program with one line."""
    try:
        return benchmarks_root(args.benchmarks)
    except BenchmarksError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")


class QuestionsError(ValueError):
    """A questions file cannot be used; the message is one line naming the file and line."""


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    answer: str
    gold_doc_ids: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    supporting_sentences: tuple[tuple[str, str], ...] = field(default=())  # (doc_id, sentence)
    asked_as: tuple[str, ...] | str | None = None   # groups, or a user of the users file; None: the default caller
    expect: str = "answer"
    absent_version: str | None = None
    kind: str = "-"      # the benchmark's question type (bridge, comparison, counting, …)
    hops: int = 1        # reasoning hops (MuSiQue's n_hops, else the number of gold documents)
    where: str = ""      # file:line it was read from, for messages about it

    @property
    def stratum(self) -> tuple[str, int]:
        return self.kind, self.hops


def load_questions(path: str | Path, limit: int | None = None) -> list[Question]:
    """Every question of a questions.jsonl file (the first `limit`), or a one-line QuestionsError.

    A refusal names the file, the line and the question's id (when it has a readable one).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "questions.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        reason = "not UTF-8" if isinstance(err, UnicodeDecodeError) else (err.strerror or err.__class__.__name__)
        raise QuestionsError(f"{path}: cannot read questions ({reason})") from None
    out, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            reason = f"not valid JSON ({err.msg})" if isinstance(err, json.JSONDecodeError) else "nested too deeply"
            raise QuestionsError(f"{where}: {reason}") from None
        try:
            q = _parse(record, where)
        except ValueError as err:
            raise QuestionsError(f"{where}: {_label(record)}{err}") from None
        if q.qid in seen:
            raise QuestionsError(f"{where}: question {q.qid}: duplicate qid")
        seen.add(q.qid)
        out.append(q)
        if limit and len(out) >= limit:
            break
    if not out:
        raise QuestionsError(f"{path}: no questions")
    return out


def _label(record) -> str:
    qid = record.get("qid") if isinstance(record, dict) else None
    return f"question {str(qid)[:80]}: " if isinstance(qid, (str, int)) and not isinstance(qid, bool) else ""


def _parse(r, where: str = "") -> Question:
    if not isinstance(r, dict):
        raise ValueError("each line must be a JSON object")
    qid = _field(r, "qid", required=True, whole=True)
    question = _field(r, "question", required=True)
    if not question.strip():
        raise ValueError("question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"question is {len(question):,} characters long; the limit is {MAX_QUESTION_CHARS:,}")
    gold = _strings(r, "gold_doc_ids", whole=True)
    expect, absent = _expectation(r.get("expect", "answer"))
    asked = r.get("asked_as")
    if asked is not None and not (isinstance(asked, str) and asked.strip()) and not (
            isinstance(asked, list) and asked and all(isinstance(g, str) and g.strip() for g in asked)):
        raise ValueError("asked_as must be a user name or a non-empty list of groups")
    if expect != "answer" and not gold:
        raise ValueError(f"expect {expect} needs gold_doc_ids (the documents that must not appear)")
    hops = r.get("n_hops")
    if hops is not None and not (isinstance(hops, int) and not isinstance(hops, bool) and 1 <= hops <= 100):
        raise ValueError(f"n_hops must be a whole number from 1 to 100, not {_show(hops)}")
    return Question(
        qid=qid, question=question, answer=_field(r, "answer", whole=True) or "", gold_doc_ids=gold,
        aliases=_strings(r, "answer_aliases"), supporting_sentences=_supporting(r.get("supporting_facts")),
        asked_as=tuple(asked) if isinstance(asked, list) else asked, expect=expect, absent_version=absent,
        kind=_field(r, "type") or "-", hops=hops or max(len(set(gold)), 1), where=where)


def _field(r: dict, name: str, required: bool = False, whole: bool = False) -> str | None:
    """A string field (a whole number too where ids may be numbers); anything else is refused, never str()-ed."""
    if name not in r or r[name] is None:
        if required:
            raise ValueError(f"missing field '{name}'")
        return None
    value = r[name]
    if isinstance(value, str) or (whole and isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise ValueError(f"{name} must be a string{' or a whole number' if whole else ''}, not {_show(value)}")


def _strings(r: dict, name: str, whole: bool = False) -> tuple[str, ...]:
    """A list of strings; a bare string is refused (it would be read letter by letter)."""
    value = r.get(name)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list of strings, not {_show(value)}")
    out = []
    for item in value:
        if not (isinstance(item, str) or (whole and isinstance(item, int) and not isinstance(item, bool))):
            raise ValueError(f"{name} must be a list of strings; it holds {_show(item)}")
        out.append(str(item))
    return tuple(out)


def _supporting(value) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
        raise ValueError(f"supporting_facts must be a list of objects, not {_show(value)}")
    return tuple((s["doc_id"], s["sentence"].strip()) for s in value
                 if isinstance(s.get("doc_id"), str) and isinstance(s.get("sentence"), str) and s["doc_id"])


def _expectation(value) -> tuple[str, str | None]:
    if isinstance(value, dict) and set(value) == {"absent_version"}:
        label = value["absent_version"]
        if isinstance(label, int) and not isinstance(label, bool):
            label = str(label)
        if not isinstance(label, str):
            raise ValueError(f"expect absent_version must be a version label, not {_show(label)}")
        try:
            version_order(label)
        except UnorderableVersion as err:
            raise ValueError(f"expect absent_version: {err}") from None
        return "absent_version", label
    if value in ("answer", "not_found"):
        return value, None
    raise ValueError(f"expect must be \"answer\", \"not_found\" or {{\"absent_version\": V}}, not {_show(value)}")


def _show(value) -> str:
    """A refused value for a one-line message: its JSON type and a short, escaped excerpt."""
    kind = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, (list, dict)) else ""
    return f"{kind} {text[:40]}".strip() if text and kind != "null" else kind


def evidence_recall(retrieved_doc_ids: set[str], gold: tuple[str, ...]) -> float:
    """Share of gold documents with any text in the context."""
    return sum(g in retrieved_doc_ids for g in set(gold)) / len(set(gold)) if gold else 1.0


def complete(retrieved_doc_ids: set[str], gold: tuple[str, ...]) -> bool:
    """Source completeness: every gold document is in the context."""
    return set(gold) <= retrieved_doc_ids


HALVES = ("tune", "report")


def half_of(benchmark: str, qid: str) -> str:
    """The fixed tuning split of a dev question: sha256 of `benchmark|qid` even → tune, odd → report.

    Salted with its own prefix so it is independent of the dev/held-out split (which hashes `bench|qid`).
    """
    digest = hashlib.sha256(f"tune-report|{benchmark}|{qid}".encode()).digest()
    return HALVES[digest[-1] & 1]


def split_halves(benchmark: str, questions: list[Question]) -> dict[str, list[Question]]:
    """The benchmark's questions as {"tune": [...], "report": [...]}, file order kept in each half."""
    halves: dict[str, list[Question]] = {h: [] for h in HALVES}
    for q in questions:
        halves[half_of(benchmark, q.qid)].append(q)
    return halves


if __name__ == "__main__":  # `python -m rag.sources.benchmarks`: the folder in use, or a one-line error (make ui checks it)
    try:
        print(benchmarks_root())
    except BenchmarksError as err:
        raise SystemExit(f"error: {err}") from None
