"""The report's verdict: at each budget, the method to use and its paired interval against the runner-up.

The deciding figure is answer F1 where a reader answered at that budget, else source completeness (all gold
documents in the context). Methods are ranked by its mean over the same questions; the difference between the
first two is a paired bootstrap over questions, and one whose 95% interval includes 0 is "no real difference".
"""
from __future__ import annotations

from collections import Counter

from rag.evaluation.bootstrap import paired_difference_ci
from rag.evaluation.run import Evaluation, Row

LABELS = {"f1": "answer F1", "complete": "source completeness"}
# Why a question has no value for the deciding figure, so the verdict leaves it out.
LEFT_OUT = {"not_found": "expect nothing found (permission or version checks)",
            "no_gold": "have no gold documents", "unanswered": "were not given to the reader"}


def decisions(evaluation: Evaluation) -> list[dict]:
    """One verdict per budget (methods with no value for the deciding figure are left out)."""
    out = []
    for budget in evaluation.config.budgets:
        rows = [r for r in evaluation.rows if r.budget == budget]
        metric = "f1" if any(r.f1 is not None for r in rows) else "complete"
        by_method = {m: {r.qid: _value(r, metric) for r in rows if r.method == m} for m in evaluation.config.methods}
        scored = {m: [v for v in vs.values() if v is not None] for m, vs in by_method.items()}
        means = {m: sum(vs) / len(vs) for m, vs in scored.items() if vs}
        if not means:
            continue
        speed = {m: _mean([r.retrieve_s for r in rows if r.method == m]) for m in means}
        ranked = sorted(means, key=lambda m: (-means[m], speed[m]))   # a tie goes to the faster method
        verdict = {"budget": budget, "metric": metric, "label": LABELS[metric], "method": ranked[0],
                   "mean": round(means[ranked[0]], 4), "retrieve_s": round(speed[ranked[0]], 4), "runner_up": None,
                   "questions": len({r.qid for r in rows}), "used": len(scored[ranked[0]]),
                   "left_out": _left_out([r for r in rows if r.method == ranked[0]], metric)}
        if len(ranked) > 1:
            best, second = by_method[ranked[0]], by_method[ranked[1]]
            qids = sorted(set(best) & set(second))
            interval = paired_difference_ci([best[q] for q in qids], [second[q] for q in qids])
            if interval is not None:
                verdict |= {"runner_up": ranked[1], "runner_up_mean": round(means[ranked[1]], 4),
                            "runner_up_retrieve_s": round(speed[ranked[1]], 4), "difference": interval.to_json(),
                            "real": interval.low > 0 or interval.high < 0, "used": interval.n}
        out.append(verdict)
    return out


def decision_line(d: dict) -> str:
    """One sentence a team acts on, e.g. 'budget 2000: use longrag (source completeness 0.820), +0.110 …'."""
    head = f"budget {d['budget']}: use {d['method']} ({d['label']} {d['mean']:.3f})"
    if not d.get("runner_up"):
        return f"{head}, the only method evaluated, on {questions_used(d)}"
    diff = d["difference"]
    against = (f", {diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}] against {d['runner_up']} "
               f"({d['runner_up_mean']:.3f}) on the same {questions_used(d)} (paired bootstrap 95%)")
    if d["real"]:
        return head + against + ": a real difference"
    return (head + against + f": no real difference; {faster(d)} ({d['method']} "
            f"{1000 * d['retrieve_s']:.0f} ms, {d['runner_up']} {1000 * d['runner_up_retrieve_s']:.0f} ms "
            "per retrieval)")


def decision_brief(d: dict) -> str:
    """The verdict for a metadata cell, with its reason and question count: 'longrag (…): no real difference …'."""
    head = f"{d['method']} ({d['label']} {d['mean']:.3f})"
    if not d.get("runner_up"):
        return f"{head}, the only method, on {questions_used(d)}"
    diff = d["difference"]
    interval = f"{diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}], paired 95%"
    verdict = (f"a real difference over {d['runner_up']} ({interval})" if d["real"] else
               f"no real difference to {d['runner_up']} ({interval}; {faster(d)})")
    return f"{head}: {verdict}, on {questions_used(d)}"


def faster(d: dict) -> str:
    """Which of the first two methods retrieves faster: the tie-breaker when their difference is not real."""
    name = d["method"] if d["retrieve_s"] <= d["runner_up_retrieve_s"] else d["runner_up"]
    return f"{name} is the faster of the two"


def questions_used(d: dict) -> str:
    """'51 questions', or '43 of 51 questions (8 left out: 6 expect nothing found …)' when some have no value."""
    used = d.get("used", d.get("difference", {}).get("n"))
    total = d.get("questions", used)
    if used is None:
        return "the evaluated questions"
    if used == total:
        return f"{total} questions"
    reasons = ", ".join(f"{n} {LEFT_OUT[why]}" for why, n in d.get("left_out", {}).items())
    paired = total - used - sum(d.get("left_out", {}).values())
    if paired > 0:
        reasons = ", ".join(filter(None, [reasons, f"{paired} without a value for the runner-up"]))
    return f"{used} of {total} questions ({total - used} left out: {reasons})"


def _left_out(rows: list[Row], metric: str) -> dict[str, int]:
    """Why each question without a value for `metric` has none, counted by reason."""
    reasons = Counter("unanswered" if metric == "f1" else "not_found" if r.expect == "not_found" else "no_gold"
                      for r in rows if _value(r, metric) is None)
    return {why: reasons[why] for why in LEFT_OUT if reasons[why]}


def _value(row: Row, metric: str) -> float | None:
    value = getattr(row, metric)
    return None if value is None else float(value)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
