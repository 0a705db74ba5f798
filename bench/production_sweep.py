"""N partitions through the daemon on the production topology, each run in an empty folder: wall time, runs per
minute, Postgres connections at peak, bytes each run restored from and checkpointed to the bucket, then a sweep of
every partition again with nothing changed (work in proportion to the change). Also how long Postgres takes to end
the lease of a writer that stops answering (SIGSTOP).

Real servers on loopback (moto's S3 server, Debian's PostgreSQL, `dagster-daemon`), as bench/production.py: the
sensor discovers the N collections and requests a run for each; the queue runs `--concurrency` at a time; every run
starts in a folder of its own (bench/pod_launcher.py). Each collection holds a few small documents, one linking into
the next collection (a cross-partition link, looked up in the bucket's id record). Writes
bench/results/production-sweep.json.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import topology  # noqa: E402
from bench.production import ingest_runs, wait_for  # noqa: E402
from bench.results_file import results_path, write_json  # noqa: E402

DOCS = 3


def make_corpus(root: Path, n: int) -> Path:
    src = root / "src"
    for i in range(n):
        folder = src / f"c{i:03d}"
        folder.mkdir(parents=True)
        for j in range(DOCS):
            link = f"links: [c{(i + 1) % n}-d0]\n" if j == 0 else ""
            folder.joinpath(f"d{j}.md").write_text(
                f"---\nid: c{i}-d{j}\ntitle: Topic {i}.{j}\nacl: [staff]\n{link}---\n"
                f"Collection {i} keeps document {j}. It describes procedure {i * DOCS + j} in a few sentences. "
                f"The gateway model {i % 7} needs setting {j} before the nightly window.\n")
    return src


class PeakConnections:
    """Postgres sessions, sampled at each poll of a sweep: client backends at peak, and writer leases at peak."""

    def __init__(self, url: str):
        import psycopg2

        self.peak = self.leases = 0
        self.con = psycopg2.connect(url)
        self.con.autocommit = True   # each sample its own transaction: pg_stat_activity is read afresh

    def sample(self) -> None:
        with self.con.cursor() as cur:
            cur.execute("SELECT count(*) FILTER (WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()), "
                        "count(*) FILTER (WHERE application_name LIKE 'rag writer%') FROM pg_stat_activity")
            clients, leases = cur.fetchone()
        self.peak, self.leases = max(self.peak, clients), max(self.leases, leases)


def sweep_figures(instance, ids: set[str], pods: Path, before: set[Path]) -> dict:
    import dagster as dg

    records = [r for r in ingest_runs(instance) if r.dagster_run.run_id in ids]
    wall = max(r.end_time for r in records) - min(r.start_time for r in records)
    moved = [json.loads(p.read_text()) for p in pods.rglob(".checkpoint-io.json") if p.parent.parent.parent.parent
             not in before]
    restored, checkpointed = [m["restored_bytes"] for m in moved], [m["checkpointed_bytes"] for m in moved]
    return {"runs": len(records), "succeeded": sum(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS
                                                   for r in records),
            "wall_s": round(wall, 1), "runs_per_min": round(len(records) / wall * 60, 1),
            "run_s_median": round(statistics.median(r.end_time - r.start_time for r in records), 1),
            "restored_bytes_median": int(statistics.median(restored or [0])), "restored_bytes_max": max(restored or [0]),
            "checkpointed_bytes_median": int(statistics.median(checkpointed or [0])),
            "checkpointed_bytes_max": max(checkpointed or [0]), "runs_measured": len(moved)}


def sweep(n: int, concurrency: int, root: Path) -> dict:
    import dagster as dg

    src = make_corpus(root, n)
    home, pods = root / "dagster_home", root / "pods"
    env = {**os.environ, "RAG_SOURCES": str(src), "RAG_PARTITIONS": "collections", "DAGSTER_HOME": str(home),
           "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "RAG_BENCHMARKS": str(root / "no-benchmarks"), "RAG_SENSOR_INTERVAL_S": "10",
           "HOME": str(root / "code-server" / "home"), "RAG_WORKSPACE": str(root / "code-server" / "ws")}
    (root / "no-benchmarks").mkdir()
    (root / "code-server" / "home").mkdir(parents=True)
    with ExitStack() as stack:
        s3 = stack.enter_context(topology.s3_server())
        pg_url = stack.enter_context(topology.postgres_server())
        topology.create_bucket(s3, "rag-sweep")
        env |= s3 | {"RAG_LANCE_URI": "s3://rag-sweep/index", "RAG_SNAPSHOT_URI": "s3://rag-sweep/ws",
                     "RAG_WRITER_LOCK_URL": pg_url}
        env["RAG_MODEL_CACHE"] = str(topology.build_model_cache(root / "image" / "model-cache", env))
        topology.write_instance(home, pg_url, pods, Path(env["RAG_MODEL_CACHE"]), max_concurrent_runs=concurrency)
        saved = dict(os.environ)
        stack.callback(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update({k: v for k, v in env.items() if k.startswith(("AWS_", "RAG_", "DAGSTER_HOME"))})
        instance = stack.enter_context(dg.DagsterInstance.from_config(str(home)))
        peak = PeakConnections(pg_url)
        stack.callback(peak.con.close)
        daemon = stack.enter_context(topology.dagster_daemon(env, root / "daemon.log", root / "code-server"))
        def finished(ids):
            peak.sample()
            return [r for r in ingest_runs(instance) if r.dagster_run.run_id in ids and r.dagster_run.is_finished]

        first = {r.dagster_run.run_id for r in wait_for(f"the sensor's {n} runs", lambda: (
            lambda s: s if len(s) >= n else None)(ingest_runs(instance)), 1800, daemon)}
        wait_for("the first sweep", lambda: len(finished(first)) == len(first), 7200, daemon, every_s=0.5)
        out = {"partitions": n, "concurrency": concurrency, "first": sweep_figures(instance, first, pods, set())}
        out["first"]["peak_postgres_connections"], out["first"]["peak_writer_leases"] = peak.peak, peak.leases
        before = {p for p in pods.iterdir()}
        peak.peak = peak.leases = 0
        backfill = subprocess.run([str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-w",
                                   str(REPO / "workspace.yaml"), "-j", "ingest", "--all", "all", "--noprompt"],
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if backfill.returncode:
            raise RuntimeError(f"dagster job backfill failed: {backfill.stderr[-500:]}")
        again = wait_for("the no-change sweep's runs", lambda: (lambda s: s if len(s) >= n else None)(
            {r.dagster_run.run_id for r in ingest_runs(instance)} - first), 1800, daemon)
        wait_for("the no-change sweep", lambda: len(finished(again)) == len(again), 7200, daemon, every_s=0.5)
        out["no_change"] = sweep_figures(instance, again, pods, before)
        out["no_change"]["peak_postgres_connections"], out["no_change"]["peak_writer_leases"] = peak.peak, peak.leases
        out["bucket_bytes"] = {"snapshots_and_checkpoints": _bucket_size("s3://rag-sweep/ws"),
                               "index": _bucket_size("s3://rag-sweep/index")}
    return out


def _bucket_size(uri: str) -> int:
    from rag.store.object_store import ObjectStore
    return ObjectStore(uri).size()


HOLD = """
import sys
from rag.store.writer_lock import WriterLock
WriterLock(sys.argv[1], "paused pod").acquire()
print("held", flush=True)
sys.stdin.read()
"""


def lease_expiry(root: Path) -> dict:
    """Seconds from SIGSTOP of a lease holder to another process getting the lease, at the default timeout."""
    from rag.store.writer_lease import PostgresLease, lease_timeout_s

    with topology.postgres_server() as url:
        env = {**os.environ, "RAG_WRITER_LOCK_URL": url, "PYTHONPATH": str(REPO)}
        env.pop("RAG_SNAPSHOT_URI", None)
        holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root / "a" / "ws")], env=env, cwd=REPO,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            time.sleep(lease_timeout_s() / 2)   # mid-way between two heartbeats at worst
            os.kill(holder.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            lease = PostgresLease(url, str((root / "a" / "ws").resolve()), "other pod")   # the holder's store name
            assert lease.acquire(time.monotonic() + 300)
            waited = time.monotonic() - stopped
            lease.close()
        finally:
            holder.kill()
            holder.wait()
    return {"timeout_s": lease_timeout_s(), "lease_taken_after_sigstop_s": round(waited, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--concurrency", type=int, nargs="+", default=[2, 4])
    p.add_argument("--out", default=str(results_path("production-sweep")))
    args = p.parse_args()
    results = {"command": "python bench/production_sweep.py " + " ".join(sys.argv[1:]), "sweeps": []}
    with tempfile.TemporaryDirectory(prefix="rag-lease-") as tmp:
        results["paused_writer"] = lease_expiry(Path(tmp))
        print(json.dumps(results["paused_writer"]), flush=True)
    for c in args.concurrency:
        with tempfile.TemporaryDirectory(prefix=f"rag-sweep-{c}-") as tmp:
            results["sweeps"].append(sweep(args.partitions, c, Path(tmp)))
            print(json.dumps(results["sweeps"][-1], indent=1), flush=True)
    results["load_average"] = os.getloadavg()
    write_json(args.out, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
