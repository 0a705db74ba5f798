"""Figures per method × budget with bootstrap intervals, paired differences, and per-method costs."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from itertools import combinations

import numpy as np

from rag.evaluation.bootstrap import bootstrap_ci, paired_difference_ci
from rag.evaluation.run import Evaluation, Row
from rag.evaluation.workspace import Prepared

# Row field → name in the summary; every one gets a bootstrap interval over questions.
METRICS = {"evidence_recall": "evidence_recall", "sentence_recall": "sentence_recall", "complete": "completeness",
           "exact_match": "exact_match", "f1": "f1", "citations_valid": "citations_valid",
           "citation_locatable": "citation_locatable", "retrieve_s": "retrieve_s", "generate_s": "generate_s"}
COMPARED = ("evidence_recall", "complete", "f1")  # the paired method-vs-method differences a decision rests on


def summarise(evaluation: Evaluation, prepared: Prepared, command: str) -> dict:
    """summary.json: what ran, on what corpus, and every figure with its 95% interval."""
    methods = {m: method_costs(m, evaluation, prepared) for m in evaluation.config.methods}
    cells = _cells(evaluation.rows)
    return {
        "benchmark": evaluation.benchmark,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "reader": evaluation.reader,
        "elite_policy": evaluation.elite_policy,
        "config": {"methods": list(evaluation.config.methods), "budgets": list(evaluation.config.budgets),
                   "limit": evaluation.config.limit, "answer_sample": evaluation.config.answer_sample},
        "questions": evaluation.questions,
        "answered": evaluation.answered,
        "corpus": {"documents": prepared.documents, "units": prepared.units, "subchunks": prepared.subchunks,
                   "raw_text_bytes": prepared.raw_text_bytes},
        "workspace_checks": prepared.checks,
        "ingest_seconds": round(prepared.ingest_seconds, 3),
        "evaluation_seconds": round(evaluation.seconds, 3),
        "methods": methods,
        "results": [cell_figures(method, budget, rows, methods[method]["prepare_seconds"], evaluation.questions)
                    for (method, budget), rows in cells.items()],
        "differences": differences(evaluation),
    }


def method_costs(method: str, evaluation: Evaluation, prepared: Prepared) -> dict:
    """Preparation (index build for the index-based methods; opening the catalog for ELITE) and storage."""
    warm = evaluation.warmup_seconds
    if method == "elite":
        prepare = prepared.catalog_open_seconds
    else:
        prepare = prepared.index_build_seconds + (warm.get("longrag_lexical_index", 0.0) if method == "longrag" else 0)
    stored = prepared.storage_bytes(method)
    costs = {"prepare_seconds": round(prepare, 3), "storage_bytes": stored,
             "storage_ratio_to_raw_text": round(stored / max(prepared.raw_text_bytes, 1), 3)}
    if method == "elite" and "elite_sentence_store" in warm:
        costs["sentence_store_build_seconds"] = round(warm["elite_sentence_store"], 3)
    return costs


def cell_figures(method: str, budget: int, rows: list[Row], prepare_seconds: float, n_questions: int) -> dict:
    """One method at one budget: tokens used, every metric with its interval, and AvgQueryTime."""
    tokens = [r.tokens for r in rows]
    figures = {"method": method, "budget": budget, "n": len(rows),
               "tokens_mean": round(float(np.mean(tokens)), 1), "tokens_max": int(max(tokens))}
    for field, name in METRICS.items():
        interval = bootstrap_ci([_number(getattr(r, field)) for r in rows])
        figures[name] = interval.to_json() if interval else None
    answering = [r for r in rows if r.answered] or rows  # with a reader sample, a query's LLM cost includes reading
    for field in ("llm_calls", "input_tokens", "output_tokens"):
        figures[f"{field}_mean"] = round(float(np.mean([getattr(r, field) for r in answering])), 2)
    retrieve = figures["retrieve_s"]["mean"]
    generate = figures["generate_s"]["mean"] if figures["generate_s"] else 0.0
    # AvgQueryTime = (T_prepare + N·(T_retrieve + T_gen)) / N, with N the questions evaluated.
    figures["avg_query_seconds"] = round((prepare_seconds + n_questions * (retrieve + generate)) / n_questions, 4)
    return figures


def differences(evaluation: Evaluation) -> list[dict]:
    """For every budget and pair of methods, a − b on the same questions with a paired bootstrap interval."""
    by_key = {(r.method, r.budget, r.qid): r for r in evaluation.rows}
    qids = list(dict.fromkeys(r.qid for r in evaluation.rows))
    out = []
    for budget in evaluation.config.budgets:
        for a, b in combinations(evaluation.config.methods, 2):
            for field in COMPARED:
                interval = paired_difference_ci([_number(getattr(by_key[(a, budget, q)], field)) for q in qids],
                                                [_number(getattr(by_key[(b, budget, q)], field)) for q in qids])
                if interval:
                    out.append({"budget": budget, "a": a, "b": b, "metric": METRICS[field], **interval.to_json()})
    return out


def _cells(rows: list[Row]) -> dict[tuple[str, int], list[Row]]:
    cells: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        cells[(r.method, r.budget)].append(r)
    return dict(cells)


def _number(value) -> float | None:
    return None if value is None else float(value)
