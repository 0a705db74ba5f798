"""Partition keys name a collection exactly or are refused before any store exists; a
vanished collection is a deletion; an id published by two partitions is hidden and reported, never silent."""
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from assets.workspace_totals import published_elsewhere
from pipelines.cli import main
from pipelines.definitions import build_definitions
from pipelines.ingest_run import run_partitions
from pipelines.workspace_resources import workspace_resources
from rag.query.workspace import Workspace, shared_ids
from rag.retrieval.callers import Caller
from rag.sources.partitions import (
    PARTITIONS_DIR,
    STORE_INFO,
    PartitionError,
    partition_lance_uri,
    published_stores,
    resolve,
    retired_keys,
    slug,
    unpublished,
    vanished,
)
from rag.store.catalog import Catalog
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import read_pointer
from rag.units.linking import count_links

STAFF = Caller(frozenset({"staff"}))
METHODS = ("longrag", "shortchunk", "elite")


def doc(path: Path, doc_id: str, text: str, acl: str = "staff") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {doc_id}\ntitle: {doc_id.replace('-', ' ')}\nacl: [{acl}]\n---\n{text}\n")


def tree(tmp_path: Path) -> Path:
    """src/{hr,eng,ops} plus a planted canary beside the source and a sibling folder `plain`."""
    src = tmp_path / "src"
    doc(src / "hr" / "leave.md", "leave", "Annual leave is 30 days for every employee.")
    doc(src / "eng" / "deploys.md", "deploys", "Deploys happen on Tuesdays after the change board.")
    doc(src / "ops" / "pager.md", "pager", "The pager rotation changes every Monday at nine.")
    doc(src / "ops" / "backup.md", "backup", "Backups are restored in a drill every quarter.")
    doc(tmp_path / "canary.md", "canary", "CANARY-7731 must never be published.", acl="staff")
    doc(tmp_path / "plain" / "secret.md", "plain-secret", "PLAIN-4410 must never be published.", acl="staff")
    return src


def ids(ws: Path, question: str, method: str = "longrag", as_of=None) -> set[str]:
    return {i.doc_id for i in Workspace(ws).retrieve(method, STAFF, question, 4000, as_of=as_of).items}


ESCAPES = ["src/hr/../..", "src/hr/../../plain", "src/../plain", "../../etc", "src/hr/", "src/./hr", "src/hr/../eng",
           "src/hr~1of2", "src/hr~0of1", "src/hr\n", "src/hr\x1b[31m", "src/h\x00r", "/src/hr", "src//hr", "src\\hr",
           "src/hr\u2028", "SRC/hr", "src/hr ", " src/hr", "src/hr/x", "src/HR", "src/hr~", "src/" + "x" * 5000, "",
           ".", "..", "src/..", "~", "src/hr\t"]


@pytest.mark.parametrize("key", ESCAPES)
def test_a_key_that_is_not_exactly_a_collection_is_refused_in_one_line_naming_the_known_keys(tmp_path, key):
    src = tree(tmp_path)
    with pytest.raises(PartitionError) as err:
        resolve([str(src)], key, tmp_path / "ws")
    message = str(err.value)
    assert "\n" not in message and "\x1b" not in message and "\x00" not in message and len(message) < 600
    assert message.endswith("known: src/eng, src/hr, src/ops")
    assert not (tmp_path / "ws").exists()


def test_keys_compare_after_unicode_normalisation_only(tmp_path):
    src = tmp_path / "src"
    doc(src / "caf\u00e9" / "menu.md", "menu", "Soup on Fridays.")
    assert resolve([str(src)], "src/cafe\u0301", tmp_path / "ws").key == "src/caf\u00e9"   # NFD spelling, same key
    assert resolve([str(src)], "src/caf\u00e9", tmp_path / "ws").folder == src / "caf\u00e9"


@pytest.mark.parametrize("key", ["src/hr/../..", "src/hr/", "src/hr\n", "src/hr~1of2"])
def test_the_cli_refuses_an_unknown_key_before_any_store_or_run(tmp_path, capsys, key):
    src = tree(tmp_path)
    ws = tmp_path / "ws"
    code = main(["ingest", "--source", str(src), "--workspace", str(ws), "--partition", "src/eng", "--partition", key])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "known: src/eng, src/hr, src/ops" in err
    assert not (ws / PARTITIONS_DIR).exists() or not any(p.is_dir() for p in (ws / PARTITIONS_DIR).iterdir())


def test_a_dagster_run_of_an_unknown_key_creates_no_catalog(tmp_path):
    """The UI can add any dynamic partition key: the run fails on the key before the store is opened."""
    src = tree(tmp_path)
    ws = tmp_path / "ws"
    resources = workspace_resources(IngestSettings(workspace=ws, sources=[str(src)], partitioned=True))
    from assets.ingest import COLLECTIONS, build_ingest

    assets, checks = build_ingest(COLLECTIONS)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(COLLECTIONS.name, ["src/hr/../.."])
        result = dg.materialize([*assets, *checks], resources=resources, instance=instance,
                                partition_key="src/hr/../..", raise_on_error=False)
    assert not result.success
    assert not list((ws / PARTITIONS_DIR).glob(f"*/{STORE_INFO}")) and not list(ws.rglob("catalog.duckdb"))


