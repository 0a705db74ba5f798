"""Partition runs in real processes: in parallel they give the serial result, and a killed one is repaired."""
import io
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stdout

import numpy as np
import pytest
from conftest import REPO

from pipelines.cli import main
from rag.query.workspace import Workspace
from rag.sources.partitions import store
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex

PAIR = ["corpus/installation", "corpus/operations"]


def start(corpus, workspace, *partitions) -> subprocess.Popen:
    flags = [a for p in partitions for a in ("--partition", p)] or ["--partitioned"]
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(corpus),
                             "--workspace", str(workspace), "--json", *flags], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def publish_here(corpus, workspace, *partitions) -> dict:
    """The same CLI run in this process (its vectors memoised): for the states the processes are compared with, and
    for the run that repairs a killed process's leftovers (it knows of them only what is on disk)."""
    flags = [a for p in partitions for a in ("--partition", p)] or ["--partitioned"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["ingest", "--source", str(corpus), "--workspace", str(workspace), "--json", *flags]) == 0
    return json.loads(out.getvalue())


def finish(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0
    return json.loads(out)


def state(workspace, key):
    """Everything a partition published: document versions, units with members, index rows with vectors."""
    s = store(workspace, key)
    catalog = Catalog(s.catalog_path)
    try:
        docs = catalog.rows("SELECT doc_id, version, status, content_hash, acl FROM documents ORDER BY ALL")
        units = catalog.rows("SELECT unit_id, unit_version, status, content_hash FROM units ORDER BY ALL")
        members = catalog.rows("SELECT * FROM unit_members ORDER BY ALL")
    finally:
        catalog.close()
    index = SubchunkIndex(s.lance_uri)
    data, stored = index.rows(index.table.schema.names)
    order = [(c, "ascending") for c in ("doc_id", "doc_version", "part", "member_start", "char_start")]
    rows = data.append_column("vector", stored).sort_by(order)
    vectors = np.asarray(rows.column("vector").to_pylist(), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)  # int8 at rest: compare directions (one step ~2e-3)
    return (docs, units, members, rows.drop_columns(["vector"]).to_pylist()), vectors


def run_interval(workspace, key):
    catalog = Catalog(store(workspace, key).catalog_path)
    try:
        return catalog.rows("SELECT min(started_at), max(finished_at) FROM publish_log")[0]
    finally:
        catalog.close()


@pytest.mark.slow
def test_two_partitions_run_in_parallel_processes_and_publish_what_one_serial_run_publishes(tmp_path, corpus):
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    publish_here(corpus, serial, *PAIR)
    procs = [start(corpus, parallel, key) for key in PAIR]
    results = [finish(p) for p in procs]

    assert all(r["checks_passed"] for r in results)
    (a_start, a_end), (b_start, b_end) = (run_interval(parallel, k) for k in PAIR)
    assert a_start < b_end and b_start < a_end, "the two partition runs did not overlap"
    for key in PAIR:
        want, want_vectors = state(serial, key)
        got, got_vectors = state(parallel, key)
        assert got == want
        assert np.allclose(got_vectors, want_vectors, atol=4e-3)
    assert sorted(Workspace(parallel).snapshot().parts) == PAIR


def bump(corpus, round_: int) -> None:
    doc = corpus / "operations" / "capacity-limits.md"
    head, body = doc.read_text().split("\n---\n", 1)
    head = "\n".join(f'version: "{3000 + round_}"' if line.startswith("version:") else line
                     for line in head.splitlines())
    doc.write_text(f"{head}\n---\n{body}\nRevision {round_}: the spare-capacity threshold is {40 + round_} percent.\n")


@pytest.mark.slow
def test_a_partition_killed_mid_run_is_repaired_by_its_next_run_and_the_others_are_untouched(tmp_path, corpus):
    ws = tmp_path / "ws"
    publish_here(corpus, ws)
    untouched, _ = state(ws, "corpus/security")
    for round_, delay in enumerate((1.5, 4.0, 7.0)):
        bump(corpus, round_)
        proc = start(corpus, ws, "corpus/operations")
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader = Workspace(ws)   # readers keep answering from the last published state meanwhile
        assert reader.snapshot().catalog.current_counts()[1]  # current units

        assert publish_here(corpus, ws, "corpus/operations")["checks_passed"]
        s = store(ws, "corpus/operations")
        catalog, index = Catalog(s.catalog_path), SubchunkIndex(s.lance_uri)
        try:
            for finding in (consistency.documents_in_exactly_one_unit(catalog),
                            consistency.index_matches_current_units(catalog, index),
                            consistency.no_stale_rows(catalog, index),
                            consistency.index_rows_match_catalog(catalog, index)):
                assert finding.passed, finding.examples
            [(version,)] = catalog.rows("SELECT version FROM documents WHERE doc_id = 'capacity-limits' "
                                        "AND status = 'current'")
        finally:
            catalog.close()
        assert version == str(3000 + round_)
    assert state(ws, "corpus/security")[0] == untouched
