"""Where each hop's gold document lands in LongRAG's ranked list: missing, in the top 8 / 20, median rank.

Gold documents are taken in the benchmark's order (MuSiQue's is its decomposition's, so position k is hop k+1).
The ranked list is the budget-independent one that packing reads (`longrag_candidates`), on one half of the
fixed tune/report split. Prints a table and writes bench/results/hop-ranks-<benchmark>-<half>-<variant>.json.

With `--budget B`, where the misses at that budget are instead (bench/hop_misses.py): each gold document left out
of an incomplete question's context is absent from every hop's list, passed over because it did not fit, or ranked
below what B packs; and what the packed tokens are spent on. Writes hop-misses-<benchmark>-<half>-<variant>-<B>.json.
`--against FILE` (with `--budget`) compares with another run's file: which gold documents moved in and which fell out.
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
from bench.multihop import CALLER, parse_variant  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.retrieval.longrag import longrag_candidates  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import HALVES, add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402


def ranks(snap, embedder, counter, config, questions) -> dict[int, list[int | None]]:
    """Per gold position, each question's rank of that document in the ranked list (None: not in it)."""
    out: dict[int, list[int | None]] = {}
    for q in questions:
        ranked = longrag_candidates(snap, Request(CALLER, q.question, 1), Tools(embedder, counter), config)
        first = {}
        for i, item in enumerate(ranked.items):
            first.setdefault(item.doc_id, i)
        for k, gold in enumerate(q.gold_doc_ids):
            out.setdefault(k, []).append(first.get(gold))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--half", choices=HALVES, default="tune")
    p.add_argument("--variant", default="longrag", help="a longrag variant as bench/multihop.py spells it")
    p.add_argument("--budget", type=int, help="where the misses at this budget are (see above)")
    p.add_argument("--against", help="with --budget: another run's hop-misses JSON; which gold documents moved")
    p.add_argument("--tag", default="")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    variant = parse_variant(args.variant)
    if variant.method != "longrag":
        raise SystemExit(f"variant {args.variant!r}: only longrag variants have a ranked member list")
    embedder = Embedder(threads=1)
    prepared = prepare(root / args.benchmark, REPO / ".rag" / "bench", "title-links", embedder, variant.unit_cap)
    questions = split_halves(args.benchmark, load_questions(root / args.benchmark))[args.half]
    if args.budget:
        from bench.hop_misses import report

        report(prepared, embedder, variant.config, questions, args)
        return
    by_position = ranks(prepared.reader.snapshot(), embedder, prepared.reader.counter, variant.config, questions)
    prepared.close()
    rows, figures = [], {"command": "python bench/hop_ranks.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
                         "half": args.half, "variant": args.variant, "positions": {}}
    for k, found in sorted(by_position.items()):
        listed = np.array([r for r in found if r is not None])
        cell = {"n": len(found), "missing": round(1 - len(listed) / len(found), 3),
                "top8": round(float(np.sum(listed < 8)) / len(found), 3),
                "top20": round(float(np.sum(listed < 20)) / len(found), 3),
                "median_rank_when_listed": float(np.median(listed)) if len(listed) else None}
        figures["positions"][str(k + 1)] = cell
        rows.append([k + 1, cell["n"], cell["missing"], cell["top8"], cell["top20"], cell["median_rank_when_listed"]])
    write_results(figures, f"hop-ranks-{args.benchmark}-{args.half}-{args.variant.replace(':', '_').replace(',', '_')}")
    print(markdown_table(["gold document (hop)", "n", "missing", "top 8", "top 20", "median rank if listed"], rows))


if __name__ == "__main__":
    main()
