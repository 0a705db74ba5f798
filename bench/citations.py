"""Citations of the reader's answers: EM and F1 with 95% intervals, citations valid and locatable, citation recall
and precision against the gold documents (ALCE-style), the attributed share, short-answer support, seconds per
answer.

Three sets:
- `sample`: the sample questions on the demo workspace through `rag eval --questions` exactly as a user runs it,
  with the code of `--code DIR` (another checkout, for before/after on one machine); `--summary FILE` reads the
  summary.json of a run already made with the same command instead of running it.
- `benchmark`: `--n` questions of a benchmark's report half, or of its tune half with `--half tune` (for developing
  citation rules on questions that are never reported; rag.sources.benchmarks.half_of; drawn per type × hops,
  seeded), ingested into `--workspace-root` when needed. Each row keeps the model's replies as written. `--skip`
  leaves out the questions of a smaller draw already answered, so a draw grows in parts (recite joins them).
- `recite`: the replies `benchmark` runs recorded (`--recorded` their results.jsonl), checked again with the
  citation rules of `--code DIR` (default: this checkout): two rule sets compared on the same replies, in one run,
  without the reader. EM and F1 are the recorded run's (the short answers are the same); seconds per answer too.

`benchmark` and `recite` also split the gold documents cited between the answers right (F1 ≥ 0.5) and wrong, with
the gold documents in their context: a wrong answer's citations back what it says, so the split tells how much of a
shortfall is the reader's.

Writes bench/results/citations-<benchmark>[-tune][-recite][-<tag>].json (citations-sample[-<tag>].json).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import RESULTS, commit, mean_of, write_results  # noqa: E402

if os.environ.get("RAG_CODE"):  # recite --code: that checkout's `rag` checks the replies; results stay here
    sys.path.insert(0, os.environ["RAG_CODE"])

FIGURES = ("exact_match", "f1", "citations_valid", "citation_locatable", "citation_recall", "citation_precision",
           "citations_attributed", "short_answer_supported", "abstained", "cited_gold", "generate_s")
RIGHT_F1 = 0.5  # an answer at least this close to the gold one counts as right in the split of citation recall
SAMPLE_ARGS = ("--questions", "samples/questions.jsonl", "--users-file", "samples/users.yaml", "--reader", "local",
               "--answer-sample", "16", "--methods", "longrag", "--budgets", "2000")


def cells(summary: dict) -> list[dict]:
    """The figures of every answered cell (those the reader answered in), intervals kept; absent ones as None."""
    return [{"method": c["method"], "budget": c["budget"], "n": c["n"], **{k: c.get(k) for k in FIGURES}}
            for c in summary["results"] if c.get("generate_s")]


def by_answer(report: str, method: str, budget: int) -> dict:
    """Gold documents cited by the answers right (F1 ≥ RIGHT_F1) and wrong, and gold documents in their context: a
    wrong answer's citations back what it says, not the gold documents, so the split shows the reader's share."""
    rows = [json.loads(line) for line in (RESULTS / "eval" / report / "results.jsonl").read_text().splitlines()
            if line.strip()]
    rows = [r for r in rows if r["method"] == method and r["budget"] == budget and r["citation_recall"] is not None]
    out = {}
    for name, group in (("right", [r for r in rows if r["f1"] >= RIGHT_F1]),
                        ("wrong", [r for r in rows if r["f1"] < RIGHT_F1])):
        out[name] = {"n": len(group), "citation_recall": mean_of(r["citation_recall"] for r in group),
                     "gold_in_context": mean_of(r["evidence_recall"] for r in group)}
    return out


def run_sample(code: Path, workspace: Path, out: Path) -> dict:
    """`rag eval` on the sample questions with the code in `code`; the demo workspace is built first if missing."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    rag = [sys.executable, "-m", "pipelines.cli"]
    if not (workspace / "catalog.duckdb").exists():
        subprocess.run([*rag, "demo", "--workspace", str(workspace)], cwd=code, env=env, check=True)
    subprocess.run([*rag, "eval", *SAMPLE_ARGS, "--workspace", str(workspace), "--out", str(out)], cwd=code,
                   env=env, check=True)
    return json.loads((out / "summary.json").read_text())


