"""Where a parallel test run's wall time goes: each test's wall and CPU seconds on its xdist worker, each worker's idle
tail, and the tests that wait most: wall minus CPU (of the worker and the processes it started and reaped) minus
the time the worker's main thread sat on a run queue waiting for a core.

    python bench/test_timeline.py --repos ../other-checkout . --tag fast -- -m "not slow"

Each checkout runs `make test`'s pytest command (`-n 2 --dist loadgroup --no-loadscope-reorder`) with this file
loaded as a plugin; the arguments after `--` are pytest's. On a shared machine every test also waits for the cores: that
part is counted for the worker's main thread only (`queued`), so a test whose children compute still shows their
queueing as waiting.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TIMELINE = "RAG_TEST_TIMELINE"


def _queued() -> float:
    """Seconds this thread has waited on a run queue for a core (Linux schedstat): waiting for CPU, not idle."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, cpu, queued = time.time(), _cpu(), _queued()
    try:
        return (yield)
    finally:
        record = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": start,
                  "wall": time.time() - start, "cpu": _cpu() - cpu, "queued": _queued() - queued,
                  "slow": bool(item.get_closest_marker("slow"))}
        with open(os.environ[TIMELINE], "a") as f:
            f.write(json.dumps(record) + "\n")


def run(repo: Path, pytest_args: list[str], workers: int, log: Path) -> dict:
    """`make test`'s pytest command in `repo` with this plugin: the run's wall and CPU seconds and every test's."""
    from bench.test_cpu import timed_pytest  # here, not at import: as a plugin this file runs in another checkout

    log.unlink(missing_ok=True)
    start = time.time()  # the tests' own start times are on this clock
    done = timed_pytest(repo, ["-p", Path(__file__).stem, "-n", str(workers), "--dist", "loadgroup",
                               "--no-loadscope-reorder", *pytest_args],
                        {"PYTHONPATH": os.pathsep.join([str(repo), str(Path(__file__).parent)]), TIMELINE: str(log)})
    done.pop("lines")
    tests = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {"repo": str(repo), **done, "workers": _workers(tests, start, start + done["wall_s"]), "tests": tests}


def _workers(tests: list[dict], start: float, end: float) -> dict:
    """Per worker: seconds in tests, CPU seconds in tests, and the idle tail between its last test and the run's end."""
    out = {}
    for worker in sorted({t["worker"] for t in tests}):
        mine = [t for t in tests if t["worker"] == worker]
        last = max(t["start"] + t["wall"] for t in mine)
        out[worker] = {"tests": len(mine), "in_tests_s": round(sum(t["wall"] for t in mine), 1),
                       "cpu_in_tests_s": round(sum(t["cpu"] for t in mine), 1),
                       "first_test_after_s": round(min(t["start"] for t in mine) - start, 1),
                       "idle_tail_s": round(end - last, 1)}
    return out


def report(result: dict, top: int) -> None:
    print(f"{result['repo']}: {result['wall_s']} s wall, {result['cpu_s']} CPU s, load "
          f"{result['load_average_after']:.1f}: {result['summary']}")
    for worker, w in result["workers"].items():
        print(f"  {worker}: {w['tests']} tests, {w['in_tests_s']} s in tests on {w['cpu_in_tests_s']} CPU s, first "
              f"test after {w['first_test_after_s']} s, idle for the last {w['idle_tail_s']} s")
    print("  waiting most (wall − CPU − queued for a core):")
    for t in sorted(result["tests"], key=_waited, reverse=True)[:top]:
        _line(t)
    print("  longest:")
    for t in sorted(result["tests"], key=lambda t: -t["wall"])[:top]:
        _line(t)


def _waited(t: dict) -> float:
    return t["wall"] - t["cpu"] - t.get("queued", 0.0)


def _line(t: dict) -> None:
    print(f"    {t['wall']:7.1f} s wall {t['cpu']:7.1f} CPU s {t.get('queued', 0.0):7.1f} s queued  {t['worker']}  "
          f"{t['test']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, required=True, help="checkouts, run one after the other")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--tag", default="")
    p.add_argument("pytest_args", nargs="*", help="pytest's arguments, e.g. -m 'not slow' or test paths")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))  # only here: as a plugin this file runs inside another checkout's tests
    name = f"test-timeline{'-' + args.tag if args.tag else ''}"
    results = []
    for repo in args.repos:
        results.append(run(repo.resolve(), args.pytest_args, args.workers, Path(f"/tmp/{name}-{os.getpid()}.jsonl")))
        report(results[-1], args.top)
    from bench.results_file import write_results

    out = write_results({"pytest_args": args.pytest_args, "workers": args.workers, "runs": results}, name)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
