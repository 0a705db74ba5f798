"""Side-by-side evaluation of retrieval methods under matched token budgets (plain Python, no Dagster).

`evaluate_benchmark` does it all for one benchmark folder: `prepare_workspace` ingests it, `evaluate` runs
questions × methods × budgets, `summarise` adds bootstrap intervals, `write_report` writes the files.
"""
from rag.evaluation.benchmark import Outcome, evaluate_benchmark
from rag.evaluation.report import ReportFiles, write_report
from rag.evaluation.run import METHODS, BudgetExceeded, EvalConfig, Evaluation, MethodUnavailable, Row, evaluate
from rag.evaluation.summary import summarise
from rag.evaluation.workspace import Prepared, prepare_workspace

__all__ = ["METHODS", "BudgetExceeded", "EvalConfig", "Evaluation", "MethodUnavailable", "Outcome", "Prepared",
           "ReportFiles", "Row", "evaluate", "evaluate_benchmark", "prepare_workspace", "summarise", "write_report"]
