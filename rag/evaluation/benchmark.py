"""One benchmark end to end: ingest its folder, evaluate, write the report. `rag eval` and the asset share it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag.benchmarks import load_questions
from rag.evaluation.report import ReportFiles, write_report
from rag.evaluation.run import EvalConfig, Evaluation, evaluate
from rag.evaluation.summary import summarise
from rag.evaluation.workspace import prepare_workspace
from rag.llm import ChatModel
from rag.tokens import TokenCounter


@dataclass
class Outcome:
    evaluation: Evaluation
    summary: dict
    files: ReportFiles


def evaluate_benchmark(folder: Path, workspace: Path, out: Path, config: EvalConfig, embedder,
                       counter: TokenCounter, model: ChatModel | None, command: str,
                       lance_uri: str | None = None) -> Outcome:
    """Bring the workspace up to date with the folder, run every question × method × budget, write the report."""
    prepared = prepare_workspace(folder, workspace, embedder.encode, counter, lance_uri, embedder.name)
    try:
        evaluation = evaluate(prepared, load_questions(folder, config.limit), config, embedder, counter, model)
        summary = summarise(evaluation, prepared, command)
    finally:
        prepared.close()
    return Outcome(evaluation, summary, write_report(out, evaluation, summary))
