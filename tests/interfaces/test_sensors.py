"""Change propagation through a real Dagster instance: sensor → run request → ingest run → retrieval."""
import shutil

import dagster as dg
import pytest

from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.store.catalog import Catalog
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import read_pointer


@pytest.fixture
def setup(tmp_path, corpus, workspace):
    home = tmp_path / "dagster_home"
    home.mkdir()
    defs = build_definitions(workspace_resources(IngestSettings(workspace=workspace, sources=[str(corpus)])))
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield defs, instance, corpus, workspace


def tick(defs, instance, cursor=None):
    sensor = next(s for s in defs.sensors if s.name.startswith("source_changes_"))  # not benchmark_folders
    with dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs) as ctx:
        result = sensor.evaluate_tick(ctx)
    return result.run_requests, result.cursor


def run(defs, instance, request=None):
    result = defs.resolve_job_def("ingest").execute_in_process(instance=instance,
                                                                tags=request.tags if request else None)
    assert result.success
    meta = {e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}
    return meta, {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def baseline(defs, instance, workspace):
    """A first ingest and a sensor tick: the cursor to compare against and the units it published."""
    run(defs, instance)
    _, cursor = tick(defs, instance)
    catalog = Catalog(workspace / "catalog.duckdb")
    units = catalog.current_units()
    catalog.close()
    return cursor, units


def ask(workspace, embedder, question, method="longrag", groups=("field-engineering", "support", "partners")):
    return Workspace(workspace, embedder=embedder).retrieve(method, Caller(frozenset(groups)), question, 8000)


def test_quiet_source_requests_nothing_after_the_first_tick(setup):
    defs, instance, _, _ = setup
    requests, cursor = tick(defs, instance)
    assert len(requests) == 1 and requests[0].tags["rag/files"] == "42"
    assert tick(defs, instance, cursor)[0] == []


def test_deleted_document_is_gone_for_both_methods_after_the_sensor_run(setup, embedder):
    defs, instance, corpus, workspace = setup
    cursor, units_before = baseline(defs, instance, workspace)

    (corpus / "operations" / "error-codes.md").unlink()
    [request], _ = tick(defs, instance, cursor)
    meta, checks = run(defs, instance, request)

    assert meta["source_documents"]["deleted"] == 1 and all(checks.values())
    assert meta["subchunk_index"]["embedded"] == 0  # the unit's other members re-use their vectors
    catalog = Catalog(workspace / "catalog.duckdb")
    changed = {u for u, v in catalog.current_units().items() if units_before.get(u) != v}
    gone = set(units_before) - set(catalog.current_units())
    assert meta["long_units"]["published"] == len(changed) <= 2 and len(gone) <= 2
    for method in ("longrag", "shortchunk", "elite"):
        result = ask(workspace, embedder, "Which error code means the cache is full?", method)
        assert "error-codes-reference" not in {i.doc_id for i in result.items}


def test_new_version_is_served_with_its_label_and_other_units_keep_their_versions(setup, embedder):
    defs, instance, corpus, workspace = setup
    cursor, before = baseline(defs, instance, workspace)

    old = corpus / "operations" / "log-rotation.2026.md"
    (corpus / "operations" / "log-rotation.2027.md").write_text(
        old.read_text().replace('version: "2026"', 'version: "2027"').replace("64 MB", "80 MB"))
    [request], _ = tick(defs, instance, cursor)
    meta, checks = run(defs, instance, request)

    assert all(checks.values())
    after = Catalog(workspace / "catalog.duckdb").current_units()
    changed = [u for u in after if after[u] != before.get(u)]
    assert len(changed) == 1 and after[changed[0]][0] == before[changed[0]][0] + 1
    assert 0 < meta["subchunk_index"]["embedded"] <= 8  # only the new version's changed sub-chunks
    result = ask(workspace, embedder, "At what size do gateway logs rotate?")
    rotation = [i for i in result.items if i.doc_id == "edge-log-rotation"]
    assert [i.doc_version for i in rotation] == ["2027"]
    assert "80 MB" in rotation[0].text and "[edge-log-rotation · version 2027]" in rotation[0].text
    assert "64 MB" not in result.context()


def test_a_burst_of_changes_during_a_run_is_neither_lost_nor_applied_twice(setup, embedder):
    defs, instance, corpus, workspace = setup
    run(defs, instance)
    _, cursor = tick(defs, instance)
    (corpus / "security" / "forensics.md").unlink()
    [first], cursor = tick(defs, instance, cursor)
    (corpus / "installation" / "grounding.md").unlink()  # arrives while the first run would be in flight
    [second], _ = tick(defs, instance, cursor)
    assert first.run_key != second.run_key

    meta1, _ = run(defs, instance, first)
    meta2, checks = run(defs, instance, second)
    meta3, _ = run(defs, instance, second)  # a retried request changes nothing
    assert meta1["source_documents"]["deleted"] + meta2["source_documents"]["deleted"] == 2
    assert meta3["source_documents"]["deleted"] == 0 and meta3["long_units"]["published"] == 0
    assert all(checks.values())
    published = Catalog.snapshot(workspace, read_pointer(workspace))  # history is the read state's (the writer drops it)
    statuses = dict(published.rows(
        "SELECT doc_id, status FROM documents WHERE doc_id IN ('incident-forensics-collection', 'install-grounding')"))
    published.close()
    assert statuses == {"incident-forensics-collection": "deleted", "install-grounding": "deleted"}


def test_as_of_read_returns_what_was_current_then_and_history_shows_both_versions(setup, embedder):
    from datetime import datetime, timezone

    defs, instance, corpus, workspace = setup
    run(defs, instance)
    then = datetime.now(timezone.utc).replace(tzinfo=None)
    old = corpus / "operations" / "log-rotation.2026.md"
    (corpus / "operations" / "log-rotation.2027.md").write_text(
        old.read_text().replace('version: "2026"', 'version: "2027"').replace("64 MB", "77 MB"))
    run(defs, instance)

    reader = Workspace(workspace, embedder=embedder)
    question, caller = "At what size do gateway logs rotate?", Caller(frozenset({"support"}))
    now = reader.retrieve("longrag", caller, question, 8000)
    past = reader.retrieve("longrag", caller, question, 8000, as_of=then)
    version = {r.doc_id: r.doc_version for r in now.items}, {r.doc_id: r.doc_version for r in past.items}
    assert version[0]["edge-log-rotation"] == "2027" and version[1]["edge-log-rotation"] == "2026"
    assert "77 MB" not in past.context() and "64 MB" in past.context()

    versions, units = reader.snapshot().catalog.history("edge-log-rotation")
    assert [(v.version, v.status) for v in versions] == [("2025", "superseded"), ("2026", "superseded"),
                                                         ("2027", "current")]
    assert {(u.doc_version, u.status) for u in units} == {("2026", "retired"), ("2027", "current")}


def test_a_document_removed_put_back_and_removed_again_is_a_change_each_time(setup, embedder):
    defs, instance, corpus, workspace = setup
    run(defs, instance)
    [first], cursor = tick(defs, instance)
    doc = corpus / "operations" / "error-codes.md"
    backup = doc.parent.parent / "error-codes.backup"
    shutil.copy2(doc, backup)
    keys, deleted = [first.run_key], []
    for present in (False, True, False):
        shutil.copy2(backup, doc) if present else doc.unlink()   # the same bytes and times: an earlier state
        [request], cursor = tick(defs, instance, cursor)
        meta, _ = run(defs, instance, request)
        keys.append(request.run_key)
        deleted.append(meta["source_documents"]["deleted"])
        served = {i.doc_id for i in ask(workspace, embedder, "Which error code means the cache is full?").items}
        assert ("error-codes-reference" in served) == present
    assert len(set(keys)) == 4 and deleted == [1, 0, 1]
