"""A benchmark folder or a published workspace end to end: evaluate, write the report. `rag eval` and the assets share it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag.answer.llm import ChatModel
from rag.evaluation.prepared import Prepared, open_prepared, prepare_workspace
from rag.evaluation.questions import load_questions
from rag.evaluation.report import ReportFiles, write_report
from rag.evaluation.run import EvalConfig, Evaluation, evaluate
from rag.evaluation.summary import summarise
from rag.models.tokens import TokenCounter


@dataclass
class Outcome:
    evaluation: Evaluation
    summary: dict
    files: ReportFiles


def evaluate_benchmark(folder: Path, workspace: Path, out: Path, config: EvalConfig, embedder,
                       counter: TokenCounter, model: ChatModel | None, command: str,
                       lance_uri: str | None = None) -> Outcome:
    """Bring the workspace up to date with the folder, run every question × method × budget, write the report."""
    prepared = prepare_workspace(folder, workspace, embedder, counter, lance_uri)
    return evaluate_prepared(prepared, Path(folder) / "questions.jsonl", out, config, embedder, counter, model, command)


def evaluate_workspace(name: str, workspace: Path, questions: Path, out: Path, config: EvalConfig, embedder,
                       counter: TokenCounter, model: ChatModel | None, command: str, lance_uri: str | None = None,
                       users: dict | None = None, default_caller=None) -> Outcome:
    """Evaluate a published workspace as it is (the real catalog and index; nothing ingested) on its question set."""
    prepared = open_prepared(name, workspace, embedder, counter, lance_uri)
    return evaluate_prepared(prepared, questions, out, config, embedder, counter, model, command, users, default_caller)


def evaluate_prepared(prepared: Prepared, questions: Path, out: Path, config: EvalConfig, embedder,
                      counter: TokenCounter, model: ChatModel | None, command: str, users: dict | None = None,
                      default_caller=None) -> Outcome:
    """Run the question set over the prepared workspace, summarise, write the report; the workspace is closed after."""
    try:
        evaluation = evaluate(prepared, load_questions(questions, config.limit), config, embedder, counter, model,
                              users, default_caller)
        summary = summarise(evaluation, prepared, command)
    finally:
        prepared.close()
    return Outcome(evaluation, summary, write_report(out, evaluation, summary))
