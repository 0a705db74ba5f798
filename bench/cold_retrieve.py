"""A cold `rag retrieve` as a whole process: wall and CPU seconds, peak memory (GNU time), before and after, interleaved.

Runs `python -m pipelines.cli retrieve … --json` on the demo workspace (`rag demo` builds it) from this checkout
and, with `--before DIR`, from another checkout (a git worktree of the commit before a change), alternating
A, B, A, B so load from other jobs hits both alike. Also lists which heavy modules each imported
(`python -X importtime`). `--bytecode` lets each run read compiled modules, as an installed package does, where the
environment sets PYTHONDONTWRITEBYTECODE. Writes bench/results/cold-retrieve[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402

HEAVY = ("torch", "transformers", "sentence_transformers", "dagster", "onnxruntime", "openvino", "lancedb", "duckdb")
QUESTION = "How long does the offline cache hold telemetry?"


def run(code: Path, workspace: Path, importtime: bool = False, bytecode: Path | None = None
        ) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    cmd = [sys.executable, *flags, "-m", "pipelines.cli", "retrieve", QUESTION, "--workspace", str(workspace),
           "--groups", "support", "--budget", "2000", "--json"]
    if not importtime:
        cmd = ["/usr/bin/time", "-v", *cmd]
    return subprocess.run(cmd, cwd=code, capture_output=True, text=True, env=environment(code, bytecode))


def environment(code: Path, bytecode: Path | None) -> dict[str, str]:
    """This process's environment for a run of `code`; with `bytecode`, compiled modules are written to and read
    from that folder, as an installed package has them (PYTHONDONTWRITEBYTECODE would have every run compile the
    project's modules from source)."""
    env = os.environ | {"PYTHONPATH": str(code)}
    if bytecode is None:
        return env
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env | {"PYTHONPYCACHEPREFIX": str(bytecode)}


def measure(code: Path, workspace: Path, bytecode: Path | None = None) -> dict:
    out = run(code, workspace, bytecode=bytecode)
    if out.returncode:
        raise SystemExit(f"{code}: rag retrieve failed: {out.stderr.strip().splitlines()[-1]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", out.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    cpu = sum(float(re.search(rf"{k} time \(seconds\): ([\d.]+)", out.stderr).group(1)) for k in ("User", "System"))
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_mb": int(rss.group(1)) / 1024,
            "items": len(json.loads(out.stdout)["items"])}


def imported(code: Path, workspace: Path) -> list[str]:
    err = run(code, workspace, importtime=True).stderr
    names = {line.split("|")[-1].strip().split(".")[0] for line in err.splitlines() if line.startswith("import time:")}
    return sorted(n for n in HEAVY if n in names)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, default=REPO / ".rag" / "demo")
    p.add_argument("--before", type=Path, help="another checkout to compare with (a git worktree of another commit)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--tag", default="", help="suffix of the results file (e.g. before, after)")
    p.add_argument("--bytecode", action="store_true",
                   help="runs read compiled modules (each checkout's own cache under .rag/bench, filled by one "
                        "untimed run) even where PYTHONDONTWRITEBYTECODE is set")
    args = p.parse_args()
    codes = {"after": REPO} | ({"before": args.before} if args.before else {})
    caches = {label: REPO / ".rag" / "bench" / f"pycache-{label}" if args.bytecode else None for label in codes}
    for label, code in codes.items():
        if caches[label] is not None:
            measure(code, args.workspace, caches[label])  # compiles every module once, untimed
    runs = {k: [] for k in codes}
    for _ in range(args.runs):
        for label, code in codes.items():
            runs[label].append(measure(code, args.workspace, caches[label]))
    figures = {"command": "python bench/cold_retrieve.py " + " ".join(sys.argv[1:]), "runs": args.runs,
               "bytecode": args.bytecode, "load_average": os.getloadavg(),
               "results": {label: {"seconds_median": round(float(np.median([r["seconds"] for r in rs])), 2),
                                   "seconds_min": round(min(r["seconds"] for r in rs), 2),
                                   "cpu_seconds_median": round(float(np.median([r["cpu_seconds"] for r in rs])), 2),
                                   "peak_mb_median": round(float(np.median([r["peak_mb"] for r in rs]))),
                                   "heavy_imports": imported(codes[label], args.workspace),
                                   "same_items": len({r["items"] for r in rs}) == 1}
                           for label, rs in runs.items()}}
    write_results(figures, "cold-retrieve", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
