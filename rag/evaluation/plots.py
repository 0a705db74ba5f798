"""PNG plots of a summary: quality vs budget, latency, storage (matplotlib's Agg backend, no display needed)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 90  # small files: they are also embedded in the Dagster UI's metadata


def draw_plots(out: Path, summary: dict) -> dict[str, Path]:
    """Write quality.png, by_type.png, latency.png and storage.png into `out`; return name → path."""
    paths = {"quality": out / "quality.png", "by_type": out / "by_type.png", "latency": out / "latency.png",
             "storage": out / "storage.png"}
    metrics = [("evidence_recall", "evidence recall"), ("completeness", "source completeness")]
    if any(c["f1"] for c in summary["results"]):
        metrics.append(("f1", "answer F1"))
    if any(c["expectation_met"] for c in summary["results"]):
        metrics.append(("expectation_met", "expectations met"))
    _by_budget(summary, metrics, paths["quality"], ylim=(0, 1.02))
    _by_type(summary, paths["by_type"])
    _by_budget(summary, [("retrieve_s", "retrieval seconds (mean)"), ("avg_query_seconds", "AvgQueryTime seconds")],
               paths["latency"])
    _storage(summary, paths["storage"])
    return paths


def _series(summary: dict, method: str, key: str) -> tuple[list[int], list[float], list[list[float]]]:
    cells = sorted((c for c in summary["results"] if c["method"] == method and c[key] is not None),
                   key=lambda c: c["budget"])
    budgets = [c["budget"] for c in cells]
    values = [c[key]["mean"] if isinstance(c[key], dict) else c[key] for c in cells]
    errors = [[v - c[key]["low"] for v, c in zip(values, cells)], [c[key]["high"] - v for v, c in zip(values, cells)]] \
        if cells and isinstance(cells[0][key], dict) else None
    return budgets, values, errors


def _by_budget(summary: dict, metrics: list[tuple[str, str]], path: Path, ylim: tuple | None = None) -> None:
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for ax, (key, label) in zip(axes[0], metrics):
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
    axes[0][0].legend()
    fig.suptitle(f"{summary['benchmark']} ({summary['questions']} questions; bars: 95% bootstrap CI)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _by_type(summary: dict, path: Path) -> None:
    """Completeness per question type and hops: one panel per budget, one bar per method, 95% CI whiskers."""
    budgets, methods = summary["config"]["budgets"], summary["config"]["methods"]
    groups = sorted({(c["type"], c["hops"]) for c in summary["by_type"] if c["completeness"]})
    fig, axes = plt.subplots(1, len(budgets), figsize=(max(4.2, 1.1 * len(groups)) * len(budgets) ** 0.5 + 2, 3.6),
                             squeeze=False, sharey=True)
    width = 0.8 / max(len(methods), 1)
    cells = {(c["type"], c["hops"], c["method"], c["budget"]): c["completeness"] for c in summary["by_type"]}
    for ax, budget in zip(axes[0], budgets):
        for i, method in enumerate(methods):
            values = [cells.get((t, h, method, budget)) for t, h in groups]
            xs = [g + (i - (len(methods) - 1) / 2) * width for g in range(len(groups))]
            means = [v["mean"] if v else 0.0 for v in values]
            errors = [[m - v["low"] if v else 0 for m, v in zip(means, values)],
                      [v["high"] - m if v else 0 for m, v in zip(means, values)]]
            ax.bar(xs, means, width, yerr=errors, capsize=2, label=method)
        ax.set_xticks(range(len(groups)), [f"{t}\n{h} hop" for t, h in groups], fontsize=7)
        ax.set_title(f"budget {budget}")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("source completeness")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{summary['benchmark']}: completeness by question type (bars: 95% bootstrap CI)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _storage(summary: dict, path: Path) -> None:
    methods = list(summary["methods"])
    megabytes = [summary["methods"][m]["storage_bytes"] / 1e6 for m in methods]
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    bars = ax.bar(methods, megabytes, color="tab:blue")
    ax.bar_label(bars, [f"{summary['methods'][m]['storage_ratio_to_raw_text']:.1f}× raw text" for m in methods])
    ax.axhline(summary["corpus"]["raw_text_bytes"] / 1e6, color="grey", linestyle="--", label="raw text")
    ax.set_ylim(top=max(megabytes) * 1.25)  # room for the labels above the bars
    ax.set_ylabel("MB on disk")
    ax.set_title(f"{summary['benchmark']}: storage")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
