"""Serving workers on one host: each one's unique and proportional memory (USS, PSS) with 1, 2 and 4 of them, and a
fresh worker's time to its first answer, for this checkout's code and (`--before DIR`) another's, in one run.

Each worker is a plain process that opens the workspace as `rag serve` does (a `Workspace` with the embedder
loaded), answers `--questions` benchmark questions with LongRAG as a caller of `group-0` (bench/replicated.py's
first group), builds whatever of the read state the questions left unbuilt, then idles while the parent reads
/proc/PID/smaps_rollup: USS is Private_Clean + Private_Dirty, PSS shares each page among the processes mapping it.
Workers start one after another, each once the last has answered. This checkout's read state is written to files by
the first worker (the workspace's `read_state` folder is removed first, so the first worker builds it), which
every later worker maps. Every worker's answers (doc id, version, ranges, score per item) must be the same for
both codes. Writes bench/results/read-state-workers[-TAG].json.

    python bench/read_state_workers.py --workspace .rag/bench/replicated-musique-minilm-110000 \
        --before ../wt-before --tag 110k
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLED = (1, 2, 4)
FIELDS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty", "Shared_Clean")


def child(workspace: Path, questions: list[str]) -> None:
    """One worker (run with the code under test first on PYTHONPATH): open, answer, report, idle until told."""
    wall, cpu = time.perf_counter(), time.process_time()
    from rag.models.embedders import Embedder
    from rag.query.workspace import Workspace
    from rag.retrieval.callers import Caller

    embedder = Embedder(threads=1)
    embedder.encode_query("warm up")
    loaded = (time.perf_counter() - wall, time.process_time() - cpu)
    reader = Workspace(workspace, embedder=embedder)
    caller, answers = Caller(frozenset({"group-0"})), []
    for i, question in enumerate(questions):
        items = reader.retrieve("longrag", caller, question, 2000).items
        answers.append([[x.doc_id, x.doc_version, [list(r) for r in x.ranges], round(x.score, 6)] for x in items])
        if i == 0:
            first = (time.perf_counter() - wall, time.process_time() - cpu)
    reader.snapshot().warm()
    done = (time.perf_counter() - wall, time.process_time() - cpu)
    print(json.dumps({"embedder_seconds": round(loaded[0], 2), "embedder_cpu_seconds": round(loaded[1], 2),
                      "first_answer_seconds": round(first[0], 2), "first_answer_cpu_seconds": round(first[1], 2),
                      "read_state_seconds": round(first[0] - loaded[0], 2),
                      "read_state_cpu_seconds": round(first[1] - loaded[1], 2),
                      "warm_seconds": round(done[0], 2), "warm_cpu_seconds": round(done[1], 2),
                      "answers": hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:16],
                      "items": sum(len(a) for a in answers)}), flush=True)
    sys.stdin.readline()


def memory_mb(pid: int) -> dict:
    """The process's smaps_rollup fields (MB), with USS = Private_Clean + Private_Dirty."""
    found = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        if name in FIELDS:
            found[name] = int(value.split()[0]) / 1024
    found["USS"] = found["Private_Clean"] + found["Private_Dirty"]
    return {k: round(v, 1) for k, v in found.items()}


def run(code: Path, workspace: Path, questions: list[str], workers: int) -> dict:
    """Start `workers` workers of this code one after another; memory of all after the 1st, 2nd and 4th is up."""
    env = os.environ | {"PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    procs, started, samples = [], [], {}
    try:
        for k in range(workers):
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(workspace), "--questions-json",
                                     json.dumps(questions)], cwd=code, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"{code}: worker {k + 1} failed")
            started.append(json.loads(line))
            print(code.name, k + 1, started[-1], flush=True)
            if k + 1 in SAMPLED:
                samples[str(k + 1)] = [memory_mb(p.pid) for p in procs]
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait(timeout=120)
    return {"workers": started, "memory_mb": samples,
            "same_answers": len({w["answers"] for w in started}) == 1}


def summary(result: dict) -> dict:
    """Per sampled count: mean USS and PSS of a worker, and their sums."""
    out = {}
    for n, rows in result["memory_mb"].items():
        out[n] = {"uss_mb_each": [r["USS"] for r in rows], "pss_mb_each": [r["Pss"] for r in rows],
                  "rss_mb_each": [r["Rss"] for r in rows], "pss_mb_total": round(sum(r["Pss"] for r in rows), 1)}
    return out


def part_sizes_mb(state: Path) -> dict[str, float]:
    """Each read-state part's files (MB), over the snapshots the folder holds: what a projection to more rows scales."""
    sizes: dict[str, float] = {}
    for part in (p for p in state.glob("*/*") if p.is_dir()):
        sizes[part.name] = sizes.get(part.name, 0) + sum(f.stat().st_size for f in part.rglob("*") if f.is_file()) / 2**20
    return {name: round(mb, 1) for name, mb in sorted(sizes.items())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, required=False)
    p.add_argument("--benchmark", default="musique", help="the benchmark whose questions are asked")
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--before", type=Path, help="another checkout to compare with (a git worktree of another commit)")
    p.add_argument("--before-workers", type=int, help="workers of the other checkout (default: --workers)")
    p.add_argument("--tag", default="")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--questions-json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, json.loads(args.questions_json))
        return
    sys.path.insert(0, str(REPO))
    from bench.results_file import commit, write_results

    lines = (REPO / "samples" / "benchmarks" / args.benchmark / "questions.jsonl").read_text().splitlines()
    questions = [json.loads(line)["question"] for line in lines[:args.questions]]
    runs = {}
    if args.before:
        runs["before"] = run(args.before.resolve(), args.workspace.resolve(), questions,
                             args.before_workers or args.workers)
    shutil.rmtree(args.workspace / "read_state", ignore_errors=True)
    runs["after"] = run(REPO, args.workspace.resolve(), questions, args.workers)
    state = args.workspace / "read_state"
    shown = ["OTHER_CHECKOUT" if a == str(args.before) else a for a in sys.argv[1:]]
    figures = {"command": "python bench/read_state_workers.py " + " ".join(shown),
               "commits": {"after": commit(str(REPO))} | ({"before": commit(str(args.before))} if args.before else {}),
               "questions": len(questions), "load_average": os.getloadavg(),
               "read_state_files_mb": round(sum(f.stat().st_size for f in state.rglob("*") if f.is_file()) / 2**20, 1),
               "read_state_part_mb": part_sizes_mb(state),
               "same_answers_before_after": len({w["answers"] for r in runs.values() for w in r["workers"]}) == 1,
               "summary": {label: summary(r) for label, r in runs.items()}, "runs": runs}
    write_results(figures, "read-state-workers", args.tag)
    print(json.dumps({k: v for k, v in figures.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
