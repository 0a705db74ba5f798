"""The nightly report decides: per budget, the method to use with its paired interval against the runner-up, checked
here against a paired bootstrap this test computes on its own; and its plots fit the Dagster UI's viewer."""
import re
import struct

import numpy as np
import pytest

from rag.evaluation.decision import decision_brief, decision_line, decisions
from rag.evaluation.plots import MAX_WIDTH_PX, draw_plots, figures
from rag.evaluation.report import render_brief, render_markdown
from rag.evaluation.run import EvalConfig, Evaluation, Row
from rag.evaluation.summary import by_type, cell_figures

N = 60
METHODS, BUDGETS = ("longrag", "shortchunk", "elite"), (1000, 2000)
# Per budget and method: on which questions the context holds every gold document. At 1000, longrag leads clearly;
# at 2000, longrag and shortchunk differ on a few questions each way (no real difference).
RNG = np.random.default_rng(7)
BASE = RNG.random(N)
COMPLETE = {
    (1000, "longrag"): BASE < 0.75, (1000, "shortchunk"): BASE < 0.40, (1000, "elite"): RNG.random(N) < 0.2,
    (2000, "longrag"): RNG.random(N) < 0.80, (2000, "elite"): RNG.random(N) < 0.3,
}
_yes, _no = np.flatnonzero(COMPLETE[(2000, "longrag")]), np.flatnonzero(~COMPLETE[(2000, "longrag")])
COMPLETE[(2000, "shortchunk")] = COMPLETE[(2000, "longrag")].copy()
COMPLETE[(2000, "shortchunk")][_yes[:4]] = False   # longrag wins 4 questions, shortchunk 3
COMPLETE[(2000, "shortchunk")][_no[:3]] = True
SECONDS = {"longrag": 0.012, "shortchunk": 0.004, "elite": 0.8}


def row(qid: int, method: str, budget: int) -> Row:
    complete = bool(COMPLETE[(budget, method)][qid])
    return Row(qid=f"q{qid}", method=method, budget=budget, kind="bridge" if qid % 3 else "comparison",
               hops=2, asked_as="staff", expect="answer", tokens=budget - 10, retrieved_doc_ids=[],
               evidence_recall=float(complete), sentence_recall=None, complete=complete, expectation_met=None,
               answered=False, abstained=None, short_answer=None, exact_match=None, f1=None, citations_valid=None,
               citation_locatable=None, cited_gold=None, citation_recall=None, citation_precision=None,
               citations_attributed=None, short_answer_supported=None, answer_in_gold=None, retrieve_s=SECONDS[method],
               generate_s=None, llm_calls=0, input_tokens=0, output_tokens=0)


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    rows = [row(q, m, b) for b in BUDGETS for m in METHODS for q in range(N)]
    return Evaluation("synthetic", EvalConfig(METHODS, BUDGETS), "none", "offline", N, 0, rows)


