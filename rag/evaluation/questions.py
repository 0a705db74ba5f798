"""Who asks an evaluation question: its groups, its user through the users file, or the run's default caller.

The question model and its loader live with the benchmark format (rag/sources/benchmarks.py); this adds the callers.
"""
from __future__ import annotations

from rag.retrieval.callers import Caller, UnknownUser, resolve_caller
from rag.sources.benchmarks import EXPECTATIONS, Question, QuestionsError, load_questions

EvalQuestion = Question  # the evaluation's name for it

__all__ = ["EXPECTATIONS", "EvalQuestion", "Question", "QuestionsError", "asker_label", "caller_for", "load_questions"]


def caller_for(q: EvalQuestion, default: Caller | None, users: dict[str, Caller]) -> Caller:
    """Who asks the question: its groups, its user (through the users file), or the default caller."""
    if q.asked_as is None:
        if default is None:
            raise QuestionsError(f"{_at(q)}question {q.qid}: no asked_as, and this evaluation has no default caller")
        return default
    if isinstance(q.asked_as, tuple):
        return resolve_caller(groups=q.asked_as)
    try:
        return resolve_caller(user=q.asked_as, users=users)
    except UnknownUser:
        raise QuestionsError(f"{_at(q)}question {q.qid}: asked_as user {q.asked_as!r} is not in the users file"
                             ) from None


def _at(q: EvalQuestion) -> str:
    return f"{q.where}: " if q.where else ""


def asker_label(q: EvalQuestion) -> str:
    if q.asked_as is None:
        return "default"
    return q.asked_as if isinstance(q.asked_as, str) else ",".join(q.asked_as)
