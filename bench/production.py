"""The production topology's scenario, on real servers, against the same scenario on the local filesystem.

Production: Dagster's instance on PostgreSQL, the daemon's queued run coordinator (max_concurrent_runs 2, one run
per partition), LanceDB and the published snapshots in an S3-compatible bucket (moto on loopback), the writer lease
in Postgres; every run in an empty folder of its own with its own HOME (bench/pod_launcher.py), the code server and
its sensor in another, and `rag serve` in a third that shares no disk with the writers (it pulls from the bucket).
Local: the same daemon and limits with SQLite storage and everything in one workspace folder.

Scenario: the sensor discovers 4 collections and the daemon runs them, two at a time; `dagster job launch` queues
one more run of a partition whose sensor run is still queued or running (the two must not overlap); 8 clients ask
`rag serve` throughout from the first publish (every item is checked against the caller's groups); as soon as one
partition has published, a document of it gets a new version, and the run the sensor starts for it is killed (the
whole process tree, as a lost pod) while it publishes: the code server marks it failed, the daemon retries it, and
the retry publishes the new version, which `rag serve` then answers with. The phases overlap, as work does in
production, so both cores stay busy. Writes bench/results/production.json: wall time, requests/s, errors, leaks,
bytes stored where, and where the time went (each run's phases from its event log; CPU seconds by process).
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
from bench.results_file import results_path, write_json  # noqa: E402
from bench.run_timeline import Marks, children_cpu_s, cpu_by_child, cpu_by_process, cpu_s, timeline  # noqa: E402
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
    """N threads asking `rag serve` until stopped; every item must be readable by the asking user's groups.

    Each client pauses `think_s` between requests (0: the next as soon as one is answered, the throughput figure)."""

    def __init__(self, url: str, acls: dict[str, set[str]], n: int, think_s: float = 0.0):
        self.url, self.acls, self.n, self.think_s = url, acls, n, think_s
        self.requests = self.errors = self.leaks = 0
        self.latencies: list[float] = []
        self.answered_at: list[float] = []   # time.monotonic() of each answered request
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
        # An idle connection is not reused after 1 s: uvicorn closes one after 5 s, and a request sent on it as it
        # closes is reset (paced clients hit that race under load; a real client keeps below the server's expiry).
        rng, client = random.Random(seed), httpx.Client(base_url=self.url, timeout=60,
                                                        limits=httpx.Limits(keepalive_expiry=1.0))
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
                if ok:
                    self.answered_at.append(time.monotonic())
                if problem and len(self.error_examples) < 5:
                    self.error_examples.append(problem)
            self._stop.wait(self.think_s)

    def answered_between(self, start: float, end: float) -> int:
        with self._lock:
            return sum(1 for t in self.answered_at if start <= t <= end)

    def summary(self) -> dict:
        lat = sorted(self.latencies) or [0.0]
        return {"clients": self.n, "think_s": self.think_s, "requests": self.requests, "seconds": round(self.seconds, 1),
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

    def started():
        return next((r.dagster_run for r in ingest_runs(instance) if r.dagster_run.run_id not in known
                     and r.dagster_run.tags.get("dagster/partition") == KILLED
                     and r.dagster_run.status == dg.DagsterRunStatus.STARTED), None)
    # Every second until the sensor's run has started (a sensor tick, the queue and a process start away), then
    # five times a second on that run's steps alone: the kill must land while its index step publishes.
    killed = wait_for("the sensor's run to start", started, 900, daemon)
    wait_for("the sensor's run to start publishing",
             lambda: "subchunk_index" in steps(instance, killed.run_id, "STEP_START"), 900, daemon, every_s=0.2)
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
    window = (killed_at, time.monotonic())
    checks = [e.dagster_event.event_specific_data for e in instance.all_logs(
        retry.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    finished = set(steps(instance, killed.run_id, "STEP_SUCCESS"))
    return {"killed_in_step": [s for s in steps(instance, killed.run_id, "STEP_START") if s not in finished],
            "killed_run_failed_after_s": round(failed_after_s, 1),
            "retry_status": status(retry.run_id).value, "retry_strategy": retry.tags.get("dagster/retry_strategy"),
            "retry_published_after_kill_s": round(time.monotonic() - killed_at, 1),
            "retry_checks": len(checks), "retry_checks_failed": [c.check_name for c in checks if not c.passed],
            "window": window}


def served_versions(url: str) -> list[str]:
    """The versions of the edited document that `rag serve` answers with, asked for its new sentence once the
    server's newest read state is in (it is built between requests)."""
    deadline = time.monotonic() + 120
    while "building" in httpx.get(f"{url}/healthz", timeout=10).json() and time.monotonic() < deadline:
        time.sleep(0.2)
    r = httpx.post(f"{url}/retrieve", timeout=60, json={"question": "What is the spare-capacity threshold?",
                                                          "user": "sam", "method": "longrag"})
    r.raise_for_status()
    return sorted({i["doc_version"] for i in r.json()["items"] if i["doc_id"] == "capacity-limits"
                   and (i["doc_version"] != "2027" or NEW_SENTENCE in i["text"])})