def own_paired_bootstrap(a: np.ndarray, b: np.ndarray, resamples: int = 20000) -> tuple[float, float, float]:
    """Mean of a − b and its percentile 95% interval, resampling questions (both methods' values together)."""
    diff = a.astype(float) - b.astype(float)
    picks = np.random.default_rng(12345).integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[picks].mean(axis=1)
    return float(diff.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def summary_of(evaluation: Evaluation) -> dict:
    storage = {"longrag": 4_100_000, "shortchunk": 3_900_000, "elite": 900_000}
    return {
        "benchmark": "synthetic", "generated_at": "2026-12-02T04:00:00+00:00", "command": "rag eval …",
        "reader": "none", "elite_policy": "offline", "config": {"methods": list(METHODS), "budgets": list(BUDGETS)},
        "questions": N, "answered": 0, "workspace_checks": {"consistent": True},
        "corpus": {"documents": 120, "units": 40, "subchunks": 900, "raw_text_bytes": 1_000_000},
        "ingest_seconds": 1.0, "evaluation_seconds": 2.0,
        "methods": {m: {"prepare_seconds": 1.0, "prepare_parts": {"catalog_open": 1.0}, "storage_bytes": storage[m],
                        "storage_ratio_to_raw_text": storage[m] / 1e6} for m in METHODS},
        "results": [cell_figures(m, b, [r for r in evaluation.rows if (r.method, r.budget) == (m, b)], 1.0, N)
                    for b in BUDGETS for m in METHODS],
        "by_type": by_type(evaluation.rows), "expectations": [], "differences": [],
        "decisions": decisions(evaluation),
    }


def test_the_report_opens_with_a_decision_per_budget_that_matches_an_independent_paired_bootstrap(evaluation):
    report = render_markdown(summary_of(evaluation), {})
    top = report.split("## Which method to use", 1)
    assert top[0].strip() == "# Retrieval evaluation: synthetic"   # the verdict comes before anything else
    lines = [line for line in top[1].splitlines() if line.startswith("- **budget")]
    assert len(lines) == len(BUDGETS)
    for budget, line in zip(BUDGETS, lines):
        means = {m: COMPLETE[(budget, m)].mean() for m in METHODS}
        best, second = sorted(METHODS, key=lambda m: -means[m])[:2]
        mean, low, high = own_paired_bootstrap(COMPLETE[(budget, best)], COMPLETE[(budget, second)])
        found = re.search(r"use (\S+) \(source completeness ([0-9.]+)\), ([+-][0-9.]+) \[([+-][0-9.]+), "
                          r"([+-][0-9.]+)\] against (\S+) \(([0-9.]+)\) on the same (\d+) questions", line)
        assert found, line
        assert (found[1], found[6], int(found[8])) == (best, second, N)
        assert float(found[2]) == pytest.approx(means[best], abs=5e-4)
        assert float(found[3]) == pytest.approx(mean, abs=5e-4)
        assert float(found[4]) == pytest.approx(low, abs=0.02) and float(found[5]) == pytest.approx(high, abs=0.02)
        assert ("no real difference" in line) == (low <= 0 <= high)
    assert "a real difference" in lines[0] and "no real difference; shortchunk is the faster" in lines[1]


def legend_overlaps(fig) -> list[str]:
    """What a legend of `fig` covers: a plotted point (line markers, error-bar ends), a bar, a label or a panel."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *[ax.get_legend() for ax in fig.axes if ax.get_legend()]]
    found = []
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not fig.bbox.contains(box.x0, box.y0) or not fig.bbox.contains(box.x1, box.y1):
            found.append("a legend outside the figure (cut off)")
        for ax in (a for a in fig.axes if a.get_visible()):
            points = [line.get_transform().transform(np.column_stack(line.get_data()).astype(float)) for line in ax.lines
                      if len(line.get_xdata())]
            points += [c.get_transform().transform(path.vertices) for c in ax.collections for path in c.get_paths()]
            found += [f"point {tuple(p.round())} of {ax.get_title()!r}" for pts in points for p in pts
                      if box.contains(*p)]
            found += [f"a bar of {ax.get_title()!r}" for patch in ax.patches
                      if patch.get_window_extent(renderer).overlaps(box)]
            found += [f"label {t.get_text()!r}" for t in [*ax.texts, ax.title, ax.xaxis.label, ax.yaxis.label,
                                                           *ax.get_xticklabels()]
                      if t.get_visible() and t.get_text() and t.get_window_extent(renderer).overlaps(box)]
            if ax.get_window_extent(renderer).overlaps(box):
                found.append(f"the panel {ax.get_title()!r}")
    return found


def drawn_ticklabels(ax) -> list:
    """The tick labels inside the axis' limits: matplotlib keeps labels for ticks beyond them, never drawn."""
    def inside(ticks, labels, limits):
        lo, hi = sorted(limits)
        return [label for tick, label in zip(ticks, labels) if lo <= tick <= hi]

    return (inside(ax.get_xticks(), ax.get_xticklabels(), ax.get_xlim())
            + inside(ax.get_yticks(), ax.get_yticklabels(), ax.get_ylim()))


def test_the_legend_check_sees_a_legend_drawn_over_the_data():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, 1, 2], marker="o", label="a")
    ax.bar([0, 1, 2], [2, 2, 2], label="b")
    ax.legend(loc="center")
    assert any(f.startswith("point") for f in legend_overlaps(fig))
    assert any(f.startswith("a bar") for f in legend_overlaps(fig))
    plt.close(fig)


