"""Benchmark folders in the shared format: docs.jsonl (the corpus) and questions.jsonl (gold evidence)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    answer: str
    gold_doc_ids: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    supporting_sentences: tuple[tuple[str, str], ...] = field(default=())  # (doc_id, sentence)


def load_questions(folder: str | Path, limit: int | None = None) -> list[Question]:
    path = Path(folder) / "questions.jsonl"
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            out.append(Question(
                qid=str(r["qid"]), question=r["question"], answer=str(r.get("answer", "")),
                gold_doc_ids=tuple(r.get("gold_doc_ids", ())), aliases=tuple(r.get("answer_aliases", ()) or ()),
                supporting_sentences=tuple((s["doc_id"], s["sentence"].strip()) for s in r.get("supporting_facts", ())
                                           if s.get("doc_id") and s.get("sentence"))))
            if limit and len(out) >= limit:
                break
    return out


def evidence_recall(retrieved_doc_ids: set[str], gold: tuple[str, ...]) -> float:
    """Share of gold documents with any text in the context."""
    return sum(g in retrieved_doc_ids for g in set(gold)) / len(set(gold)) if gold else 1.0


def complete(retrieved_doc_ids: set[str], gold: tuple[str, ...]) -> bool:
    """Source completeness: every gold document is in the context."""
    return set(gold) <= retrieved_doc_ids
