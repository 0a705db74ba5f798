"""Where a long-lived `rag serve` puts what it keeps across publishes: Python allocations still live, by place.

The same rounds as bench/serve_memory.py (one document re-versioned, published by a real ingest, the questions asked
until the server serves the new snapshot), but the service runs in a child process under tracemalloc, driven
in-process (Starlette's TestClient), while this process publishes. After `--from` and after the last publish the
child compares what is still allocated, grouped by the stack that allocated it, and reports the biggest growths in
bytes per publish. `--code DIR` traces another checkout's server; `--same-size` as in bench/serve_memory.py. Writes
bench/results/serve-memory-trace[-TAG].json.

    python bench/serve_memory_trace.py --publishes 60 --from 10 --tag s45-after
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FRAMES = 8  # enough to name the cache a growth lives in, not so many that tracing slows the server tenfold


def child(ws: str, users: str, as_of: bool, start: int, top: int) -> None:
    """The service in this process: one round per line on stdin ({"k", "seq"}), one JSON line back per round."""
    tracemalloc.start(FRAMES)
    from starlette.testclient import TestClient

    from bench.serve_memory import ask, rss_kib
    from pipelines.serve_cli import build_app

    app, _ = build_app({"workspace": ws, "lance_uri": None, "users_file": users, "groups_header": None,
                        "user_header": None, "reader": "extractive", "build_on_request": False})
    first = None
    with TestClient(app) as client:
        for line in sys.stdin:
            round_ = json.loads(line)
            ask(client, round_["seq"], as_of)
            gc.collect()
            out = {"publish": round_["k"], "rss_kib": rss_kib(os.getpid()),
                   "traced_bytes": tracemalloc.get_traced_memory()[0]}
            if round_["k"] == start:
                first = tracemalloc.take_snapshot()
            elif round_.get("last") and first is not None:
                out["growth"] = growth(first, tracemalloc.take_snapshot(), round_["k"] - start, top)
            print(json.dumps(out), flush=True)


def growth(first: tracemalloc.Snapshot, last: tracemalloc.Snapshot, publishes: int, top: int) -> list[dict]:
    """The biggest growths between two snapshots, per publish, each with the project's frames that allocated it."""
    out, code = [], os.getcwd() + "/"  # the child runs in the traced checkout
    for stat in last.compare_to(first, "traceback")[:top]:
        frames = [f"{f.filename.removeprefix(code)}:{f.lineno}" for f in stat.traceback]
        ours = [f for f in frames if f.startswith(("rag/", "pipelines/"))] or frames[-1:]
        out.append({"bytes_per_publish": round(stat.size_diff / publishes), "blocks": stat.count_diff,
                    "live_bytes": stat.size, "where": ours})
    return out


def run(publishes: int, start: int, code: Path, as_of: bool, top: int, same_size: bool) -> dict:
    import yaml

    from bench.serve_memory import revise
    from pipelines.ingest_run import run_ingest
    from rag.store.settings import IngestSettings

    with tempfile.TemporaryDirectory(prefix="serve-trace-") as tmp:
        root = Path(tmp)
        corpus, ws, users = root / "corpus", root / "ws", root / "users.yaml"
        shutil.copytree(REPO / "samples" / "corpus", corpus)
        users.write_text(yaml.safe_dump({"bench": ["support", "field-engineering", "security-team", "partners"]}))
        settings = IngestSettings(workspace=str(ws), sources=[str(corpus)])
        run_ingest(settings)
        env = os.environ | {"PYTHONPATH": str(code)}
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(ws), str(users),
                                 "--from", str(start), "--top", str(top)] + (["--as-of"] if as_of else []),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=code, env=env)
        rows = []
        try:
            for k in range(publishes + 1):
                if k:
                    revise(corpus, k, same_size)
                    run_ingest(settings)
                seq = json.loads((ws / "snapshots" / "CURRENT").read_text())["seq"]
                proc.stdin.write(json.dumps({"k": k, "seq": seq, "last": k == publishes}) + "\n")
                proc.stdin.flush()
                rows.append(json.loads(proc.stdout.readline()))
                if k % 10 == 0:
                    print(f"publish {k}: traced {rows[-1]['traced_bytes'] / 2**20:.1f} MiB", flush=True)
        finally:
            proc.stdin.close()
            proc.wait(timeout=120)
    first, last = rows[start], rows[-1]
    return {"publishes": publishes, "from": start, "as_of_reads": as_of, "same_size": same_size, "code": str(code),
            "traced_bytes_per_publish": round((last["traced_bytes"] - first["traced_bytes"]) / (publishes - start)),
            "rss_kib_per_publish": round((last["rss_kib"] - first["rss_kib"]) / (publishes - start), 1),
            "growth": last["growth"], "samples": [{k: v for k, v in r.items() if k != "growth"} for r in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publishes", type=int, default=60)
    ap.add_argument("--from", dest="start", type=int, default=10, help="the publish the growth is counted from")
    ap.add_argument("--as-of", action="store_true", help="also ask each question as of the time of asking")
    ap.add_argument("--same-size", action="store_true", help="each version replaces the last one's added sentence")
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout whose server is traced")
    ap.add_argument("--top", type=int, default=12, help="growths reported")
    ap.add_argument("--tag", default="")
    ap.add_argument("--child", nargs=2, metavar=("WORKSPACE", "USERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # the traced checkout's code, first on PYTHONPATH
        return child(*args.child, args.as_of, args.start, args.top)
    sys.path.insert(0, str(REPO))
    from bench.results_file import commit, write_results

    result = run(args.publishes, args.start, args.code.resolve(), args.as_of, args.top, args.same_size)
    result["commit"], result["command"] = commit(args.code), "python bench/serve_memory_trace.py " + " ".join(sys.argv[1:])
    write_results(result, "serve-memory-trace", args.tag)
    print(f"publishes {args.start}..{args.publishes}: {result['traced_bytes_per_publish']} traced bytes a publish "
          f"(RSS {result['rss_kib_per_publish']} KiB a publish); biggest growths:")
    for g in result["growth"]:
        print(f"  {g['bytes_per_publish']:+8d} B/publish  {' <- '.join(reversed(g['where'][-3:]))}")


if __name__ == "__main__":
    main()
