"""Checks for `expect`: a not_found question must show no byte of its gold documents, an absent_version
question none of the forbidden version. Lines are compared, so a leak through any method's rendering is caught."""
from __future__ import annotations

from rag.evaluation.questions import EvalQuestion
from rag.retrieval.context import RetrievalResult
from rag.retrieval.read_state import Snapshot

MIN_LINE_CHARS = 24  # shorter lines (headings, list stubs) are shared between documents too often to prove a leak


def forbidden_texts(snap: Snapshot, q: EvalQuestion) -> dict[tuple[str, str], str]:
    """(doc_id, version) → text that must not appear in any context for the question."""
    if q.expect == "answer":
        return {}
    if q.expect == "absent_version":
        keys = [(d, q.absent_version) for d in q.gold_doc_ids]
    else:
        current = snap.catalog.current_versions_of(list(q.gold_doc_ids))
        keys = [(d, current[d]) for d in q.gold_doc_ids if d in current]
    texts = snap.texts(keys)
    return {k: texts[k][1] for k in keys if k in texts}


def expectation_met(q: EvalQuestion, result: RetrievalResult, forbidden: dict[tuple[str, str], str],
                    shown_texts: dict[tuple[str, str], str]) -> bool | None:
    """None for plain questions; else whether no forbidden document (or its text) reached the context.

    `shown_texts` holds the full texts of the documents the context shows: a forbidden line that also occurs in
    one of them (a shared sentence) is not a leak; the document itself being shown always is.
    """
    if q.expect == "answer":
        return None
    shown = {(i.doc_id, i.doc_version) for i in result.items}
    if q.expect == "not_found" and any(i.doc_id in q.gold_doc_ids for i in result.items):
        return False
    if q.expect == "absent_version" and shown & set(forbidden):
        return False
    context = _squash(result.context())
    allowed = _squash("\n".join(shown_texts.values()))
    for text in forbidden.values():
        for line in text.splitlines():
            line = _squash(line)
            if len(line) >= MIN_LINE_CHARS and line in context and line not in allowed:
                return False
    return True


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()
