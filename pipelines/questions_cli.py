"""`rag questions generate`: write a workspace's questions.jsonl with the configured LLM, filtered by an LLM judge."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_questions_parser(subparsers) -> argparse.ArgumentParser:
    """Register `rag questions generate` on the `rag` sub-command parsers."""
    p = subparsers.add_parser("questions", help="generate an evaluation question set for a workspace")
    sub = p.add_subparsers(dest="questions_command", required=True)
    g = sub.add_parser(
        "generate", help="write single- and multi-document questions from the workspace's units",
        description="An LLM writes questions (with their gold documents) from the published workspace's long "
                    "units; a question is kept only if the LLM judges it answerable from its gold documents and, "
                    "for a multi-document question, from neither document alone. Writes the benchmark format "
                    "with asked_as (the groups that may read every gold document), ready for `rag eval "
                    "--questions`.")
    g.add_argument("--workspace", required=True, metavar="DIR", help="a published workspace (read only)")
    g.add_argument("--lance-uri", help="LanceDB location if not <workspace>/lancedb")
    g.add_argument("--reader", choices=("local", "endpoint"), default="local",
                   help="the LLM: local (embedded llama.cpp; default) or endpoint (OPENAI_BASE_URL)")
    g.add_argument("--single", type=int, default=10, metavar="N", help="single-document questions to attempt")
    g.add_argument("--multi", type=int, default=10, metavar="N", help="multi-document questions to attempt")
    g.add_argument("--seed", type=int, default=0, help="which units and pairs are tried (default 0)")
    g.add_argument("--out", required=True, metavar="FILE", help="the questions.jsonl to write")
    g.set_defaults(func=cmd_generate)
    return p


def cmd_generate(args: argparse.Namespace) -> int:
    from pipelines.errors import CliError
    from rag.answer.llm import LLMError, chat_model
    from rag.answer.question_generation import GenerationConfig, generate_questions, write_jsonl
    from rag.query.workspace import Workspace, WorkspaceError

    if min(args.single, args.multi) < 0:
        raise CliError("--single and --multi must not be negative")
    try:
        reader = Workspace(args.workspace, lance_uri=args.lance_uri)
        try:
            made = generate_questions(reader.snapshot(), chat_model(args.reader),
                                      GenerationConfig(args.single, args.multi, args.seed))
        finally:
            reader.close()
    except (WorkspaceError, LLMError, ValueError) as err:
        raise CliError(str(err)) from None
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out, made.questions)
    reasons: dict[str, int] = {}
    for r in made.rejected:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    print(f"kept {len(made.questions)} of {len(made.questions) + len(made.rejected)} questions "
          f"({made.calls} LLM calls, {made.input_tokens} input and {made.output_tokens} output tokens) → {args.out}")
    for reason, n in sorted(reasons.items()):
        print(f"  rejected {n}: {reason}")
    return 0
