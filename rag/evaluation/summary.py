"""Figures per method × budget with bootstrap intervals, paired differences with win counts, per-method costs."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from itertools import combinations

import numpy as np

from rag.evaluation.bootstrap import bootstrap_ci, paired_difference_ci
from rag.evaluation.decision import decisions
from rag.evaluation.prepared import Prepared
from rag.evaluation.run import Evaluation, Row
from rag.query.methods import METHODS as REGISTRY

# Row field → name in the summary; every one gets a bootstrap interval over questions.
METRICS = {"evidence_recall": "evidence_recall", "sentence_recall": "sentence_recall", "complete": "completeness",
           "expectation_met": "expectation_met", "exact_match": "exact_match", "f1": "f1",
           "citations_valid": "citations_valid", "citation_locatable": "citation_locatable",
           "cited_gold": "cited_gold", "answer_in_gold": "answer_in_gold",
           "citation_recall": "citation_recall", "citation_precision": "citation_precision",
           "citations_attributed": "citations_attributed", "short_answer_supported": "short_answer_supported",
           "abstained": "abstained",
           "retrieve_s": "retrieve_s", "generate_s": "generate_s"}
COMPARED = ("evidence_recall", "complete", "f1")  # the paired method-vs-method differences a decision rests on
BY_TYPE = ("evidence_recall", "complete", "f1")
TREND = ("evidence_recall", "completeness", "expectation_met", "f1", "citations_valid", "citation_locatable",
         "citation_recall", "citations_attributed")


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
                   "limit": evaluation.config.limit, "answer_sample": evaluation.config.answer_sample,
                   "answer_budgets": list(evaluation.config.answer_budgets or evaluation.config.budgets),
                   "sample_seed": evaluation.config.sample_seed},
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
        "by_type": by_type(evaluation.rows),
        "expectations": expectation_failures(evaluation.rows),
        "differences": differences(evaluation),
        "decisions": decisions(evaluation),
    }


def method_costs(method: str, evaluation: Evaluation, prepared: Prepared) -> dict:
    """One clean build per method, counted the same way for all: what it needs before its first query.

    Every method opens the published catalog; the index-based ones add one clean build of the sub-chunk index,
    LongRAG its BM25 channel, ELITE its sentence store (both built from scratch and timed by the run).
    """
    built = evaluation.prepare_seconds
    parts = {"catalog_open": prepared.catalog_open_seconds}
    if REGISTRY[method].uses_index:
        parts["index_build"] = prepared.index_build_seconds
    if REGISTRY[method].uses_lexical:
        parts["lexical_index"] = built.get("lexical_index", 0.0)
    if REGISTRY[method].uses_sentences:
        parts["sentence_store"] = built.get("sentence_store", 0.0)
    stored = prepared.storage_bytes(method)
    return {"prepare_seconds": round(sum(parts.values()), 3),
            "prepare_parts": {k: round(v, 3) for k, v in parts.items()}, "storage_bytes": stored,
            "storage_ratio_to_raw_text": prepared.storage_ratio(method)}


def cell_figures(method: str, budget: int, rows: list[Row], prepare_seconds: float, n_questions: int) -> dict:
    """One method at one budget: tokens used, every metric with its interval, and AvgQueryTime."""
    tokens = [r.tokens for r in rows]
    figures = {"method": method, "budget": budget, "n": len(rows),
               "tokens_mean": round(float(np.mean(tokens)), 1), "tokens_max": int(max(tokens))}
    for name, label in METRICS.items():
        interval = bootstrap_ci([_number(getattr(r, name)) for r in rows])
        figures[label] = interval.to_json() if interval else None
    answering = [r for r in rows if r.answered] or rows  # with a reader sample, a query's LLM cost includes reading
    for name in ("llm_calls", "input_tokens", "output_tokens"):
        figures[f"{name}_mean"] = round(float(np.mean([getattr(r, name) for r in answering])), 2)
    retrieve = figures["retrieve_s"]["mean"]
    generate = figures["generate_s"]["mean"] if figures["generate_s"] else 0.0
    # AvgQueryTime = (T_prepare + N·(T_retrieve + T_gen)) / N, the same formula and N for every method.
    figures["avg_query_seconds"] = round((prepare_seconds + n_questions * (retrieve + generate)) / n_questions, 4)
    return figures


def by_type(rows: list[Row]) -> list[dict]:
    """Means with intervals per question type and hop count, per method × budget."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.kind, r.hops, r.method, r.budget)].append(r)
    out = []
    for (kind, hops, method, budget), mine in sorted(groups.items()):
        cell = {"type": kind, "hops": hops, "method": method, "budget": budget, "n": len(mine)}
        for name in BY_TYPE:
            interval = bootstrap_ci([_number(getattr(r, name)) for r in mine])
            cell[METRICS[name]] = interval.to_json() if interval else None
        out.append(cell)
    return out


def expectation_failures(rows: list[Row]) -> list[dict]:
    """Every row where a not_found or absent_version question was shown something it must not be."""
    return [{"qid": r.qid, "method": r.method, "budget": r.budget, "asked_as": r.asked_as, "expect": r.expect,
             "retrieved_doc_ids": r.retrieved_doc_ids} for r in rows if r.expectation_met is False]


def differences(evaluation: Evaluation) -> list[dict]:
    """For every budget and pair of methods, a − b on the same questions: paired bootstrap interval and wins."""
    by_key = {(r.method, r.budget, r.qid): r for r in evaluation.rows}
    qids = list(dict.fromkeys(r.qid for r in evaluation.rows))
    out = []
    for budget in evaluation.config.budgets:
        for a, b in combinations(evaluation.config.methods, 2):
            for name in COMPARED:
                xs = [_number(getattr(by_key[(a, budget, q)], name)) for q in qids]
                ys = [_number(getattr(by_key[(b, budget, q)], name)) for q in qids]
                interval = paired_difference_ci(xs, ys)
                if interval:
                    out.append({"budget": budget, "a": a, "b": b, "metric": METRICS[name], **interval.to_json(),
                                **wins(xs, ys)})
    return out


def wins(xs: list[float | None], ys: list[float | None]) -> dict:
    """Questions where a scores higher, where b does, and ties (pairs with a missing value left out)."""
    pairs = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    return {"a_wins": sum(x > y for x, y in pairs), "b_wins": sum(y > x for x, y in pairs),
            "ties": sum(x == y for x, y in pairs)}


def trend(summary: dict) -> dict[str, float]:
    """One float per metric × method × budget, under stable keys, for the UI to plot across nights."""
    return {f"{metric}/{cell['method']}@{cell['budget']}": cell[metric]["mean"]
            for cell in summary["results"] for metric in TREND if cell[metric]}


def _cells(rows: list[Row]) -> dict[tuple[str, int], list[Row]]:
    cells: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        cells[(r.method, r.budget)].append(r)
    return dict(cells)


def _number(value) -> float | None:
    return None if value is None else float(value)
