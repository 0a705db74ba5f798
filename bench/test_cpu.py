"""CPU seconds and wall time of chosen test modules (pytest and every process it starts), in several checkouts, run
alternately in the same order (before, after, before, after, …): the suite's cost where a change touched it.

Each run is one pytest process over all the given tests together, as one xdist worker would run them (so the
embedder's memo warms as it does in the suite), with one thread per process as under `make test`:

    python bench/test_cpu.py --repos ../other-checkout . --rounds 1 --tag cli -- tests/interfaces/test_cli.py

`--wrappers none eatmydata` runs each checkout's tests bare and then under a wrapper command, alternately.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402


def timed_pytest(repo: Path, args: list[str], env: dict[str, str], wrapper: list[str] = ()) -> dict:
    """One pytest process in `repo` (its code first on the path, `env` added, no DAGSTER_HOME): its wall seconds,
    the CPU seconds of it and its children, its return code and summary line, and its output's lines."""
    env = {**os.environ, "PYTHONPATH": str(repo), **env}
    env.pop("DAGSTER_HOME", None)
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    command = [*wrapper, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = done.stdout.strip().splitlines()
    return {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "wall_s": round(wall, 1), "returncode": done.returncode, "summary": lines[-1] if lines else "",
            "lines": lines, "load_average_after": os.getloadavg()[0]}


def run_once(repo: Path, tests: list[str], wrapper: list[str]) -> dict:
    """One pytest process over `tests` in `repo`, one thread per process: its CPU, wall, summary and slowest tests."""
    run = timed_pytest(repo, ["--durations=10", *tests], {"OMP_NUM_THREADS": "1", "RAG_LLM_THREADS": "1"}, wrapper)
    lines = run.pop("lines")
    return run | {"slowest": [line for line in lines if re.match(r"^\d+\.\d+s (call|setup|teardown) ", line)]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, required=True, help="checkouts, run in this order each round")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--tag", default="")
    p.add_argument("--wrappers", nargs="+", default=["none"],
                   help="commands to run pytest under, each in turn ('none': bare), e.g. none eatmydata")
    p.add_argument("tests", nargs="+", help="test paths or node ids, relative to each checkout")
    args = p.parse_args()
    runs = []
    for round_ in range(args.rounds):
        for repo, wrapper in [(repo, wrapper) for repo in args.repos for wrapper in args.wrappers]:
            command = [] if wrapper == "none" else wrapper.split()
            runs.append({"repo": str(repo.resolve()), "wrapper": wrapper, "round": round_,
                         **run_once(repo.resolve(), args.tests, command)})
            r = runs[-1]
            print(f"{r['repo']} ({wrapper}): {r['cpu_s']} CPU s, {r['wall_s']} s wall, "
                  f"load {r['load_average_after']:.1f}: {r['summary']}", flush=True)
    out = write_results({"tests": args.tests, "runs": runs}, "test-cpu", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
