"""One writer per workspace, whatever the entry point: a second one waits, or stops with one line naming the holder."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from conftest import REPO

from pipelines.ingest_run import run_ingest
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.settings import IngestSettings
from rag.store.writer_lock import LOCK_FILE, WriterBusy, WriterLock

HOLD = """
import sys, time
from rag.store.writer_lock import WriterLock
WriterLock(sys.argv[1], "test holder").acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def hold(workspace, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(workspace), str(seconds)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def ingest(corpus, workspace, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(corpus),
                             "--workspace", str(workspace), "--json", *extra], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def held_by(workspace, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    """Wait until `proc` holds the workspace's writer lock: the lock file names its holder while it holds it."""
    lock, deadline = workspace / LOCK_FILE, time.monotonic() + timeout_s
    while f'"pid": {proc.pid},' not in (lock.read_text() if lock.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
        time.sleep(0.05)


def test_a_second_writer_gives_up_after_its_wait_with_one_line_naming_the_holder(corpus, workspace):
    holder = hold(workspace, 3600)  # killed below; long enough for a slow start of the second writer
    try:
        start = time.monotonic()
        out, err = ingest(corpus, workspace, "--wait", "1").communicate(timeout=300)
        waited = time.monotonic() - start
    finally:
        holder.kill()
    assert err.strip(), out
    [line] = err.strip().splitlines()
    assert line.startswith("rag ingest: error: ") and f"pid {holder.pid} (test holder), since 20" in line
    assert "gave up after 1 s" in line and out == "" and waited >= 1


def waiting_on_the_lock(workspace, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    """Wait until `proc` has opened the workspace's lock file, which it does only to take the lock."""
    lock, fds, deadline = (workspace / LOCK_FILE).resolve(), Path(f"/proc/{proc.pid}/fd"), time.monotonic() + timeout_s
    while not any(_points_to(fd, lock) for fd in fds.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
        time.sleep(0.05)


def _points_to(fd: Path, target: Path) -> bool:
    try:
        return Path(os.readlink(fd)) == target
    except OSError:  # closed since it was listed
        return False


def test_a_second_writer_waits_for_the_first_and_both_publish_without_interleaving(corpus, workspace):
    # Published once in this process first (its vectors memoised, tests/conftest.py), so each writer process embeds
    # only its own edit. The first writer is stopped while it holds the lock, so the second is seen waiting on it
    # however fast the first would have finished.
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    edited = corpus / "operations" / "capacity-limits.md"
    edited.write_text(edited.read_text() + "\nOnly the first writer publishes this sentence.\n")
    first = ingest(corpus, workspace)
    held_by(workspace, first)
    (corpus / "operations" / "extra.md").write_text("---\nid: extra\ntitle: Extra\nacl: [support]\n---\nExtra text.\n")
    first.send_signal(signal.SIGSTOP)
    try:
        second = ingest(corpus, workspace, "--wait", "600")
        waiting_on_the_lock(workspace, second)
        assert f'"pid": {first.pid},' in (workspace / LOCK_FILE).read_text()   # the first still holds it
    finally:
        first.send_signal(signal.SIGCONT)
    outputs = [p.communicate(timeout=900) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [e for _, e in outputs]
    assert all(json.loads(out)["checks_passed"] for out, _ in outputs)
    catalog = Catalog(workspace / "catalog.duckdb")
    runs = catalog.rows("SELECT started_at, finished_at FROM publish_log WHERE status = 'published' ORDER BY 1")
    assert len(runs) == 3 and runs[1][1] <= runs[2][0]  # the second writer began after the first had finished
    index = SubchunkIndex(workspace / "lancedb")
    assert consistency.index_matches_current_units(catalog, index).passed
    assert consistency.documents_in_exactly_one_unit(catalog).passed
    catalog.close()


def test_the_lock_is_reentrant_in_a_process_and_released_when_the_last_holder_leaves(tmp_path):
    outer, inner = WriterLock(tmp_path, "outer", wait_s=0), WriterLock(tmp_path, "inner", wait_s=0)
    with outer:
        with inner:
            pass
        probe = subprocess.run([sys.executable, "-c", _TRY, str(tmp_path)], cwd=REPO, capture_output=True, text=True)
        assert probe.stdout.strip() == "busy"
    probe = subprocess.run([sys.executable, "-c", _TRY, str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert probe.stdout.strip() == "free"


_TRY = """
import sys
from rag.store.writer_lock import WriterBusy, WriterLock
try:
    WriterLock(sys.argv[1], wait_s=0).acquire()
    print("free")
except WriterBusy:
    print("busy")
"""


def test_a_killed_holder_frees_the_workspace_at_once(tmp_path):
    holder = hold(tmp_path, 3600)
    try:
        WriterLock(tmp_path, wait_s=0).acquire()
        raise AssertionError("acquired a lock another process holds")
    except WriterBusy:
        pass
    holder.kill()
    holder.wait()
    lock = WriterLock(tmp_path, wait_s=2)
    lock.acquire()
    lock.release()


def test_dagster_queues_one_run_per_workspace_value_and_per_partition():
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())["run_coordinator"]["config"]
    assert config["tag_concurrency_limits"] == [
        {"key": "rag/workspace", "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]


def test_the_ingest_job_is_tagged_with_its_workspace_and_runs_its_steps_in_one_process(corpus, workspace):
    from pipelines.definitions import build_definitions
    from pipelines.workspace_resources import workspace_resources
    from rag.store.settings import IngestSettings

    resources = workspace_resources(IngestSettings(workspace=workspace, sources=[str(corpus)]))
    job = build_definitions(resources).resolve_job_def("ingest")
    assert job.tags["rag/workspace"] == str(workspace.resolve())
    assert job.executor_def.name == "in_process"
