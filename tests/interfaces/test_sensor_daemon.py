"""Through the real Dagster daemon: documents added, removed, put back and removed again are ingested each time,
in both layouts (a run key names a change, not a folder state the daemon has run before)."""
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from bench import topology
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller

QUESTION = "What does the quarry relay checklist say about the Zephyr-41 valve?"
READER = Caller(frozenset({"support"}))


def write_new_documents(folder: Path) -> None:
    """Seven documents the sample corpus does not have, as a colleague would add them to `corpus/operations`."""
    folder.mkdir(parents=True)
    for i in range(7):
        (folder / f"quarry-relay-{i}.md").write_text(
            f"---\nid: quarry-relay-{i}\ntitle: Quarry relay checklist {i}\nacl: [support]\n---\n"
            f"Step {i} of the quarry relay checklist: close the Zephyr-41 valve before relay {i} is reset.\n")


def finished_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    records = instance.get_run_records(dg.RunsFilter(job_name="ingest"))
    return [r.dagster_run for r in records if r.dagster_run.is_finished]


def wait_for_runs(instance, count: int, daemon, log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while len(finished_runs(instance)) < count:
        assert daemon.poll() is None, f"the daemon exited: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, (f"{len(finished_runs(instance))} of {count} runs after {timeout_s} s; "
                                             f"daemon log: {log.read_text()[-2000:]}")
        time.sleep(1)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in finished_runs(instance))


def served(workspace: Path, embedder) -> set[str]:
    result = Workspace(workspace, embedder=embedder).retrieve("longrag", READER, QUESTION, 4000)
    return {i.doc_id for i in result.items if i.doc_id.startswith("quarry-relay-")}


@pytest.mark.slow
@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_add_remove_add_remove_is_ingested_each_time_by_the_daemon(tmp_path, corpus, embedder, partitioned):
    workspace, home, stash = tmp_path / "ws", tmp_path / "dagster_home", tmp_path / "stash"
    write_new_documents(stash)
    (tmp_path / "no-benchmarks").mkdir()   # the evaluation sensor finds nothing to prepare
    topology.write_instance(home, None)
    env = {**os.environ, "DAGSTER_HOME": str(home), "RAG_SOURCES": str(corpus), "RAG_WORKSPACE": str(workspace),
           "RAG_SENSOR_INTERVAL_S": "1", "RAG_BENCHMARKS": str(tmp_path / "no-benchmarks"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(topology.REPO), os.environ.get("PYTHONPATH")]))}
    if partitioned:
        env["RAG_PARTITIONS"] = "collections"
    first_runs = 3 if partitioned else 1   # a partitioned first tick runs each collection
    # the instance's storage is made before the daemon starts: two processes creating it at once race
    with dg.DagsterInstance.from_config(str(home)) as instance, \
            topology.dagster_daemon(env, tmp_path / "daemon.log") as daemon:
        wait_for_runs(instance, first_runs, daemon, tmp_path / "daemon.log")
        assert served(workspace, embedder) == set()
        for step, present in enumerate([True, False, True, False], start=1):
            for doc in sorted(stash.iterdir()):
                target = corpus / "operations" / doc.name
                # put back as from a backup: the same bytes and times, so the folder's state repeats exactly
                shutil.copy2(doc, target) if present else target.unlink()
            wait_for_runs(instance, first_runs + step, daemon, tmp_path / "daemon.log")
            expected = {f"quarry-relay-{i}" for i in range(7)} if present else set()
            assert served(workspace, embedder) == expected, f"after change {step}"
        keys = [r.tags.get("dagster/run_key") for r in finished_runs(instance)]
        assert len(keys) == len(set(keys)) == first_runs + 4
