"""`rag eval`: the retrieval methods side by side under matched budgets, on a benchmark folder or a workspace's own
question set."""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from pipelines.errors import CliError

READERS = ("none", "local", "endpoint")


def add_eval_parser(subparsers) -> argparse.ArgumentParser:
    """Register `rag eval` and its handler on the `rag` sub-command parsers."""
    from rag.query.methods import METHODS

    p = subparsers.add_parser(
        "eval", help="evaluate retrieval methods on a benchmark folder or a workspace's questions",
        description="With --benchmark: ingest a benchmark folder (docs.jsonl + questions.jsonl; links derived from "
                    "titles, one default ACL) into --workspace and evaluate it. With --questions: evaluate the "
                    "published workspace as it is (its real catalog and index; nothing is ingested) on that "
                    "question set, each question asked as its `asked_as`. Writes results.jsonl, results.duckdb, "
                    "summary.json, report.md and PNG plots to --out.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--benchmark", metavar="DIR",
                        help="a folder in the benchmark format: docs.jsonl and questions.jsonl with gold document ids")
    source.add_argument("--questions", metavar="FILE",
                        help="a workspace's questions.jsonl (benchmark format, optionally with asked_as and expect)")
    p.add_argument("--workspace", required=True, metavar="DIR",
                   help="the workspace: with --benchmark, re-runs are incremental; with --questions, only read")
    p.add_argument("--lance-uri", help="LanceDB location if not <workspace>/lancedb")
    p.add_argument("--users-file", metavar="FILE", help="users → groups, for questions asked as a user name")
    p.add_argument("--groups", type=_names, metavar="G1,G2",
                   help="the caller of questions without asked_as (default: the benchmark group 'bench')")
    p.add_argument("--methods", default=",".join(METHODS), type=_names,
                   help="comma-separated, from: " + "; ".join(f"{m.name} ({m.summary})" for m in METHODS.values())
                        + " (default: all of them)")
    p.add_argument("--budgets", default="1000,2000,4000,8000", type=_numbers,
                   help="comma-separated context budgets in MiniLM tokens; every method gets at most each "
                        "(default: 1000,2000,4000,8000)")
    p.add_argument("--reader", choices=READERS, default="none",
                   help="none (retrieval only: evidence, completeness, tokens, latency; default), local (embedded "
                        "llama.cpp: use --answer-sample) or endpoint (OPENAI_BASE_URL)")
    p.add_argument("--answer-sample", type=int, metavar="N",
                   help="the reader answers N questions, drawn per question type and hop count in proportion "
                        "(seeded); retrieval metrics cover all")
    p.add_argument("--answer-budgets", type=_numbers, metavar="B1,B2",
                   help="budgets the reader answers at (default: all budgets)")
    p.add_argument("--sample-seed", type=int, default=0, help="seed of the answer sample (default 0)")
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
    source = ["--benchmark", args.benchmark] if args.benchmark else ["--questions", args.questions]
    parts = ["rag", "eval", *source, "--workspace", args.workspace,
             "--methods", ",".join(args.methods), "--budgets", ",".join(map(str, args.budgets)),
             "--reader", args.reader, "--elite-policy", args.elite_policy, "--embedder", args.embedder,
             "--out", args.out]
    for flag, value in (("--limit", args.limit), ("--answer-sample", args.answer_sample),
                        ("--answer-budgets", ",".join(map(str, args.answer_budgets or ())) or None),
                        ("--sample-seed", args.sample_seed or None), ("--lance-uri", args.lance_uri),
                        ("--users-file", args.users_file), ("--groups", ",".join(args.groups or ()) or None)):
        if value is not None:
            parts += [flag, str(value)]
    return shlex.join(parts)


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation and print the headline table; bad input becomes a one-line error (exit 2)."""
    import duckdb

    from rag.answer.llm import LLMError, chat_model
    from rag.evaluation import (
        BudgetExceeded,
        EvalConfig,
        Evaluator,
        MethodUnavailable,
        QuestionsError,
        evaluate_benchmark,
        evaluate_workspace,
    )
    from rag.models.embedders import load_embedder
    from rag.models.tokens import default_counter
    from rag.query.workspace import WorkspaceError
    from rag.retrieval.callers import UsersFileError, load_users, resolve_caller
    from rag.store.catalog import CatalogError
    from rag.store.publish import NothingToPublish

    if args.benchmark and not Path(args.benchmark).is_dir():
        raise CliError(f"{args.benchmark}: no such folder")
    try:
        config = EvalConfig(args.methods, args.budgets, args.limit, args.answer_sample, args.elite_policy,
                            args.answer_budgets, args.sample_seed)
        ev = Evaluator(config, load_embedder(args.embedder, threads=1), default_counter(),
                       None if args.reader == "none" else chat_model(args.reader), command_line(args),
                       load_users(args.users_file) if args.users_file else {},
                       resolve_caller(groups=args.groups) if args.groups else None)
        if args.benchmark:
            outcome = evaluate_benchmark(ev, Path(args.benchmark), Path(args.workspace), Path(args.out),
                                         args.lance_uri)
        else:
            outcome = evaluate_workspace(ev, Path(args.workspace).name, Path(args.workspace), Path(args.questions),
                                         Path(args.out), args.lance_uri)
    except (ValueError, FileNotFoundError, LLMError, NothingToPublish, MethodUnavailable, BudgetExceeded,
            QuestionsError, UsersFileError, WorkspaceError, CatalogError) as err:
        raise CliError(str(err)) from None
    except duckdb.IOException as err:  # typically another process holds the workspace's catalog open
        raise CliError(f"{args.workspace}: {str(err).splitlines()[0]}") from None
    _print_headline(outcome.summary, outcome.files.report_md)
    return 0


def _print_headline(summary: dict, report: Path) -> None:
    from rag.text.tables import markdown_table

    def mean(value: dict | None) -> str:
        return f"{value['mean']:.3f}" if value else "–"

    print(f"{summary['benchmark']}: {summary['questions']} questions, reader {summary['reader']} "
          f"({summary['answered']} answered), {summary['evaluation_seconds']:.0f} s")
    print(markdown_table(["method", "budget", "tokens mean/max", "evidence recall", "completeness", "expectations",
                          "F1", "AvgQueryTime s"],
                         [[c["method"], c["budget"], f"{c['tokens_mean']:.0f}/{c['tokens_max']}",
                           mean(c["evidence_recall"]), mean(c["completeness"]), mean(c["expectation_met"]),
                           mean(c["f1"]), c["avg_query_seconds"]] for c in summary["results"]]))
    if summary["expectations"]:
        print(f"{len(summary['expectations'])} expectation failures (see the report)")
    print(f"Report: {report}")