def run_benchmark(args: argparse.Namespace, root: Path) -> tuple[dict, list[str]]:
    """The evaluation of `--n` questions of `--benchmark`'s `--half`, with the local reader."""
    from rag.answer.llm import chat_model
    from rag.evaluation import EvalConfig, load_questions
    from rag.evaluation.run import answer_sample
    from rag.sources.benchmarks import half_of

    name = args.benchmark
    in_half = [q for q in load_questions(root / name / "questions.jsonl") if half_of(name, q.qid) == args.half]
    chosen = answer_sample(in_half, args.n, args.seed)
    skipped = questions_of(args.skip) if args.skip else set()
    questions = [q for q in in_half if q.qid in chosen and q.qid not in skipped]
    config = EvalConfig(tuple(args.methods.split(",")), (args.budget,))
    summary = evaluated(args, root, questions, config, chat_model(args.reader), report_name(args))
    return summary, [q.qid for q in questions]


def evaluated(args: argparse.Namespace, root: Path, questions: list, config, chat, report: str) -> dict:
    """The questions evaluated on `--benchmark`'s workspace with this chat model; the report written to `report`."""
    from rag.evaluation import Evaluator, evaluate, summarise, write_report
    from rag.evaluation.prepared import prepare_workspace
    from rag.models.embedders import Embedder
    from rag.models.tokens import default_counter

    embedder, counter = Embedder(threads=1), default_counter()
    prepared = prepare_workspace(root / args.benchmark, Path(args.workspace_root) / args.benchmark, embedder, counter)
    try:
        evaluation = evaluate(prepared, questions, Evaluator(config, embedder, counter, chat))
        summary = summarise(evaluation, prepared, command())
    finally:
        prepared.close()
    write_report(RESULTS / "eval" / report, evaluation, summary)
    return summary


class Replay:
    """A chat model answering each question with the replies a run recorded for it (long answer, then short)."""

    kind = "local"

    def __init__(self, name: str, replies: dict[str, list[str]], schema_output: bool = True):
        self.name, self.replies, self.schema_output = name, replies, schema_output  # as the recorded reader asked

    def complete(self, messages: list[dict], *, max_tokens: int = 256, json_object: bool = False,
                 schema: dict | None = None):
        from rag.answer.llm import Completion

        asked = messages[-1]["content"]
        if asked.startswith("Question: ") and "\nLong answer: " in asked:  # the reader's second, short-answer call
            text = self.replies[asked[len("Question: "):asked.index("\nLong answer: ")]][1]
        else:
            text = self.replies[asked.rsplit("\n\nQuestion: ", 1)[1]][0]
        return Completion(text, 0, 0, 0.0, self.name)


def run_recite(args: argparse.Namespace, root: Path) -> tuple[dict, list[str]]:
    """The recorded rows' replies checked with this process's citation rules, on the same retrieval."""
    from rag.evaluation import EvalConfig, load_questions

    name = args.benchmark
    rows = [json.loads(line) for recorded in args.recorded for line in Path(recorded).read_text().splitlines()
            if line.strip()]
    rows = [r for r in rows if r["method"] in args.methods.split(",") and r["budget"] == args.budget]
    if args.same_questions:  # another method's run on a subset: both compared on the same questions
        kept = questions_of(args.same_questions)
        rows = [r for r in rows if r["qid"] in kept]
    if len({r["method"] for r in rows}) != 1:
        raise SystemExit(f"{' '.join(args.recorded)}: recite takes the rows of one method at --budget {args.budget}")
    if any(r.get("replies") is None for r in rows if r["answered"]):
        raise SystemExit(f"{' '.join(args.recorded)}: its rows keep no replies (recorded before replies were kept)")
    asked = {q.qid: q for q in load_questions(root / name / "questions.jsonl")}
    questions = [asked[r["qid"]] for r in rows]
    replies = {asked[r["qid"]].question: r["replies"] for r in rows if r["answered"]}
    summary = evaluated(args, root, questions, EvalConfig((rows[0]["method"],), (args.budget,)),
                        Replay(args.model, replies), report_name(args))
    recorded = [r["generate_s"] for r in rows if r.get("generate_s")]
    for cell in summary["results"]:
        cell["generate_s"] = {"mean": sum(recorded) / len(recorded)} if recorded else None
    return summary, [q.qid for q in questions]


def questions_of(run: str) -> set[str]:
    """The qids another run's results file answered."""
    return set(json.loads(Path(run).read_text())["questions"])