def max_overlap(records) -> int:
    """The most runs that were running at one moment (runs that never started or never ended do not count)."""
    records = [r for r in records if r.start_time and r.end_time]
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
    if env.get("RAG_SNAPSHOT_URI"):   # a pod of its own: an empty folder and HOME
        (reader_ws.parent / "home").mkdir(parents=True, exist_ok=True)
        env = {**env, "HOME": str(reader_ws.parent / "home"), "RAG_WORKSPACE": str(reader_ws)}
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


def run(mode: str, root: Path, clients: int = 8, think_s: float = 0.0) -> dict:
    """The scenario in one topology ("production" or "local"); returns its figures. `think_s` is each client's pause
    between requests (0: the next as soon as one is answered)."""
    import dagster as dg

    mark = Marks()
    root.mkdir(parents=True, exist_ok=True)
    corpus, acls = sources(root)
    writer_ws, home = root / "writer" / "ws", root / "dagster_home"
    env = {**os.environ, "RAG_WORKSPACE": str(writer_ws), "RAG_SOURCES": str(corpus), "RAG_PARTITIONS": "collections",
           "DAGSTER_HOME": str(home), "OMP_NUM_THREADS": "1",
           # The repository first, then what the caller had (the tests' shared vectors, tests/conftest.py).
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "RAG_BENCHMARKS": str(root / "no-benchmarks"),  # the evaluation sensor finds nothing to prepare
           # An edit is picked up within seconds, not half a minute; the daemon's sensor loop wakes every 5 s, and
           # evaluating every wake-up cost a code server call and a tick written to Postgres each time.
           "RAG_SENSOR_INTERVAL_S": "10"}
    (root / "no-benchmarks").mkdir()
    with ExitStack() as stack:
        pg_url = None
        if mode == "production":
            s3 = stack.enter_context(topology.s3_server())
            pg_url = stack.enter_context(topology.postgres_server())
            topology.create_bucket(s3, "rag-production")
            env |= s3 | {"RAG_LANCE_URI": "s3://rag-production/index", "RAG_SNAPSHOT_URI": "s3://rag-production/ws",
                         "RAG_WRITER_LOCK_URL": pg_url}  # the reader polls the bucket at its default, 1 s
            # Pods: the code server (and its sensor) in an empty folder, each run in another (bench/pod_launcher.py),
            # `rag serve` in a third; only the image's model cache is shared, built before anything runs.
            env |= {"RAG_MODEL_CACHE": str(topology.build_model_cache(root / "image" / "model-cache", env)),
                    "HOME": str(root / "code-server" / "home"), "RAG_WORKSPACE": str(root / "code-server" / "ws")}
            writer_ws, reader_ws, pods = root / "pods", root / "reader" / "ws", root / "pods"
            (root / "code-server" / "home").mkdir(parents=True)
        else:
            reader_ws, pods = writer_ws, None
        topology.write_instance(home, pg_url, pods, env.get("RAG_MODEL_CACHE"))
        # The in-process instance reads them too; restored at the end, so a test process is left as it was.
        saved = dict(os.environ)
        stack.callback(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update({k: v for k, v in env.items() if k.startswith(("AWS_", "RAG_", "DAGSTER_HOME"))})
        instance = stack.enter_context(dg.DagsterInstance.from_config(str(home)))
        mark("servers_up")
        started = time.time()
        daemon = stack.enter_context(topology.dagster_daemon(env, root / "daemon.log",
                                                             (root / "code-server") if pods else REPO))
        runs = lambda ids: [r for r in ingest_runs(instance) if r.dagster_run.run_id in ids]  # noqa: E731
        ok = lambda ids: [r for r in runs(ids) if r.dagster_run.status == dg.DagsterRunStatus.SUCCESS]  # noqa: E731
        discovered = {r.dagster_run.run_id for r in wait_for("the sensor's 4 partition runs", lambda: (
            lambda s: s if len(s) >= 4 else None)(ingest_runs(instance)), 900, daemon)}
        mark("sensor_runs_created")
        twice_start, launch_cpu = time.time(), children_cpu_s()
        launcher = launch(env, TWICE)
        _, err = launcher.communicate(timeout=300)
        if launcher.returncode:
            raise RuntimeError(f"dagster job launch failed: {err[-500:]}")
        mark("launched")
        mark.cpu["launch"] = round(children_cpu_s() - launch_cpu, 1)
        twice_ids = {r.dagster_run.run_id for r in ingest_runs(instance)} - discovered
        wait_for("the first partition run", lambda: ok(discovered), 900, daemon)
        mark("first_publish")
        server, url = serve(env, reader_ws, root)
        mark("serve_up")
        stack.callback(server.wait, 30)
        stack.callback(server.terminate)
        with Clients(url, acls, clients, think_s) as load:
            wait_for(f"{KILLED}'s first run", lambda: [r for r in ok(discovered)
                                                     if r.dagster_run.tags.get("dagster/partition") == KILLED],
                     1800, daemon)
            killed = kill_mid_publish(instance, corpus, daemon, mark)
            time.sleep(2 * float(env.get("RAG_SNAPSHOT_POLL_S", "1")) + 1)  # the reader pulls the last publish
            killed["served_versions"] = served_versions(url)
            killed["requests_answered_meanwhile"] = load.answered_between(*killed.pop("window"))
            mark("served_checked")
            wait_for("every run", lambda: all(r.dagster_run.is_finished for r in ingest_runs(instance)), 1800, daemon)
            mark("every_run_finished")
            mark.cpu |= {"serve": cpu_s([server.pid]), "daemon_code_server_and_runs": cpu_s(
                topology.process_tree(daemon.pid)), "by_child_process_tree": cpu_by_child(),
                         "daemon_tree_by_process": cpu_by_process(topology.process_tree(daemon.pid))}
        mark("clients_stopped")
        partitions_served = sorted(httpx.get(f"{url}/healthz", timeout=10).json().get("partitions", {}) or [])
        everything, done, launched = ingest_runs(instance), runs(discovered), runs(twice_ids)
        twice = launched + [r for r in done if r.dagster_run.tags.get("dagster/partition") == TWICE]
        by_partition = {}
        for r in everything:
            by_partition.setdefault(r.dagster_run.tags.get("dagster/partition"), []).append(r)
        result = {
            "mode": mode, "partition_runs": len(done), "runs": len(everything),
            "failed_runs": [r.dagster_run.run_id for r in done + launched
                            if r.dagster_run.status != dg.DagsterRunStatus.SUCCESS],
            "partitions": sorted({r.dagster_run.tags.get("dagster/partition") for r in done}),
            "twice_partitions": [r.dagster_run.tags.get("dagster/partition") for r in twice],
            # The launched run was queued before the sensor's run of its partition had finished: they contended.
            "twice_contended": max(r.create_timestamp.timestamp() for r in launched) < min(r.end_time for r in twice),
            "max_runs_at_once": max_overlap(everything),
            "first_publish_s": round(min(r.end_time for r in done) - started, 1),
            "wall_s_4_partitions": round(max(r.end_time for r in done) - started, 1),
            "same_partition_twice_s": round(max(r.end_time for r in launched) - twice_start, 1),
            "same_partition_runs_overlap": any(max_overlap(rs) > 1 for rs in by_partition.values()),
            "killed_mid_publish": killed, "serve": load.summary(), "served_partitions": partitions_served,
            "bytes": stored(mode, writer_ws, reader_ws, home, pg_url),
            **({"postgres": postgres_activity(pg_url)} if pg_url else {}),
            "timeline": timeline(instance, everything, mark.wall0),
        }
    mark("torn_down")
    return result | {"time": mark.summary()}


def stored(mode: str, writer_ws: Path, reader_ws: Path, home: Path, pg_url: str | None) -> dict:
    """Bytes stored where: the writers' local folder (catalogs), the reader's copy, the bucket, Dagster's storage."""
    catalogs = bytes_on_disk(*writer_ws.rglob("catalog.duckdb*"))
    moved = [json.loads(p.read_text()) for p in writer_ws.rglob(".checkpoint-io.json")]
    out = {"runs_restored_bytes": [m["restored_bytes"] for m in moved],
           "runs_checkpointed_bytes": [m["checkpointed_bytes"] for m in moved],"writer_catalogs": catalogs, "writer_snapshots": bytes_on_disk(*writer_ws.rglob("snapshots")),
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


def postgres_activity(pg_url: str) -> dict:
    """Connections opened and transactions committed on the instance's Postgres (dagster-postgres connects anew for
    each operation, so sessions count its round trips)."""
    import psycopg2

    with psycopg2.connect(pg_url) as con, con.cursor() as cur:
        cur.execute("SELECT sum(sessions), sum(xact_commit) FROM pg_stat_database")
        sessions, commits = cur.fetchone()
    return {"sessions": int(sessions), "transactions": int(commits)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--think-s", type=float, default=0.0, help="each client's pause between requests")
    p.add_argument("--modes", nargs="+", default=["local", "production"], choices=["local", "production"])
    p.add_argument("--out", default=str(results_path("production")))
    args = p.parse_args()
    results = {}
    for mode in args.modes:  # the same process order every time: local first, then production
        with tempfile.TemporaryDirectory(prefix=f"rag-{mode}-") as tmp:
            results[mode] = run(mode, Path(tmp), args.clients, args.think_s)
            print(json.dumps(results[mode], indent=1), flush=True)
    if {"local", "production"} <= set(results):
        results["production_over_local_wall"] = round(results["production"]["wall_s_4_partitions"]
                                                      / results["local"]["wall_s_4_partitions"], 2)
    results["load_average"] = os.getloadavg()
    write_json(args.out, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
