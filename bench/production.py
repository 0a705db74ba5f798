"""The production topology's scenario, on real servers, against the same scenario on the local filesystem.

Production: Dagster's instance on PostgreSQL, the daemon's queued run coordinator (max_concurrent_runs 2, one run
per partition), LanceDB and the published snapshots in an S3-compatible bucket (moto on loopback), the writer lease
in Postgres, and `rag serve` in a folder of its own that shares no disk with the writers (it pulls from the bucket).
Local: the same daemon and limits with SQLite storage and everything in one workspace folder.

Scenario: the sensor discovers 4 collections and the daemon runs them; 8 clients ask `rag serve` throughout (every
item is checked against the caller's groups); then two runs of one partition are launched at once (the second must
wait); then a document gets a new version, and the run the sensor starts for it is killed (the whole process tree,
as a lost pod) while it publishes: the code server marks it failed, the daemon retries it, and the retry publishes
the new version, which `rag serve` then answers with. Writes bench/results/production.json: wall time,
requests/s, errors, leaks, bytes stored where.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import topology  # noqa: E402
from bench.run_timeline import Marks, children_cpu_s, cpu_by_child, cpu_s, timeline  # noqa: E402
from rag.text.tables import bytes_on_disk  # noqa: E402

MOVED = ["maintenance-windows.md", "decommissioning.md", "diagnostics-bundle.md", "health-monitoring.md"]
USERS = {"sam": ["support"], "pat": ["partners"], "sec": ["security-team"]}
QUESTIONS = ["How long does the offline cache hold telemetry?", "Which error code means the gateway cache is full?",
             "How are gateway certificates rotated?", "When are maintenance windows scheduled?",
             "How do I collect a diagnostics bundle?", "How is a gateway decommissioned?"]
TWICE = "corpus/security"
KILLED, EDITED = "corpus/operations", "operations/capacity-limits.md"
NEW_SENTENCE = "Revision 2027: the spare-capacity threshold is 47 percent of the rated maximum."


def sources(root: Path) -> tuple[Path, dict[str, set[str]]]:
    """The sample corpus as 4 collections (a few operations documents moved to `maintenance`) and each ACL."""
    corpus = root / "corpus"
    shutil.copytree(REPO / "samples" / "corpus", corpus)
    (corpus / "maintenance").mkdir()
    for name in MOVED:
        (corpus / "operations" / name).rename(corpus / "maintenance" / name)
    acls = {}
    for path in corpus.rglob("*.md"):
        head = yaml.safe_load(path.read_text().split("\n---\n", 1)[0].removeprefix("---\n"))
        acls[head["id"]] = set(head.get("acl") or [])
    return corpus, acls


class Clients:
    """N threads asking `rag serve` until stopped; every item must be readable by the asking user's groups."""

    def __init__(self, url: str, acls: dict[str, set[str]], n: int):
        self.url, self.acls, self.n = url, acls, n
        self.requests = self.errors = self.leaks = 0
        self.latencies: list[float] = []
        self.error_examples: list[str] = []
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]

    def __enter__(self):
        self.started = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.seconds = time.monotonic() - self.started

    def _loop(self, seed: int) -> None:
        rng, client = random.Random(seed), httpx.Client(base_url=self.url, timeout=60)
        while not self._stop.is_set():
            user = rng.choice(sorted(USERS))
            body = {"question": rng.choice(QUESTIONS), "user": user, "method": rng.choice(["longrag", "elite"])}
            start = time.perf_counter()
            try:
                r = client.post("/retrieve", json=body)
                ok, items = r.status_code == 200, r.json().get("items", []) if r.status_code == 200 else []
                problem = "" if ok else f"{r.status_code} {r.text[:200]}"
            except (httpx.HTTPError, ValueError) as err:
                ok, items, problem = False, [], repr(err)[:200]
            leaked = sum(1 for i in items if not self.acls.get(i["doc_id"], set()) & set(USERS[user]))
            with self._lock:
                self.requests += 1
                self.latencies.append(time.perf_counter() - start)
                self.errors += not ok
                self.leaks += leaked
                if problem and len(self.error_examples) < 5:
                    self.error_examples.append(problem)

    def summary(self) -> dict:
        lat = sorted(self.latencies) or [0.0]
        return {"clients": self.n, "requests": self.requests, "seconds": round(self.seconds, 1),
                "requests_per_s": round(self.requests / max(self.seconds, 1e-9), 2), "errors": self.errors,
                "leaks": self.leaks, "p50_ms": round(1000 * lat[len(lat) // 2], 1),
                "p95_ms": round(1000 * lat[int(len(lat) * 0.95)], 1), "error_examples": self.error_examples}


def edit(corpus: Path) -> None:
    """A new version of one document, with a sentence that only the new version holds."""
    path = corpus / EDITED
    head, body = path.read_text().split("\n---\n", 1)
    head = head.replace('version: "2026"', 'version: "2027"')
    path.write_text(f"{head}\n---\n{body}\n{NEW_SENTENCE}\n")


def ingest_runs(instance) -> list:
    import dagster as dg
    return instance.get_run_records(filters=dg.RunsFilter(job_name="ingest"))


def wait_for(what: str, test, timeout_s: float, daemon: subprocess.Popen, every_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"the Dagster daemon exited ({daemon.returncode}) while waiting for {what}")
        found = test()
        if found:
            return found
        time.sleep(every_s)
    raise RuntimeError(f"timed out after {timeout_s:g} s waiting for {what}")


def steps(instance, run_id: str, event: str) -> list[str]:
    import dagster as dg
    return [e.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType[event])]


def run_pid(instance, run_id: str) -> int:
    """The run worker's pid, from the engine event the code server writes when it starts the run's process."""
    for entry in instance.all_logs(run_id):
        message = entry.dagster_event.message if entry.is_dagster_event else entry.user_message
        if found := re.search(r"Started process for run \(pid: (\d+)\)", message or ""):
            return int(found.group(1))
    raise RuntimeError(f"no process recorded for run {run_id}")


def kill_mid_publish(instance, corpus: Path, daemon: subprocess.Popen, mark: Marks) -> dict:
    """Edit a document, kill the sensor's run for it while its index step publishes, and follow the retry."""
    import dagster as dg
    known = {r.dagster_run.run_id for r in ingest_runs(instance)}
    edit(corpus)
    mark("edited")

    def publishing():
        for r in ingest_runs(instance):
            run = r.dagster_run
            if (run.run_id not in known and run.tags.get("dagster/partition") == KILLED
                    and run.status == dg.DagsterRunStatus.STARTED
                    and "subchunk_index" in steps(instance, run.run_id, "STEP_START")):
                return run
    killed = wait_for("the sensor's run to start publishing", publishing, 900, daemon, every_s=0.2)
    topology.kill_tree(run_pid(instance, killed.run_id), signal.SIGKILL)
    killed_at = time.monotonic()
    mark("killed")
    status = lambda run_id: instance.get_run_by_id(run_id).status  # noqa: E731
    wait_for("the killed run to be marked failed", lambda: status(killed.run_id) == dg.DagsterRunStatus.FAILURE,
             300, daemon, every_s=0.2)
    failed_after_s = time.monotonic() - killed_at
    mark("killed_run_failed")
    retry = wait_for("the daemon's retry", lambda: next((r.dagster_run for r in ingest_runs(instance)
                                                         if r.dagster_run.parent_run_id == killed.run_id), None),
                     300, daemon)
    mark("retry_created")
    wait_for("the retry to finish", lambda: instance.get_run_by_id(retry.run_id).is_finished, 900, daemon)
    mark("retry_finished")
    checks = [e.dagster_event.event_specific_data for e in instance.all_logs(
        retry.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    finished = set(steps(instance, killed.run_id, "STEP_SUCCESS"))
    return {"killed_in_step": [s for s in steps(instance, killed.run_id, "STEP_START") if s not in finished],
            "killed_run_failed_after_s": round(failed_after_s, 1),
            "retry_status": status(retry.run_id).value, "retry_strategy": retry.tags.get("dagster/retry_strategy"),
            "retry_published_after_kill_s": round(time.monotonic() - killed_at, 1),
            "retry_checks": len(checks), "retry_checks_failed": [c.check_name for c in checks if not c.passed]}


def served_versions(url: str) -> list[str]:
    """The versions of the edited document that `rag serve` answers with, asked for its new sentence."""
    r = httpx.post(f"{url}/retrieve", timeout=60, json={"question": "What is the spare-capacity threshold?",
                                                          "user": "sam", "method": "longrag"})
    r.raise_for_status()
    return sorted({i["doc_version"] for i in r.json()["items"] if i["doc_id"] == "capacity-limits"
                   and (i["doc_version"] != "2027" or NEW_SENTENCE in i["text"])})


def max_overlap(records) -> int:
    events = sorted([(r.start_time, 1) for r in records] + [(r.end_time, -1) for r in records])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def launch(env: dict, partition: str) -> subprocess.Popen:
    """`dagster job launch`: the run goes through the instance's queue like the sensor's runs."""
    return subprocess.Popen([str(Path(sys.executable).parent / "dagster"), "job", "launch", "-w", "workspace.yaml",
                             "-j", "ingest", "--tags", json.dumps({"dagster/partition": partition})],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def serve(env: dict, reader_ws: Path, root: Path) -> tuple[subprocess.Popen, str]:
    (root / "users.yaml").write_text(yaml.safe_dump(USERS))
    port = topology.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(reader_ws),
                             "--port", str(port), "--users-file", str(root / "users.yaml")], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(root / "serve.log", "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"rag serve exited: {(root / 'serve.log').read_text()[-500:]}")
        time.sleep(0.5)
    raise RuntimeError("rag serve did not come up")


def run(mode: str, root: Path, clients: int = 8) -> dict:
    """The scenario in one topology ("production" or "local"); returns its figures."""
    import dagster as dg

    mark = Marks()
    root.mkdir(parents=True, exist_ok=True)
    corpus, acls = sources(root)
    writer_ws, home = root / "writer" / "ws", root / "dagster_home"
    env = {**os.environ, "RAG_WORKSPACE": str(writer_ws), "RAG_SOURCES": str(corpus), "RAG_PARTITIONS": "collections",
           "DAGSTER_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
           "RAG_BENCHMARKS": str(root / "no-benchmarks"),  # the evaluation sensor finds nothing to prepare
           "RAG_SENSOR_INTERVAL_S": "5"}  # an edit is picked up within seconds, not half a minute
    (root / "no-benchmarks").mkdir()
    with ExitStack() as stack:
        pg_url = None
        if mode == "production":
            s3 = stack.enter_context(topology.s3_server())
            pg_url = stack.enter_context(topology.postgres_server())
            topology.create_bucket(s3, "rag-production")
            env |= s3 | {"RAG_LANCE_URI": "s3://rag-production/index", "RAG_SNAPSHOT_URI": "s3://rag-production/ws",
                         "RAG_WRITER_LOCK_URL": pg_url, "RAG_SNAPSHOT_POLL_S": "0.5"}
            reader_ws = root / "reader" / "ws"  # another pod: nothing of the writers' folders
        else:
            reader_ws = writer_ws
        topology.write_instance(home, pg_url)
        # The in-process instance reads them too; restored at the end, so a test process is left as it was.
        saved = dict(os.environ)
        stack.callback(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update({k: v for k, v in env.items() if k.startswith(("AWS_", "RAG_", "DAGSTER_HOME"))})
        instance = stack.enter_context(dg.DagsterInstance.from_config(str(home)))
        mark("servers_up")
        started = time.monotonic()
        daemon = stack.enter_context(topology.dagster_daemon(env, root / "daemon.log"))
        succeeded = lambda: [r for r in ingest_runs(instance)  # noqa: E731
                             if r.dagster_run.status == dg.DagsterRunStatus.SUCCESS]
        wait_for("the first partition run", succeeded, 900, daemon)
        first_publish_s = time.monotonic() - started
        mark("first_publish")
        server, url = serve(env, reader_ws, root)
        mark("serve_up")
        stack.callback(server.wait, 30)
        stack.callback(server.terminate)
        with Clients(url, acls, clients) as load:
            done = wait_for("4 partition runs", lambda: (lambda s: s if len(s) >= 4 else None)(succeeded()), 1800,
                            daemon)
            discovery_s = time.monotonic() - started
            mark("four_partitions")
            failed = [r.dagster_run.run_id for r in ingest_runs(instance)
                      if r.dagster_run.status == dg.DagsterRunStatus.FAILURE]
            before = {r.dagster_run.run_id for r in ingest_runs(instance)}
            twice_start, launch_cpu = time.monotonic(), children_cpu_s()
            launchers = [launch(env, TWICE) for _ in range(2)]
            for p in launchers:
                _, err = p.communicate(timeout=300)
                if p.returncode:
                    raise RuntimeError(f"dagster job launch failed: {err[-500:]}")
            mark("launched_twice")
            mark.cpu["launches"] = round(children_cpu_s() - launch_cpu, 1)
            twice = wait_for("two runs of one partition", lambda: (lambda s: s if len(s) >= 2 else None)(
                [r for r in succeeded() if r.dagster_run.run_id not in before]), 900, daemon)
            twice_s = time.monotonic() - twice_start
            mark("same_partition_twice")
            killed = kill_mid_publish(instance, corpus, daemon, mark)
            time.sleep(2 * float(env.get("RAG_SNAPSHOT_POLL_S", "1")) + 1)  # the reader pulls the last publish
            killed["served_versions"] = served_versions(url)
            mark("served_checked")
            mark.cpu |= {"serve": cpu_s([server.pid]), "daemon_code_server_and_runs": cpu_s(
                topology.process_tree(daemon.pid)), "by_child_process_tree": cpu_by_child()}
        mark("clients_stopped")
        partitions_served = sorted(httpx.get(f"{url}/healthz", timeout=10).json().get("partitions", {}) or [])
        result = {
            "mode": mode, "partition_runs": len(done), "failed_runs": failed,
            "partitions": sorted({r.dagster_run.tags.get("dagster/partition") for r in done}),
            "max_runs_at_once": max_overlap(done[:4]), "first_publish_s": round(first_publish_s, 1),
            "wall_s_4_partitions": round(discovery_s, 1), "same_partition_twice_s": round(twice_s, 1),
            "same_partition_runs_overlap": max_overlap(twice[:2]) > 1,
            "killed_mid_publish": killed, "serve": load.summary(), "served_partitions": partitions_served,
            "bytes": stored(mode, writer_ws, reader_ws, home, pg_url),
            "timeline": timeline(instance, ingest_runs(instance), mark.wall0),
        }
    mark("torn_down")
    return result | {"time": mark.summary()}


def stored(mode: str, writer_ws: Path, reader_ws: Path, home: Path, pg_url: str | None) -> dict:
    """Bytes stored where: the writers' local folder (catalogs), the reader's copy, the bucket, Dagster's storage."""
    catalogs = bytes_on_disk(*writer_ws.rglob("catalog.duckdb*"))
    out = {"writer_catalogs": catalogs, "writer_snapshots": bytes_on_disk(*writer_ws.rglob("snapshots")),
           "writer_local_index": bytes_on_disk(*writer_ws.rglob("lancedb"))}
    if mode == "production":
        import psycopg2

        from rag.store.object_store import ObjectStore
        out |= {"reader_local_snapshots": bytes_on_disk(*reader_ws.rglob("snapshots")),
                "bucket_index": ObjectStore("s3://rag-production/index").size(),
                "bucket_snapshots": ObjectStore("s3://rag-production/ws").size()}
        with psycopg2.connect(pg_url) as con, con.cursor() as cur:
            cur.execute("SELECT pg_database_size(current_database())")
            out["postgres_dagster"] = cur.fetchone()[0]
    else:
        out["dagster_sqlite"] = bytes_on_disk(home)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--modes", nargs="+", default=["local", "production"], choices=["local", "production"])
    p.add_argument("--out", default=str(REPO / "bench" / "results" / "production.json"))
    args = p.parse_args()
    results = {}
    for mode in args.modes:  # the same process order every time: local first, then production
        with tempfile.TemporaryDirectory(prefix=f"rag-{mode}-") as tmp:
            results[mode] = run(mode, Path(tmp), args.clients)
            print(json.dumps(results[mode], indent=1), flush=True)
    if {"local", "production"} <= set(results):
        results["production_over_local_wall"] = round(results["production"]["wall_s_4_partitions"]
                                                      / results["local"]["wall_s_4_partitions"], 2)
    results["load_average"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
