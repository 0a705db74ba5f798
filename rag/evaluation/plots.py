"""PNG plots of a summary: quality vs budget, latency, storage (matplotlib's Agg backend, no display needed).

Every figure fits the Dagster UI's metadata dialog (about 1,040 px of content in a 1,400 px window): panels wrap onto
rows instead of widening. Legends sit below the panels, outside every axis, so they never cover a point or a bar, and
the constrained layout keeps the figure's title clear of the panels' titles.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 90  # small files: they are also embedded in the Dagster UI's metadata
MAX_WIDTH_PX = 1000


def _pyplot():
    """matplotlib on first use: importing it costs about a second in every process that loads the code location."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_plots(out: Path, summary: dict) -> dict[str, Path]:
    """Write quality.png, by_type.png, latency.png and storage.png into `out`; return name → path."""
    paths = {}
    for name, fig in figures(summary).items():
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=DPI)
        _pyplot().close(fig)
    return paths


def figures(summary: dict) -> dict[str, Figure]:
    """The four figures, laid out (tight) but not saved."""
    metrics = [("evidence_recall", "evidence recall"), ("completeness", "source completeness")]
    if any(c["f1"] for c in summary["results"]):
        metrics.append(("f1", "answer F1"))
    if any(c["expectation_met"] for c in summary["results"]):
        metrics.append(("expectation_met", "expectations met"))
    return {"quality": _by_budget(summary, metrics, ylim=(0, 1.02)), "by_type": _by_type(summary),
            "latency": _by_budget(summary, [("retrieve_s", "retrieval: seconds to find the context\n(mean per question)"),
                                            ("avg_query_seconds", "AvgQueryTime: seconds per question with\n"
                                                                  "preparation and answering shared out")]),
            "storage": _storage(summary)}


def _grid(panels: int, panel_w: float, panel_h: float, **kwargs):
    """As many panels per row as fit in MAX_WIDTH_PX; the rest wrap onto further rows."""
    fit = max(1, min(panels, int(MAX_WIDTH_PX / DPI // panel_w)))
    rows = math.ceil(panels / fit)
    cols = math.ceil(panels / rows)   # balanced: four panels are 2 × 2, not 3 + 1
    fig, axes = _pyplot().subplots(rows, cols, figsize=(panel_w * cols, panel_h * rows), squeeze=False,
                                   layout="constrained", **kwargs)
    flat = list(axes.flat)
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def _series(summary: dict, method: str, key: str) -> tuple[list[int], list[float], list[list[float]]]:
    cells = sorted((c for c in summary["results"] if c["method"] == method and c[key] is not None),
                   key=lambda c: c["budget"])
    budgets = [c["budget"] for c in cells]
    values = [c[key]["mean"] if isinstance(c[key], dict) else c[key] for c in cells]
    errors = [[v - c[key]["low"] for v, c in zip(values, cells)], [c[key]["high"] - v for v, c in zip(values, cells)]] \
        if cells and isinstance(cells[0][key], dict) else None
    return budgets, values, errors


def _by_budget(summary: dict, metrics: list[tuple[str, str]], ylim: tuple | None = None) -> Figure:
    fig, axes = _grid(len(metrics), 4.2, 3.4)
    for ax, (key, label) in zip(axes, metrics):
        methods = summary["config"]["methods"]
        for i, method in enumerate(methods):
            budgets, values, errors = _series(summary, method, key)
            # Nudge each method sideways (log axis: a constant factor) so equal values do not hide each other.
            dodge = 1 + 0.05 * (i - (len(methods) - 1) / 2)
            if budgets:
                ax.errorbar([b * dodge for b in budgets], values, yerr=errors, marker="o", capsize=3, label=method)
        ax.set_xscale("log", base=2)
        ax.set_xticks(summary["config"]["budgets"], [str(b) for b in summary["config"]["budgets"]])
        ax.set_xlabel("token budget")
        ax.set_title(label)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
    _legend_below(fig, axes[0], fontsize=8)
    fig.suptitle(f"{summary['benchmark']} ({summary['questions']} questions; bars: 95% bootstrap CI)", fontsize=10)
    return fig


def _by_type(summary: dict) -> Figure:
    """Completeness per question type and hops: one panel per budget, one bar per method, 95% CI whiskers."""
    budgets, methods = summary["config"]["budgets"], summary["config"]["methods"]
    groups = sorted({(c["type"], c["hops"]) for c in summary["by_type"] if c["completeness"]})
    fig, axes = _grid(len(budgets), min(MAX_WIDTH_PX / DPI, max(4.2, 0.9 * len(groups) + 1.2)), 3.8)
    width = 0.8 / max(len(methods), 1)
    cells = {(c["type"], c["hops"], c["method"], c["budget"]): c["completeness"] for c in summary["by_type"]}
    for ax, budget in zip(axes, budgets):
        for i, method in enumerate(methods):
            values = [cells.get((t, h, method, budget)) for t, h in groups]
            xs = [g + (i - (len(methods) - 1) / 2) * width for g in range(len(groups))]
            means = [v["mean"] if v else 0.0 for v in values]
            errors = [[m - v["low"] if v else 0 for m, v in zip(means, values)],
                      [v["high"] - m if v else 0 for m, v in zip(means, values)]]
            ax.bar(xs, means, width, yerr=errors, capsize=2, label=method)
        ax.set_xticks(range(len(groups)), [f"{t}\n{h} hop" for t, h in groups], fontsize=7,
                      rotation=30 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center")
        ax.set_title(f"budget {budget}")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("source completeness")
    _legend_below(fig, axes[0], fontsize=7)
    fig.suptitle(f"{summary['benchmark']}: completeness by question type (bars: 95% bootstrap CI)", fontsize=10)
    return fig


def _storage(summary: dict) -> Figure:
    """Horizontal bars: method names on their own axis, each bar's ratio to the raw text beyond its end."""
    methods = list(summary["methods"])
    megabytes = [summary["methods"][m]["storage_bytes"] / 1e6 for m in methods]
    fig, ax = _pyplot().subplots(figsize=(6.4, 1.5 + 0.45 * len(methods)), layout="constrained")
    bars = ax.barh(methods, megabytes, color="tab:blue")
    ax.bar_label(bars, [f" {summary['methods'][m]['storage_ratio_to_raw_text']:.1f}× raw text" for m in methods],
                 fontsize=8)
    ax.axvline(summary["corpus"]["raw_text_bytes"] / 1e6, color="grey", linestyle="--", label="raw text")
    ax.set_xlim(right=max(megabytes, default=1) * 1.45)  # room for the labels beyond the bars
    ax.invert_yaxis()
    ax.set_xlabel("MB on disk")
    ax.set_title(f"{summary['benchmark']}: storage", fontsize=10)
    _legend_below(fig, ax, fontsize=8)
    return fig


def _legend_below(fig: Figure, ax, fontsize: int) -> None:
    """One legend for the figure, in a row below its panels: outside the data, whatever the values."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(max(len(labels), 1), 4), fontsize=fontsize,
               frameon=False)
