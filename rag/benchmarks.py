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

EXPECTATIONS = ("answer", "not_found", "absent_version")
BENCHMARKS_ENV = "RAG_BENCHMARKS"
BUNDLED = Path(__file__).resolve().parent.parent / "samples" / "benchmarks"


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

    @property
    def stratum(self) -> tuple[str, int]:
        return self.kind, self.hops


def load_questions(path: str | Path, limit: int | None = None) -> list[Question]:
    """Every question of a questions.jsonl file (the first `limit`), or a one-line QuestionsError."""
    path = Path(path)
    if path.is_dir():
        path = path / "questions.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise QuestionsError(f"{path}: cannot read questions ({err.strerror or err.__class__.__name__})") from None
    out, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            q = _parse(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise QuestionsError(f"{path}:{number}: {_reason(err)}") from None
        if q.qid in seen:
            raise QuestionsError(f"{path}:{number}: duplicate qid {q.qid!r}")
        seen.add(q.qid)
        out.append(q)
        if limit and len(out) >= limit:
            break
    if not out:
        raise QuestionsError(f"{path}: no questions")
    return out


def _reason(err: Exception) -> str:
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON ({err.msg})"
    if isinstance(err, KeyError):
        return f"missing field {err.args[0]!r}"
    return str(err)


def _parse(r: dict) -> Question:
    if not isinstance(r, dict):
        raise TypeError("each line must be a JSON object")
    gold = tuple(str(g) for g in r.get("gold_doc_ids", ()))
    expect, absent = _expectation(r.get("expect", "answer"))
    asked = r.get("asked_as")
    if asked is not None and not (isinstance(asked, str) and asked.strip()) and not (
            isinstance(asked, list) and asked and all(isinstance(g, str) and g.strip() for g in asked)):
        raise ValueError("asked_as must be a user name or a non-empty list of groups")
    if expect != "answer" and not gold:
        raise ValueError(f"expect {expect} needs gold_doc_ids (the documents that must not appear)")
    return Question(
        qid=str(r["qid"]), question=str(r["question"]), answer=str(r.get("answer", "")), gold_doc_ids=gold,
        aliases=tuple(r.get("answer_aliases", ()) or ()),
        supporting_sentences=tuple((s["doc_id"], s["sentence"].strip()) for s in r.get("supporting_facts", ())
                                   if s.get("doc_id") and s.get("sentence")),
        asked_as=tuple(asked) if isinstance(asked, list) else asked, expect=expect, absent_version=absent,
        kind=str(r.get("type") or "-"), hops=int(r.get("n_hops") or max(len(set(gold)), 1)))


def _expectation(value) -> tuple[str, str | None]:
    if isinstance(value, dict) and set(value) == {"absent_version"}:
        return "absent_version", str(value["absent_version"])
    if value in ("answer", "not_found"):
        return value, None
    raise ValueError(f"expect must be \"answer\", \"not_found\" or {{\"absent_version\": V}}, not {value!r}")


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


if __name__ == "__main__":  # `python -m rag.benchmarks`: the folder in use, or a one-line error (make ui checks it)
    try:
        print(benchmarks_root())
    except BenchmarksError as err:
        raise SystemExit(f"error: {err}") from None
