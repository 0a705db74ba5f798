"""The ingest assets in a real Dagster instance: sample corpus → units → index, checks green."""
import dagster as dg
import pytest

from assets.ingest import ingest_assets, ingest_checks
from pipelines.workspace_resources import workspace_resources
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import read_pointer
from rag.store.writer_lock import LOCK_FILE


def materialize(instance, workspace, sources, **kw):
    result = dg.materialize([*ingest_assets, *ingest_checks], instance=instance,
                            resources=workspace_resources(IngestSettings(workspace=workspace, sources=sources, **kw)))
    assert result.success
    meta = {e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    return meta, checks


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def test_sample_corpus_publishes_with_every_asset_check_passing(instance, corpus, workspace):
    meta, checks = materialize(instance, workspace, [corpus])
    assert meta["source_documents"]["documents_current"] == 37
    assert meta["source_documents"]["new_versions"] == 42
    statuses = dict(Catalog(workspace / "catalog.duckdb").rows("SELECT status, count(*) FROM documents GROUP BY 1"))
    assert statuses == {"current": 37, "superseded": 5}
    assert meta["source_documents"]["quarantined"] == 0
    assert meta["long_units"]["max_unit_tokens"] <= 4000
    assert meta["subchunk_index"]["embedded"] == meta["subchunk_index"]["subchunks"] > 0
    assert set(checks) == {"every_document_in_one_unit", "index_matches_current_units", "no_stale_versions_in_index",
                           "index_rows_match_catalog"}
    assert all(checks.values())


def test_second_run_over_unchanged_input_embeds_nothing(instance, corpus, workspace):
    first, _ = materialize(instance, workspace, [corpus])
    second, checks = materialize(instance, workspace, [corpus])
    assert second["subchunk_index"]["embedded"] == 0
    assert second["long_units"]["published"] == 0
    # the second run keeps its units unplanned, and reports them as the run that planned them did
    same = ("units", "mean_members_per_unit", "max_unit_tokens", "missing_links", "components", "unit_size_histogram")
    assert {k: second["long_units"][k] for k in same} == {k: first["long_units"][k] for k in same}
    assert second["long_units"]["unchanged"] == first["long_units"]["units"]
    assert second["long_units"]["components_replanned"] == second["long_units"]["documents_tokenised"] == 0
    assert second["subchunk_index"]["subchunks"] == first["subchunk_index"]["subchunks"]
    assert all(checks.values())


def test_a_run_opens_its_catalog_once_and_leaves_nothing_held_even_after_a_failed_step(instance, corpus, workspace,
                                                                                       tmp_path, monkeypatch):
    """Three assets and four checks share one writer open of the catalog (an open is a noticeable part of a small
    run's CPU); after the run, and after a run whose first step failed, no writer holds the workspace."""
    writer_opens, real_init = [], Catalog.__init__

    def counted(self, *args, **kw):
        real_init(self, *args, **kw)
        writer_opens.extend([self.path] if not self.read_only else [])

    monkeypatch.setattr(Catalog, "__init__", counted)
    materialize(instance, workspace, [corpus])
    assert writer_opens == [str(workspace / "catalog.duckdb")]
    assert (workspace / LOCK_FILE).read_text() == ""   # a holder writes its pid here; release empties it
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = dg.materialize([*ingest_assets, *ingest_checks], instance=instance, raise_on_error=False,
                            resources=workspace_resources(IngestSettings(workspace=workspace, sources=[str(empty)])))
    assert not failed.success and (workspace / LOCK_FILE).read_text() == ""
    meta, checks = materialize(instance, workspace, [corpus])   # and the next run writes
    assert meta["subchunk_index"]["embedded"] == 0 and all(checks.values())


def test_bad_inputs_are_quarantined_and_everything_else_published(instance, corpus, workspace):
    from conftest import SAMPLES

    meta, checks = materialize(instance, workspace, [corpus, SAMPLES / "bad"], default_acl=["support"])
    assert meta["source_documents"]["quarantined"] == 21
    assert "binary file" in meta["source_documents"]["quarantine"]
    catalog = Catalog(workspace / "catalog.duckdb")
    ids = {d.doc_id for d in catalog.current_documents()}
    assert {"missing-link", "cycle-a", "cycle-b", "field-notes-txt", "dup-doc", "edge-offline-cache"} <= ids
    assert not {"empty-acl", "no-acl"} & ids  # the default ACL never fills in front matter without an acl key
    reasons = " ".join(r[3] for r in catalog.quarantine())
    assert "link to missing document 'no-such-document'" in reasons
    assert all(checks.values())


def test_new_version_replaces_old_text_in_index_and_leaves_other_units_alone(instance, corpus, workspace):
    materialize(instance, workspace, [corpus])
    catalog = Catalog(workspace / "catalog.duckdb")
    before = catalog.current_units()
    log = corpus / "operations" / "log-rotation.2026.md"
    text = log.read_text().replace('version: "2026"', 'version: "2027"').replace("64 MB", "96 MB")
    (corpus / "operations" / "log-rotation.2027.md").write_text(text)
    catalog.close()

    meta, checks = materialize(instance, workspace, [corpus])
    catalog = Catalog(workspace / "catalog.duckdb")
    after = catalog.current_units()
    changed = {u for u in after if before.get(u) != after[u]}
    assert meta["source_documents"]["superseded"] == 1
    assert len(changed) == 1 and meta["long_units"]["published"] == 1
    assert 0 < meta["subchunk_index"]["embedded"] < meta["subchunk_index"]["subchunks"]
    index = SubchunkIndex(workspace / "lancedb")
    versions = index.table.to_lance().to_table(columns=["doc_id", "doc_version"],
                                               filter="doc_id = 'edge-log-rotation'").column("doc_version")
    assert set(versions.to_pylist()) == {"2027"}
    assert all(checks.values())


def test_deleted_file_removes_its_rows_and_is_marked_deleted(instance, corpus, workspace):
    materialize(instance, workspace, [corpus])
    (corpus / "security" / "forensics.md").unlink()
    meta, checks = materialize(instance, workspace, [corpus])
    assert meta["source_documents"]["deleted"] == 1
    catalog = Catalog.snapshot(workspace, read_pointer(workspace))  # the writer keeps no version no file holds
    forensics = catalog.rows("SELECT doc_id, status FROM documents WHERE source_path LIKE '%forensics.md'")
    catalog.close()
    assert [s for _, s in forensics] == ["deleted"]
    doc_id = forensics[0][0]
    index = SubchunkIndex(workspace / "lancedb")
    assert index.table.count_rows(f"doc_id = '{doc_id}'") == 0
    assert all(checks.values())


def test_definitions_load_for_dagster_dev():
    from pipelines.definitions import defs as load

    defs = load()
    dg.Definitions.validate_loadable(defs)
    assert {s.name for s in defs.schedules} == {"nightly_reindex", "nightly_evaluation",
                                                "nightly_workspace_evaluation"}
    assert defs.resolve_assets_def("retrieval_evaluation").partitions_def is not None
    assert "benchmark_folders" in {s.name for s in defs.sensors}


def test_ask_job_answers_a_configured_question_from_the_ui(instance, corpus, workspace):
    from pipelines.definitions import build_definitions

    defs = build_definitions(workspace_resources(IngestSettings(workspace=workspace, sources=[str(corpus)])))
    assert defs.resolve_job_def("ingest").execute_in_process(instance=instance).success
    config = {"ops": {"answer_question": {"config": {
        "question": "How long does the offline cache hold telemetry?", "groups": ["support"], "budget": 1500}}}}
    result = defs.resolve_job_def("ask").execute_in_process(instance=instance, run_config=config)
    reply = result.output_for_node("answer_question")
    assert reply["reader"] == "extractive"
    assert reply["citations"] and reply["citations_valid"]
