"""Side-by-side evaluation of retrieval methods under matched token budgets (plain Python, no Dagster).

`evaluate_benchmark` ingests a benchmark folder (`prepare_workspace`) and evaluates it; `evaluate_workspace`
evaluates a published workspace as it is, on its own question set; `evaluate` runs questions × methods ×
budgets, `summarise` adds bootstrap intervals, `write_report` writes the files.
The top layer: may import every other.
"""
from rag.evaluation.benchmark import Outcome, evaluate_benchmark, evaluate_workspace
from rag.evaluation.prepared import Prepared, ingest_benchmark, open_prepared, prepare_workspace
from rag.evaluation.questions import EvalQuestion, QuestionsError, load_questions
from rag.evaluation.report import ReportFiles, write_report
from rag.evaluation.run import (
    METHODS,
    BudgetExceeded,
    EvalConfig,
    Evaluation,
    Evaluator,
    MethodUnavailable,
    Row,
    evaluate,
)
from rag.evaluation.summary import summarise

__all__ = ["METHODS", "BudgetExceeded", "EvalConfig", "EvalQuestion", "Evaluation", "Evaluator", "MethodUnavailable",
           "Outcome", "Prepared", "QuestionsError", "ReportFiles", "Row", "evaluate", "evaluate_benchmark",
           "evaluate_workspace", "ingest_benchmark", "load_questions", "open_prepared", "prepare_workspace", "summarise",
           "write_report"]