@pytest.mark.parametrize("methods", [METHODS, ("longrag", "longrag-extract", "longrag-1hop", "longrag-units",
                                                "shortchunk", "elite", "hybrid")], ids=["three", "seven"])
def test_plots_fit_the_ui_viewer_and_no_legend_or_label_covers_anything(evaluation, tmp_path, methods):
    summary = summary_of(evaluation)
    if len(methods) > len(METHODS):   # every method the registry has, each with its own values
        renamed = {m: summary["results"] for m in methods}
        summary["config"]["methods"] = list(methods)
        seconds = [{"mean": 0.004 * (i + 1), "low": 0.003 * (i + 1), "high": 0.005 * (i + 1), "n": N}
                   for i in range(len(methods))]
        summary["results"] = [c | {"method": m, "retrieve_s": seconds[i]}
                              for i, m in enumerate(methods) for c in renamed[m] if c["method"] == METHODS[i % 3]]
        summary["by_type"] = [c | {"method": m} for i, m in enumerate(methods) for c in summary["by_type"]
                              if c["method"] == METHODS[i % 3]]
        summary["methods"] = {m: summary["methods"][METHODS[i % 3]] for i, m in enumerate(methods)}
    for name, fig in figures(summary).items():
        assert legend_overlaps(fig) == [], name
        assert fig.legends, name   # each figure names its methods, below the panels
        renderer = fig.canvas.get_renderer()
        texts = [t for ax in fig.axes if ax.get_visible()
                 for t in [*drawn_ticklabels(ax), *ax.texts, ax.title, ax.xaxis.label]
                 if t.get_visible() and t.get_text()]
        texts += [fig._suptitle] if fig._suptitle else []
        boxes = [t.get_window_extent(renderer) for t in texts]
        for i, a in enumerate(boxes):
            for j in range(i + 1, len(boxes)):
                assert not a.overlaps(boxes[j]), (name, texts[i].get_text(), texts[j].get_text())
    for name, path in draw_plots(tmp_path, summary).items():
        width, height = struct.unpack(">II", path.read_bytes()[16:24])   # the PNG header's IHDR
        assert width <= MAX_WIDTH_PX and height <= 1000, (name, width, height)


def test_the_ui_brief_is_the_verdict_and_one_table_short_enough_to_open_at_its_top(evaluation):
    summary = summary_of(evaluation)
    brief = render_brief(summary, "/reports/synthetic/report.md")
    assert brief.count("\n") < 30 and "data:image" not in brief and "/reports/synthetic/report.md" in brief
    full = render_markdown(summary, {})
    assert [line for line in brief.splitlines() if line.startswith("- **budget")] \
        == [line for line in full.splitlines() if line.startswith("- **budget")]
    assert "| longrag | 0.750 | " in brief


def test_a_verdict_says_how_many_questions_it_rests_on_and_why_the_others_were_left_out():
    """Questions that expect nothing found, or have no gold documents, have no completeness: the verdict line and the
    UI's brief both count them and say why, and the brief keeps the report's reason (the faster of the two)."""
    replace = __import__("dataclasses").replace
    rows = [row(q, m, b) for b in BUDGETS for m in METHODS for q in range(N)]
    rows = [replace(r, complete=None, evidence_recall=None, expect="not_found") if int(r.qid[1:]) < 6 else
            replace(r, complete=None, evidence_recall=None) if int(r.qid[1:]) < 8 else r for r in rows]
    found = decisions(Evaluation("synthetic", EvalConfig(METHODS, BUDGETS), "none", "offline", N, 0, rows))
    why = "52 of 60 questions (8 left out: 6 expect nothing found (permission or version checks), " \
          "2 have no gold documents)"
    for d in found:
        assert d["difference"]["n"] == 52
        assert f"on the same {why}" in decision_line(d) and decision_brief(d).endswith(f"on {why}")
    assert not found[1]["real"] and "no real difference to" in decision_brief(found[1])
    assert "shortchunk is the faster of the two" in decision_brief(found[1])   # 4 ms against longrag's 12 ms
    assert "shortchunk is the faster of the two" in decision_line(found[1])