@pytest.mark.slow
def test_a_vanished_collection_is_deleted_reported_and_retired_with_as_of_reads_kept(tmp_path, capsys):
    src, ws = tree(tmp_path), tmp_path / "ws"
    first = run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    assert sorted(first["partitions"]) == ["src/eng", "src/hr", "src/ops"] and first["vanished"] == []
    assert "pager" in ids(ws, "When does the pager rotation change?")
    before = Workspace(ws).resolve_as_of(max(i.created_at for i in Workspace(ws).snapshot().parts.values()))

    shutil.rmtree(src / "ops")
    assert main(["ingest", "--source", str(src), "--workspace", str(ws), "--partitioned"]) == 0
    out = capsys.readouterr().out
    assert "Vanished collection src/ops: its 2 documents deleted" in out

    for method in METHODS:
        assert not {"pager", "backup"} & ids(ws, "When does the pager rotation change? backups drill", method)
    assert "leave" in ids(ws, "How many days of annual leave?")
    assert "src/ops" in retired_keys(ws)
    for method in ("longrag", "shortchunk"):   # as-of reads within retention still see it
        assert "pager" in ids(ws, "When does the pager rotation change?", method, as_of=before)

    again = run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    assert again["vanished"] == [] and "src/ops" not in again["partitions"]

    doc(src / "ops" / "pager.md", "pager", "The pager rotation changes every Monday at nine.")   # it comes back
    back = run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    assert back["partitions"]["src/ops"]["documents"] == 1 and "src/ops" not in retired_keys(ws)
    assert "pager" in ids(ws, "When does the pager rotation change?")


@pytest.mark.slow
def test_a_missing_source_deletes_nothing(tmp_path):
    src, ws = tree(tmp_path), tmp_path / "ws"
    run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    src.rename(tmp_path / "unmounted")
    assert vanished([str(src)], ws) == []
    (tmp_path / "unmounted").rename(src)
    assert "pager" in ids(ws, "When does the pager rotation change?")


@pytest.mark.slow
def test_a_stray_store_left_by_a_malformed_key_is_retired_and_the_real_collection_reads_again(tmp_path):
    """A store an older version created for 'src/hr/' (same files, second store) hid every hr document."""
    src, ws = tree(tmp_path), tmp_path / "ws"
    run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    real = next(s for s in published_stores(ws) if s.key == "src/hr")
    stray = ws / PARTITIONS_DIR / slug("src/hr/")
    shutil.copytree(real.folder, stray, ignore=shutil.ignore_patterns("writer.lock"))
    lance = partition_lance_uri(str(ws / "lancedb"), "src/hr/")
    shutil.copytree(real.lance_uri, lance)
    (stray / STORE_INFO).write_text(json.dumps({"key": "src/hr/", "lance_uri": lance}))
    assert "leave" not in ids(ws, "How many days of annual leave?")   # hidden: one id in two partitions

    counts = run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)]))
    assert counts["vanished"] == ["src/hr/"] and counts["partitions"]["src/hr/"]["deleted"] == 1
    assert counts["shared_ids"] == []
    assert "leave" in ids(ws, "How many days of annual leave?")


