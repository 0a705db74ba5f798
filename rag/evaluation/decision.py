"""The report's verdict: at each budget, the method to use and its paired interval against the runner-up.

The deciding figure is answer F1 where a reader answered at that budget, else source completeness (all gold
documents in the context). Methods are ranked by its mean over the same questions; the difference between the
first two is a paired bootstrap over questions, and one whose 95% interval includes 0 is "no real difference".
"""
from __future__ import annotations

from rag.evaluation.bootstrap import paired_difference_ci
from rag.evaluation.run import Evaluation, Row

LABELS = {"f1": "answer F1", "complete": "source completeness"}


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
                   "mean": round(means[ranked[0]], 4), "retrieve_s": round(speed[ranked[0]], 4), "runner_up": None}
        if len(ranked) > 1:
            best, second = by_method[ranked[0]], by_method[ranked[1]]
            qids = sorted(set(best) & set(second))
            interval = paired_difference_ci([best[q] for q in qids], [second[q] for q in qids])
            if interval is not None:
                verdict |= {"runner_up": ranked[1], "runner_up_mean": round(means[ranked[1]], 4),
                            "runner_up_retrieve_s": round(speed[ranked[1]], 4), "difference": interval.to_json(),
                            "real": interval.low > 0 or interval.high < 0}
        out.append(verdict)
    return out


def decision_line(d: dict) -> str:
    """One sentence a team acts on, e.g. 'budget 2000: use longrag (source completeness 0.820), +0.110 …'."""
    head = f"budget {d['budget']}: use {d['method']} ({d['label']} {d['mean']:.3f})"
    if not d.get("runner_up"):
        return head + ", the only method evaluated"
    diff = d["difference"]
    against = (f", {diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}] against {d['runner_up']} "
               f"({d['runner_up_mean']:.3f}) on the same {diff['n']} questions (paired bootstrap 95%)")
    if d["real"]:
        return head + against + ": a real difference"
    faster = d["method"] if d["retrieve_s"] <= d["runner_up_retrieve_s"] else d["runner_up"]
    return (head + against + f": no real difference; {faster} is the faster of the two ({d['method']} "
            f"{1000 * d['retrieve_s']:.0f} ms, {d['runner_up']} {1000 * d['runner_up_retrieve_s']:.0f} ms "
            "per retrieval)")


def decision_brief(d: dict) -> str:
    """The verdict in a few words, for a narrow metadata cell: 'longrag (completeness 0.980), +0.080 [...] …'."""
    head = f"{d['method']} ({d['label']} {d['mean']:.3f})"
    if not d.get("runner_up"):
        return head + ", the only method"
    diff = d["difference"]
    verdict = "a real difference" if d["real"] else "no real difference"
    return (f"{head}: {diff['mean']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}] over {d['runner_up']} "
            f"(paired, n={diff['n']}): {verdict}")


def _value(row: Row, metric: str) -> float | None:
    value = getattr(row, metric)
    return None if value is None else float(value)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
