"""The figures table of docs/quality.md, printed from the JSON the quality benches wrote (nothing is re-measured).

Reads bench/results/multihop-<grouping>[-tag].json (one file per argument, default the final run), and
anchor64-<name>.json and elite-<name>-<half>.json when present; prints completeness and evidence recall with their intervals per benchmark,
method, half and budget, plus the mean over the benchmarks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import RESULTS  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402


def rows_of(path: Path, halves: list[str], only: set[str] | None) -> list[list[str]]:
    figures = json.loads(path.read_text())
    rows = []
    for name, bench in figures["benchmarks"].items():
        for variant, by_half in bench["variants"].items():
            if only and variant not in only:
                continue
            for half in halves:
                if half not in by_half:
                    continue
                cells = by_half[half]
                rows.append([name, f"{variant} ({figures['grouping']})", half, str(bench["questions"][half])]
                            + [_ci(cells[str(b)]["completeness"]) for b in figures["budgets"]]
                            + [_ci(cells[str(b)]["evidence_recall"]) for b in figures["budgets"]])
    return rows


def anchor_rows(halves: list[str]) -> list[list[str]]:
    rows = []
    for path in sorted(RESULTS.glob("anchor64-*.json")):
        figures = json.loads(path.read_text())
        for kind, by_half in figures["results"].items():
            for half in halves:
                cells = by_half[half]
                budgets = sorted(cells, key=int)
                rows.append([figures["benchmark"], f"64-token chunks, {kind}", half, str(cells[budgets[0]]
                             ["completeness"]["n"])] + [_ci(cells[b]["completeness"]) for b in budgets]
                            + [_ci(cells[b]["evidence_recall"]) for b in budgets])
    return rows


def macro_rows(path: Path, halves: list[str], only: set[str] | None) -> list[list[str]]:
    figures = json.loads(path.read_text())
    return [[f"{v} ({figures['grouping']})", h] + [f"{x:.3f}" for x in by_half[h]]
            for v, by_half in figures["macro_completeness"].items() if not only or v in only
            for h in halves if h in by_half]


def elite_rows(halves: list[str]) -> list[list[str]]:
    """ELITE (offline policy) from bench/elite.py's per-half files, when they were written."""
    rows = []
    for half in halves:
        for path in sorted(RESULTS.glob(f"elite-*-{half}.json")):
            figures = json.loads(path.read_text())
            cells = figures["policies"]["offline"]["budgets"]
            budgets = sorted(cells, key=int)
            rows.append([figures["benchmark"], "elite (offline policy)", half, str(figures["questions"])]
                        + [_ci(cells[b]["source_completeness_ci"]) for b in budgets]
                        + [_ci(cells[b]["evidence_recall_ci"]) for b in budgets])
    return rows


def _ci(c: dict) -> str:
    return f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", default=["multihop-title-links-report.json"])
    p.add_argument("--halves", default="report,tune")
    p.add_argument("--variants", help="';'-separated variant names to keep (default: all)")
    p.add_argument("--no-anchor", action="store_true", help="leave out the 64-token anchor and ELITE rows")
    p.add_argument("--macro", action="store_true", help="the mean over the benchmarks (completeness) instead")
    args = p.parse_args()
    halves = args.halves.split(",")
    only = set(args.variants.split(";")) if args.variants else None
    if args.macro:
        print(markdown_table(["method (units)", "half", "C@1K", "C@2K", "C@4K"], [
            row for f in args.files for row in macro_rows(RESULTS / f, halves, only)]))
        return
    rows = [r for f in args.files for r in rows_of(RESULTS / f, halves, only)]
    rows += [] if args.no_anchor else anchor_rows(halves) + elite_rows(halves)
    rows.sort(key=lambda r: (r[0], r[2] != "report"))
    print(markdown_table(["benchmark", "method (units)", "half", "n", "C@1K", "C@2K", "C@4K", "R@1K", "R@2K", "R@4K"],
                         rows))


if __name__ == "__main__":
    main()
