"""What the corpus link boost reads, per benchmark: the mean 1/k over documents in linked units (CurrentState.link_density),
the boost it gives (LongRAGConfig.link_share × that), and, on the tune half only, how often a gold document's unit
neighbours are gold too (what a good boost would track; the rule itself reads no question).

Reads the workspaces bench/multihop.py builds (.rag/bench/<name>; `--cap N` the copy re-planned under a unit cap
of N tokens, bench/groupings.py); writes bench/results/link-density[-<tag>].json.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import prepare  # noqa: E402
from bench.multihop import NAMES  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402
from rag.units.long_units import DEFAULT_CAP  # noqa: E402


def gold_neighbours(current, questions) -> float:
    """Mean over tune-half gold documents in a linked unit of the share of their unit neighbours that are gold."""
    shares = []
    for q in questions:
        gold = set(q.gold_doc_ids)
        for g in gold:
            unit = current.unit_of.get(g)
            others = [m.doc_id for m in current.members.get(unit, ()) if m.doc_id != g]
            if others:
                shares.append(len(set(others) & gold) / len(others))
    return float(np.mean(shares)) if shares else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    p.add_argument("--cap", type=int, default=DEFAULT_CAP, help="the unit cap the workspace is planned under")
    p.add_argument("--tag", default="", help="suffix of the results file")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder, share = Embedder(threads=1), LongRAGConfig().link_share
    figures = {"command": "python bench/link_density.py " + " ".join(sys.argv[1:]), "link_share": share,
               "unit_cap": args.cap, "benchmarks": {}}
    for name in args.benchmark or NAMES:
        prepared = prepare(root / name, REPO / ".rag" / "bench", "title-links", embedder, args.cap)
        current = prepared.reader.snapshot().current
        sizes = [len(rows) for rows in current.members.values()]
        linked = [k for k in sizes if k > 1]
        tune = split_halves(name, load_questions(root / name))["tune"]
        figures["benchmarks"][name] = {
            "documents": sum(sizes), "units": len(sizes), "linked_units": len(linked),
            "linked_documents": sum(linked), "median_linked_unit": float(np.median([k for k in linked for _ in range(k)]))
            if linked else 0.0, "mean_inverse_k": round(current.link_density, 4),
            "boost": round(share * current.link_density, 4),
            "tune_gold_neighbours_gold": round(gold_neighbours(current, tune), 4)}
        prepared.close()
    write_results(figures, "link-density", args.tag)
    head = ["benchmark", "documents", "linked documents", "median k (linked)", "mean 1/k", "boost",
            "tune: gold neighbours gold"]
    print(markdown_table(head, [[n, b["documents"], b["linked_documents"], b["median_linked_unit"], b["mean_inverse_k"],
                                 b["boost"], b["tune_gold_neighbours_gold"]] for n, b in figures["benchmarks"].items()]))


if __name__ == "__main__":
    main()