def report_name(args: argparse.Namespace) -> str:
    """The name a run's files take: citations-<benchmark>[-tune][-recite][-<tag>] (or citations-sample[-<tag>])."""
    if args.set == "sample":
        return "citations-sample" + (f"-{args.tag}" if args.tag else "")
    parts = [args.benchmark, "tune" if args.half == "tune" else "", "recite" if args.set == "recite" else "", args.tag]
    return "-".join(["citations", *filter(None, parts)])


def command() -> str:
    model = os.environ.get("RAG_LOCAL_MODEL")  # the embedded reader chosen, when not the default
    return (f"RAG_LOCAL_MODEL={model} " if model else "") + "python bench/citations.py " + " ".join(sys.argv[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("set", choices=("sample", "benchmark", "recite"))
    parser.add_argument("--code", default=str(REPO), help="sample: the checkout whose `rag eval` runs; recite: "
                                                          "the checkout whose citation rules check the replies")
    parser.add_argument("--recorded", nargs="+", help="recite: the results.jsonl of `benchmark` runs (a draw "
                                                      "answered in parts with --skip: each part's)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m", help="recite: the recorded reader")
    parser.add_argument("--same-questions", help="recite: only the questions of this results file (another run's)")
    parser.add_argument("--skip", help="benchmark: leave out the questions of this results file (a run of the same "
                                       "draw at a smaller --n): a draw grows without answering them again")
    parser.add_argument("--summary", help="sample: the summary.json of a run already made with the same command")
    parser.add_argument("--workspace", default=str(REPO / ".rag" / "bench" / "citations-demo"))
    parser.add_argument("--benchmark", default="hotpotqa")
    parser.add_argument("--n", type=int, default=32, help="benchmark: questions drawn from the half")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--half", default="report", choices=("report", "tune"),
                        help="benchmark: the half drawn from (tune: for developing rules; never reported)")
    parser.add_argument("--methods", default="longrag")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--reader", default="local", choices=("local", "endpoint"))
    parser.add_argument("--workspace-root", default=str(REPO / ".rag" / "bench"))
    parser.add_argument("--tag")
    from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option

    add_benchmarks_option(parser)
    args = parser.parse_args()
    start = time.perf_counter()
    figures: dict = {"command": command(), "set": args.set}
    if args.set == "sample":
        summary = json.loads(Path(args.summary).read_text()) if args.summary else run_sample(
            Path(args.code), Path(args.workspace), Path(args.workspace).with_name("citations-demo-eval"))
        figures["eval_command"] = "rag eval " + " ".join(SAMPLE_ARGS)
    elif args.set == "recite" and Path(args.code).resolve() != Path(os.environ.get("RAG_CODE", REPO)).resolve():
        env = {**os.environ, "RAG_CODE": str(Path(args.code).resolve())}
        raise SystemExit(subprocess.run([sys.executable, *sys.argv], env=env, check=False).returncode)
    else:
        run = run_recite if args.set == "recite" else run_benchmark
        summary, qids = run(args, benchmarks_option(parser, args))
        figures |= {"benchmark": args.benchmark, "half": args.half, "seed": args.seed, "questions": qids,
                    "rules_commit": commit(args.code)}
    wall = summary["evaluation_seconds"] if args.summary else time.perf_counter() - start  # the run's, not the read's
    figures |= {"reader": summary["reader"], "wall_s": round(wall, 1),
                "load_average": os.getloadavg(), "cells": cells(summary)}
    if args.set != "sample":
        for c in figures["cells"]:
            c["citation_recall_by_answer"] = by_answer(report_name(args), c["method"], c["budget"])
    out = write_results(figures, report_name(args))
    for c in figures["cells"]:
        shown = "  ".join(f"{k} {c[k]['mean']:.3f}" + (f" [{c[k]['low']:.3f}, {c[k]['high']:.3f}]"
                                                       if k in ("exact_match", "f1") else "")
                          for k in FIGURES if c.get(k))
        print(f"{c['method']} @{c['budget']} (n={c['n']}): {shown}")
        for name, group in c.get("citation_recall_by_answer", {}).items():
            print(f"  answers {name} (n={group['n']}): gold documents cited {group['citation_recall']}, "
                  f"in the context {group['gold_in_context']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
