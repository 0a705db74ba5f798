"""CPU seconds to load the Dagster code location in a fresh process, as every run worker, code server, sensor daemon
and `dagster job launch` does: `import pipelines.definitions` and build its Definitions. Also the modules it imports
that a run may not need (matplotlib, lancedb, lance, torch, onnxruntime, sentence_transformers).

Several checkouts are timed interleaved, in the same process order each round (before, after, before, after, …):

    python bench/code_location.py --repos /work/before-21 . --rounds 8 --tag s33
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402

HEAVY = ("matplotlib", "lancedb", "lance", "torch", "onnxruntime", "sentence_transformers")
LOAD = ("import sys; import pipelines.definitions as d; d.defs(); "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")


def load_once(repo: Path, env: dict) -> tuple[float, float, list[str]]:
    """(CPU seconds, wall seconds, heavy modules imported) of one fresh process loading the code location."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = os.times().elapsed
    done = subprocess.run([sys.executable, "-c", LOAD], cwd=repo, env={**env, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, check=True)
    wall = os.times().elapsed - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall, [m for m in done.stdout.strip().split(",") if m]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, default=[REPO], help="checkouts to time (default: this one)")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    # The workspace the code location describes: a fresh empty folder per checkout, nothing read at load.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_HOME"))}
    env |= {"RAG_WORKSPACE": "/nonexistent/rag-workspace", "RAG_SOURCES": str(REPO / "samples" / "corpus")}
    samples: dict[str, dict] = {str(r.resolve()): {"cpu_s": [], "wall_s": [], "heavy": []} for r in args.repos}
    load_once(args.repos[0].resolve(), env)   # warm the page cache once, for every checkout alike
    for _ in range(args.rounds):
        for repo in args.repos:
            cpu, wall, heavy = load_once(repo.resolve(), env)
            s = samples[str(repo.resolve())]
            s["cpu_s"].append(round(cpu, 3))
            s["wall_s"].append(round(wall, 3))
            s["heavy"] = heavy
    result = {"rounds": args.rounds, "load_average": os.getloadavg(), "repos": {
        repo: {"cpu_s_median": round(statistics.median(s["cpu_s"]), 3), "wall_s_median": round(
            statistics.median(s["wall_s"]), 3), "heavy_modules_imported": s["heavy"], **s}
        for repo, s in samples.items()}}
    for repo, r in result["repos"].items():
        print(f"{repo}: {r['cpu_s_median']} CPU s, {r['wall_s_median']} s wall (median of {args.rounds}); "
              f"imports {', '.join(r['heavy_modules_imported']) or 'none of ' + ', '.join(HEAVY)}")
    out = write_results(result, "code-location", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
