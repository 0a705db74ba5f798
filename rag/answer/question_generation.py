"""Question generation for a corpus without questions: an LLM writes questions from units, an LLM judge filters them.

Single-document questions come from one member of a unit; multi-document ones from two members of one unit (the
grouping put linked documents together) that one caller may read both of. A question is kept only if the judge
finds it answerable from its gold documents together, and, for a multi-document question, from neither alone:
RAGAS and LlamaIndex's question–context pair generator keep every question their writer produced.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from tqdm import tqdm

from rag.answer.llm import ChatModel, parse_json
from rag.retrieval.read_state import Snapshot
from rag.store.rows import MemberRow

WRITE_SINGLE = ("Write one factual question that the document answers, and its short answer copied from the "
                "document. Reply with JSON only: {\"question\": \"...\", \"answer\": \"...\"}.")
WRITE_MULTI = ("Write one factual question that can only be answered by combining facts from BOTH documents, and "
               "its short answer. Reply with JSON only: {\"question\": \"...\", \"answer\": \"...\"}.")
JUDGE = ("Decide whether the documents alone contain everything needed to answer the question. "
         "Reply with JSON only: {\"answerable\": true} or {\"answerable\": false}.")
MAX_DOC_CHARS = 3000   # of each document shown to the writer and the judge (a small local model's context is short)


@dataclass(frozen=True)
class GenerationConfig:
    single: int = 10   # single-document questions to attempt
    multi: int = 10    # multi-document questions to attempt
    seed: int = 0


@dataclass
class Generated:
    """Kept questions (benchmark format plus asked_as), rejected attempts with their reason, and the LLM's cost."""

    questions: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def generate_questions(snap: Snapshot, model: ChatModel, config: GenerationConfig = GenerationConfig()) -> Generated:
    """Attempt `single` + `multi` questions from the snapshot's current units; keep those the judge accepts."""
    rng = random.Random(config.seed)
    units: dict[str, list[MemberRow]] = {}
    for m in snap.catalog.current_members():
        if m.part == 0:  # parts of an oversized document are ranges, not documents of their own
            units.setdefault(m.unit_key, []).append(m)
    singles = [[m] for members in units.values() for m in members]
    pairs = [[a, b] for members in units.values() for i, a in enumerate(members) for b in members[i + 1:]
             if set(a.acl) & set(b.acl)]  # one caller must be able to read both
    rng.shuffle(singles)
    rng.shuffle(pairs)
    out = Generated()
    seen: set[str] = set()
    attempts = singles[: config.single] + pairs[: config.multi]
    for gold in tqdm(attempts, desc="generating questions", unit="question", disable=None):
        texts = snap.texts([(m.doc_id, m.doc_version) for m in gold])
        docs = [(m, *texts[(m.doc_id, m.doc_version)]) for m in gold]
        record, reason = _attempt(model, docs, out, seen)
        if record is None:
            out.rejected.append({"gold_doc_ids": [m.doc_id for m in gold], "reason": reason})
            continue
        seen.add(_key(record["question"]))
        out.questions.append(record)
    return out


def _attempt(model: ChatModel, docs: list[tuple[MemberRow, str, str]], out: Generated,
             seen: set[str]) -> tuple[dict | None, str]:
    """One written question and its judgements: (record, "") when kept, (None, reason) when not."""
    reply = _ask(model, WRITE_SINGLE if len(docs) == 1 else WRITE_MULTI, _documents(docs), out, max_tokens=120)
    question, answer = reply.get("question"), reply.get("answer")
    if not (isinstance(question, str) and question.strip() and isinstance(answer, str) and answer.strip()):
        return None, "the writer gave no question and answer"
    if _key(question) in seen:  # before judging: a duplicate costs no judge calls
        return None, "duplicate question"
    if not _answerable(model, docs, question, out):
        return None, "not answerable from its gold documents"
    if len(docs) > 1 and any(_answerable(model, [d], question, out) for d in docs):
        return None, "answerable from one gold document alone"
    gold = [m.doc_id for m, _, _ in docs]
    readers = sorted(set.intersection(*(set(m.acl) for m, _, _ in docs)))
    return {"qid": "gen-" + hashlib.sha256((question + "|" + ",".join(gold)).encode()).hexdigest()[:12],
            "question": question.strip(), "answer": answer.strip(), "gold_doc_ids": gold,
            "type": "single" if len(docs) == 1 else "multi", "n_hops": len(docs), "asked_as": readers,
            "generated_by": model.name}, ""


def _answerable(model: ChatModel, docs: list[tuple[MemberRow, str, str]], question: str, out: Generated) -> bool:
    verdict = _ask(model, JUDGE, f"{_documents(docs)}\n\nQuestion: {question}", out, max_tokens=16)
    return verdict.get("answerable") is True


def _ask(model: ChatModel, system: str, user: str, out: Generated, max_tokens: int) -> dict:
    completion = model.complete([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                max_tokens=max_tokens, json_object=True)
    out.calls += 1
    out.input_tokens += completion.input_tokens
    out.output_tokens += completion.output_tokens
    return parse_json(completion.text)


def _documents(docs: list[tuple[MemberRow, str, str]]) -> str:
    return "\n\n".join(f"## {title}\n[{m.doc_id}]\n{text[m.start:m.end][:MAX_DOC_CHARS]}" for m, title, text in docs)


def _key(question: str) -> str:
    return " ".join(question.lower().split())


def write_jsonl(path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
