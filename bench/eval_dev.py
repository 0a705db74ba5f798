"""Retrieval-only nightly run: every dev question of the English benchmarks × every method × every budget.

`--half all` (the default) evaluates every dev question, which is what the nightly wall time is about; figures are
then printed and written per half of the fixed tune/report split (rag.sources.benchmarks.half_of): quote the report half.
`--half tune|report` evaluates one half only. Each benchmark is first brought up to date in its workspace
(incremental; timed apart), then evaluated with `--reader none` through the same code as `rag eval`. Prints
per-benchmark and total evaluation wall time and the figures; writes bench/results/eval-dev-retrieval[-<tag>].json and
each benchmark's report under bench/results/eval/dev-retrieval[-<tag>]/<name>/. `--ann-min-rows N` sets
RAG_ANN_MIN_ROWS for the run (0: dense search walks the IVF at every size; rag.retrieval.ivf); the results record the
setting, each workspace's sub-chunk rows, whether the IVF is used at that size, its lists and the share a search probes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import RESULTS, results_path, write_json  # noqa: E402
from rag.evaluation import METHODS, EvalConfig, Evaluator, prepare_workspace  # noqa: E402
from rag.evaluation.benchmark import evaluate_prepared  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.retrieval import ivf  # noqa: E402
from rag.sources.benchmarks import HALVES, add_benchmarks_option, benchmarks_option, half_of  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--names", default="hotpotqa,musique,2wikimultihopqa", help="benchmark folders to run")
    parser.add_argument("--methods", default=",".join(METHODS), help="default: every registered method")
    parser.add_argument("--budgets", default="1000,2000,4000,8000")
    parser.add_argument("--limit", type=int, help="first N questions of the half (default: all of it)")
    parser.add_argument("--half", choices=(*HALVES, "all"), default="all",
                        help="tune only to choose settings; report to quote; all: every dev question, figures per half")
    parser.add_argument("--workspace-root", default=str(REPO / ".rag" / "bench"))
    parser.add_argument("--ann-min-rows", type=int,
                        help="RAG_ANN_MIN_ROWS for the run: rows from which dense search uses the IVF (0: always)")
    parser.add_argument("--tag", default="", help="suffix of the results file and report folder (e.g. ann-forced)")
    parser.add_argument("--out", help="results file (default: bench/results/eval-dev-retrieval[-<tag>].json)")
    add_benchmarks_option(parser)
    args = parser.parse_args()
    if args.ann_min_rows is not None:  # before any read state is built: the setting decides whether it holds an IVF
        os.environ["RAG_ANN_MIN_ROWS"] = str(args.ann_min_rows)
    out_file = args.out or results_path("eval-dev-retrieval", args.tag)
    root = benchmarks_option(parser, args)
    config = EvalConfig(tuple(args.methods.split(",")), tuple(int(b) for b in args.budgets.split(",")), args.limit)
    embedder, counter = Embedder(threads=1), default_counter()
    figures = {"command": "python bench/eval_dev.py " + " ".join(sys.argv[1:]), "cpus": os.cpu_count(),
               "load_average_at_start": os.getloadavg(), "methods": list(config.methods),
               "budgets": list(config.budgets), "half": args.half, "ann_min_rows": ivf.ann_min_rows(),
               "benchmarks": {}}
    total = 0.0
    for name in args.names.split(","):
        start = time.perf_counter()
        prepared = prepare_workspace(root / name, Path(args.workspace_root) / name, embedder, counter)
        ingest = time.perf_counter() - start
        start = time.perf_counter()
        out = RESULTS / "eval" / f"dev-retrieval{'-' + args.tag if args.tag else ''}" / name
        rows = prepared.subchunks
        questions = half_questions(root / name, args.half, Path(args.workspace_root))
        outcome = evaluate_prepared(Evaluator(config, embedder, counter, command=figures["command"]), prepared,
                                    questions, out)
        wall = time.perf_counter() - start
        total += wall
        s = outcome.summary
        by_half = {h: half_cells(outcome.evaluation.rows, name, h) for h in HALVES}
        figures["benchmarks"][name] = {
            "questions": s["questions"], "ingest_wall_s": round(ingest, 1), "evaluation_wall_s": round(wall, 1),
            "subchunk_rows": rows, "ivf": ivf_size(rows),
            "retrieval_rows": len(outcome.evaluation.rows), "prepare": {m: v["prepare_parts"]
                                                                        for m, v in s["methods"].items()},
            "halves": {h: cells for h, cells in by_half.items() if cells}}
        print(f"{name}: {s['questions']} questions, evaluation {wall:.0f} s (ingest {ingest:.0f} s)", flush=True)
        for h, cells in figures["benchmarks"][name]["halves"].items():
            print(f"{h} half ({cells[0]['completeness']['n']} questions):")
            print(markdown_table(["method", "budget", "completeness", "evidence recall", "retrieve s mean"],
                                 [[c["method"], c["budget"], _ci(c["completeness"]), _ci(c["evidence_recall"]),
                                   f"{c['retrieve_s']:.3f}"] for c in cells]), flush=True)
        write_json(out_file, figures | {"evaluation_wall_s_total": round(total, 1)})
    figures["evaluation_wall_s_total"] = round(total, 1)
    figures["load_average_at_end"] = os.getloadavg()
    write_json(out_file, figures)
    print(f"total evaluation wall time: {total:.0f} s ({total / 60:.1f} min) for "
          f"{sum(b['questions'] for b in figures['benchmarks'].values())} questions; load average "
          f"{figures['load_average_at_start']} at start")


def ivf_size(rows: int) -> dict:
    """The IVF of this many rows: whether dense search walks it (RAG_ANN_MIN_ROWS), its lists, the lists a search
    probes at least and the share of the rows those hold on average."""
    lists = ivf.list_count(rows)
    probed = min(ivf.NPROBE, lists)
    return {"used": rows >= max(ivf.ann_min_rows(), 1), "lists": lists, "probed_lists": probed,
            "probed_share": round(probed / lists, 3)}


def half_cells(rows, name: str, half: str) -> list[dict]:
    """Completeness and evidence recall (bootstrap intervals) and mean retrieval seconds per method × budget,
    over the rows of one half."""
    groups: dict[tuple[str, int], list] = {}
    for r in rows:
        if half_of(name, r.qid) == half:
            groups.setdefault((r.method, r.budget), []).append(r)
    return [{"method": m, "budget": b, "completeness": bootstrap_ci([r.complete for r in rs]).to_json(),
             "evidence_recall": bootstrap_ci([r.evidence_recall for r in rs]).to_json(),
             "tokens_mean": round(sum(r.tokens for r in rs) / len(rs), 1),
             "retrieve_s": round(sum(r.retrieve_s for r in rs) / len(rs), 4)} for (m, b), rs in groups.items()]


def half_questions(folder: Path, half: str, workdir: Path) -> Path:
    """The benchmark's questions of one half (or all), as a questions.jsonl the evaluation reads (file order kept)."""
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    path = workdir / f"{folder.name}-{half}-questions.jsonl"
    kept = [line for line in lines if line.strip() and half in ("all", half_of(folder.name, json.loads(line)["qid"]))]
    path.write_text("".join(line + "\n" for line in kept))
    return path


def _ci(v: dict | None) -> str:
    return f"{v['mean']:.3f} [{v['low']:.3f}, {v['high']:.3f}]" if v else "–"


if __name__ == "__main__":
    main()
