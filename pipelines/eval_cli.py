"""`rag eval`: LongRAG, ELITE and the short-chunk baseline side by side on a benchmark folder, under matched budgets."""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from pipelines.errors import CliError

READERS = ("extractive", "local", "endpoint")


def add_eval_parser(subparsers) -> argparse.ArgumentParser:
    """Register `rag eval` and its handler on the `rag` sub-command parsers."""
    p = subparsers.add_parser(
        "eval", help="evaluate retrieval methods on a benchmark folder under matched token budgets",
        description="Ingest a benchmark folder (docs.jsonl + questions.jsonl; links derived from titles, one "
                    "default ACL), run every question through every method at every budget, and write "
                    "results.jsonl, results.duckdb, summary.json, report.md and PNG plots to --out.")
    p.add_argument("--benchmark", required=True, metavar="DIR",
                   help="a folder in the benchmark format: docs.jsonl and questions.jsonl with gold document ids")
    p.add_argument("--workspace", required=True, metavar="DIR",
                   help="workspace for the benchmark's catalog and index; re-runs are incremental")
    p.add_argument("--lance-uri", help="LanceDB location if not <workspace>/lancedb")
    p.add_argument("--methods", default="longrag,elite", type=_names,
                   help="comma-separated: longrag, elite, shortchunk (the top sub-chunks; the baseline) "
                        "(default: longrag,elite)")
    p.add_argument("--budgets", default="1000,2000,4000,8000", type=_numbers,
                   help="comma-separated context budgets in MiniLM tokens; every method gets at most each "
                        "(default: 1000,2000,4000,8000)")
    p.add_argument("--reader", choices=READERS, default="extractive",
                   help="extractive (no LLM; default), local (embedded llama.cpp: use --answer-sample) or "
                        "endpoint (OPENAI_BASE_URL)")
    p.add_argument("--answer-sample", type=int, metavar="N",
                   help="the reader answers only N questions (a fixed sample); retrieval metrics cover all")
    p.add_argument("--elite-policy", choices=("offline", "reader"), default="offline",
                   help="who drives ELITE's exploration: the deterministic offline policy (default) or the "
                        "reader's LLM")
    p.add_argument("--embedder", choices=("minilm", "use-multilingual"), default="minilm",
                   help="embedder of the benchmark's workspace (use-multilingual for Chinese; default: minilm)")
    p.add_argument("--limit", type=int, metavar="N", help="the first N questions only")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the report files")
    p.set_defaults(func=cmd_eval)
    return p


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _numbers(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _names(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None


def command_line(args: argparse.Namespace) -> str:
    """The exact command, flags in a fixed order, for the report to repeat."""
    parts = ["rag", "eval", "--benchmark", args.benchmark, "--workspace", args.workspace,
             "--methods", ",".join(args.methods), "--budgets", ",".join(map(str, args.budgets)),
             "--reader", args.reader, "--elite-policy", args.elite_policy, "--embedder", args.embedder,
             "--out", args.out]
    for flag, value in (("--limit", args.limit), ("--answer-sample", args.answer_sample),
                        ("--lance-uri", args.lance_uri)):
        if value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts)


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation and print the headline table; bad input becomes a one-line error (exit 2)."""
    import duckdb

    from rag.embedding import load_embedder
    from rag.evaluation import BudgetExceeded, EvalConfig, MethodUnavailable, evaluate_benchmark
    from rag.llm import LLMError, chat_model
    from rag.publish import NothingToPublish
    from rag.tokens import default_counter

    if not Path(args.benchmark).is_dir():
        raise CliError(f"{args.benchmark}: no such folder")
    try:
        config = EvalConfig(args.methods, args.budgets, args.limit, args.answer_sample, args.elite_policy)
        model = chat_model(args.reader)
        outcome = evaluate_benchmark(Path(args.benchmark), Path(args.workspace), Path(args.out), config,
                                     load_embedder(args.embedder, threads=1), default_counter(), model, command_line(args),
                                     args.lance_uri)
    except (ValueError, FileNotFoundError, LLMError, NothingToPublish, MethodUnavailable, BudgetExceeded) as err:
        raise CliError(str(err)) from None
    except duckdb.IOException as err:  # typically another process holds the workspace's catalog open
        raise CliError(f"{args.workspace}: {str(err).splitlines()[0]}") from None
    _print_headline(outcome.summary, outcome.files.report_md)
    return 0


def _print_headline(summary: dict, report: Path) -> None:
    from rag.summary import markdown_table

    def mean(value: dict | None) -> str:
        return f"{value['mean']:.3f}" if value else "–"

    print(f"{summary['benchmark']}: {summary['questions']} questions, reader {summary['reader']} "
          f"({summary['answered']} answered), {summary['evaluation_seconds']:.0f} s")
    print(markdown_table(["method", "budget", "tokens mean/max", "evidence recall", "completeness", "F1",
                          "AvgQueryTime s"],
                         [[c["method"], c["budget"], f"{c['tokens_mean']:.0f}/{c['tokens_max']}",
                           mean(c["evidence_recall"]), mean(c["completeness"]), mean(c["f1"]),
                           c["avg_query_seconds"]] for c in summary["results"]]))
    print(f"Report: {report}")