@pytest.mark.slow
def test_an_id_in_two_partitions_is_an_error_in_both_partitions_the_totals_and_history(tmp_path, capsys):
    src, ws = tmp_path / "docs", tmp_path / "ws"
    doc(src / "hr" / "salaries.md", "pay-bands", "The pay band for grade 7 is 91,000 to 104,000 euros.", acl="hr")
    doc(src / "public" / "bands.md", "pay-bands", "Pay bands are published every January.", acl="everyone")
    doc(src / "public" / "canteen.md", "canteen", "The canteen opens at 11:30 every weekday.", acl="everyone")
    assert main(["ingest", "--source", str(src), "--workspace", str(ws), "--partitioned", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)

    places = [{"partition": "docs/hr", "version": "1", "source_path": str((src / "hr" / "salaries.md").resolve())},
              {"partition": "docs/public", "version": "1", "source_path": str((src / "public" / "bands.md").resolve())}]
    assert counts["shared_ids"] == [{"doc_id": "pay-bands", "places": places}]
    for key in ("docs/hr", "docs/public"):
        assert counts["partitions"][key]["shared_ids"] == [{"doc_id": "pay-bands",
                                                            "partitions": ["docs/hr", "docs/public"]}]

    assert main(["history", "pay-bands", "--workspace", str(ws)]) == 1
    said = capsys.readouterr().out
    assert "published by 2 partitions and hidden from readers" in said
    assert "docs/hr" in said and "docs/public" in said and said.count("\n") == 1
    assert main(["history", "canteen", "--workspace", str(ws)]) == 0

    # What a partition's run reads of the others (these errors, its cross-collection links) is their catalogs alone:
    # with every index gone the answers are the same, so a run opens no other partition's index.
    for s in published_stores(ws):
        shutil.rmtree(s.lance_uri)
    assert list(shared_ids(ws)) == ["pay-bands"]
    links = [("x", "pay-bands"), ("x", "canteen"), ("x", "nowhere")]
    assert published_elsewhere(str(ws), "docs/hr", links).ids == {"pay-bands", "canteen"}


@pytest.mark.slow
def test_the_sensor_and_the_nightly_schedule_delete_a_vanished_collection(tmp_path):
    src, ws = tree(tmp_path), tmp_path / "ws"
    defs = build_definitions(workspace_resources(IngestSettings(workspace=ws, sources=[str(src)], partitioned=True)))
    sensor, job = defs.get_sensor_def("collection_changes"), defs.resolve_job_def("ingest")
    nightly = defs.get_schedule_def("nightly_reindex")
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        def tick(cursor):
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            for request in result.dynamic_partitions_requests:
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            for run in result.run_requests:
                assert job.execute_in_process(instance=instance, partition_key=run.partition_key,
                                              tags=run.tags).success
            return result

        cursor = tick(None).cursor
        assert "pager" in ids(ws, "When does the pager rotation change?")
        shutil.rmtree(src / "ops")
        gone = tick(cursor)
        assert [(r.partition_key, r.tags.get("rag/vanished")) for r in gone.run_requests] == [("src/ops", "1")]
        assert not {"pager", "backup"} & ids(ws, "When does the pager rotation change? backups drill")
        retired = tick(gone.cursor)
        assert retired.run_requests == [] and "src/ops" in retired_keys(ws)
        assert retired.skip_reason.skip_message.endswith("retired the store of src/ops, whose deletion is published")
        assert tick(retired.cursor).run_requests == []

        shutil.rmtree(src / "eng")   # the nightly schedule alone (no sensor tick) applies this one
        requests = nightly.evaluate_tick(dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime.now(timezone.utc),
            repository_def=defs.get_repository_def())).run_requests
        assert {"src/eng", "src/ops"} <= {r.partition_key for r in requests}
        for r in requests:   # the retired collection's nightly run reads nothing and changes nothing
            assert job.execute_in_process(instance=instance, partition_key=r.partition_key).success
        assert not {"pager", "backup", "deploys"} & ids(ws, "pager rotation, backups drill, deploys on Tuesdays")
        assert "leave" in ids(ws, "How many days of annual leave?")


def link_warnings(ws: Path) -> dict[str, list[str]]:
    """Partition → the doc ids its published quarantine warns about a link to a missing document."""
    found = {}
    for s in published_stores(ws):
        reader = Catalog.snapshot(s.folder, read_pointer(s.folder))
        try:
            found[s.key] = [d for (d,) in reader.rows("SELECT doc_id FROM quarantine WHERE reason LIKE "
                                                      "'link to missing document%' ORDER BY doc_id")]
        finally:
            reader.close()
    return found


def test_a_first_partitioned_ingest_finds_link_targets_in_collections_not_published_yet(tmp_path, capsys):
    """eng runs first (keys run in order) and links to hr's and ops's documents, by id and by title, before either
    has published; one link points nowhere and stays missing."""
    src = tree(tmp_path)
    (src / "eng" / "onboarding.md").write_text("---\nid: onboarding\ntitle: onboarding\nacl: [staff]\nlinks: [leave, "
                                               "pager rotation, no-such-document]\n---\nNew engineers read the leave "
                                               "rules and the pager page.\n")
    (src / "ops" / "pager.md").write_text("---\nid: pager\ntitle: pager rotation\nacl: [staff]\nlinks: [deploys]\n"
                                          "---\nThe pager rotation changes every Monday at nine.\n")
    assert [s.key for s in unpublished([str(src)], tmp_path / "ws")] == ["src/eng", "src/hr", "src/ops"]
    assert main(["ingest", "--partitioned", "--source", str(src), "--workspace", str(tmp_path / "ws")]) == 0
    assert link_warnings(tmp_path / "ws") == {"src/eng": ["onboarding"], "src/hr": [], "src/ops": []}
    assert unpublished([str(src)], tmp_path / "ws") == []   # from now on, no run reads another collection's files
    reader = Workspace(tmp_path / "ws")
    try:
        counts = count_links(reader.snapshot().catalog.current_links())
    finally:
        reader.close()
    assert {k: (c.cross_collection, c.missing) for k, c in counts.items()} == {
        "src/eng": (2, 1), "src/hr": (0, 0), "src/ops": (1, 0)}
