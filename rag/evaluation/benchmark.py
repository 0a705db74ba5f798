"""A benchmark folder or a published workspace end to end: evaluate, write the report. `rag eval` and the assets share it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag.evaluation.prepared import Prepared, open_prepared, prepare_workspace
from rag.evaluation.questions import load_questions
from rag.evaluation.report import ReportFiles, write_report
from rag.evaluation.run import Evaluation, Evaluator, evaluate
from rag.evaluation.summary import summarise


@dataclass
class Outcome:
    evaluation: Evaluation
    summary: dict
    files: ReportFiles


def evaluate_benchmark(ev: Evaluator, folder: Path, workspace: Path, out: Path, lance_uri: str | None = None
                       ) -> Outcome:
    """Bring the workspace up to date with the folder, run every question × method × budget, write the report."""
    prepared = prepare_workspace(folder, workspace, ev.embedder, ev.counter, lance_uri)
    return evaluate_prepared(ev, prepared, Path(folder) / "questions.jsonl", out)


def evaluate_workspace(ev: Evaluator, name: str, workspace: Path, questions: Path, out: Path,
                       lance_uri: str | None = None) -> Outcome:
    """Evaluate a published workspace as it is (the real catalog and index; nothing ingested) on its question set."""
    return evaluate_prepared(ev, open_prepared(name, workspace, ev.embedder, ev.counter, lance_uri), questions, out)


def evaluate_prepared(ev: Evaluator, prepared: Prepared, questions: Path, out: Path) -> Outcome:
    """Run the question set over the prepared workspace, summarise, write the report; the workspace is closed after."""
    try:
        evaluation = evaluate(prepared, load_questions(questions, ev.config.limit), ev)
        summary = summarise(evaluation, prepared, ev.command)
    finally:
        prepared.close()
    return Outcome(evaluation, summary, write_report(out, evaluation, summary))
