"""The citation bench's split of gold documents cited between right and wrong answers."""
from __future__ import annotations

import json

import bench.citations as citations_bench


def row(f1: float | None, recall: float | None, in_context: float, method: str = "longrag") -> dict:
    return {"method": method, "budget": 2000, "f1": f1, "citation_recall": recall, "evidence_recall": in_context}


def test_gold_documents_cited_are_split_by_whether_the_answer_is_right(tmp_path, monkeypatch):
    rows = [row(1.0, 1.0, 1.0), row(0.5, 0.5, 1.0), row(0.2, 0.0, 0.5), row(0.0, 0.5, 1.0),
            row(None, None, 1.0),            # not answered: no citation figures, in neither group
            row(1.0, 0.0, 1.0, "elite")]     # another method's row
    (tmp_path / "eval" / "run").mkdir(parents=True)
    (tmp_path / "eval" / "run" / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(citations_bench, "RESULTS", tmp_path)
    assert citations_bench.by_answer("run", "longrag", 2000) == {
        "right": {"n": 2, "citation_recall": 0.75, "gold_in_context": 1.0},
        "wrong": {"n": 2, "citation_recall": 0.25, "gold_in_context": 0.75}}
