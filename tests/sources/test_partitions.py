"""Collections as partitions: which files each reads, one store each, and readers that see them as one workspace."""
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
from conftest import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.definitions import build_definitions
from pipelines.ingest_run import run_ingest, run_partitions
from pipelines.workspace_resources import workspace_resources
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller, load_users
from rag.retrieval.longrag import LongRAGConfig, _lexical
from rag.sources.loaders import walk
from rag.sources.partitions import PartitionError, Selection, discover, resolve, shard_of, shards_for
from rag.store.settings import IngestSettings


def doc(path: Path, doc_id: str, acl: str, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {doc_id}\ntitle: {doc_id.replace('-', ' ')}\nacl: [{acl}]\n---\n{text}\n")


def test_each_sub_folder_is_a_collection_and_the_top_level_files_are_one_more(tmp_path):
    src = tmp_path / "handbook"
    doc(src / "hr" / "leave.md", "leave", "staff", "Annual leave is 30 days.")
    doc(src / "hr" / "deep" / "parental.md", "parental", "staff", "Parental leave is 16 weeks.")
    doc(src / "it" / "vpn.md", "vpn", "staff", "The VPN needs a hardware key.")
    doc(src / "welcome.md", "welcome", "staff", "Welcome to the company.")
    (src / ".git").mkdir()

    specs = {s.key: s for s in discover([str(src)], tmp_path / "ws")}

    assert sorted(specs) == ["handbook", "handbook/hr", "handbook/it"]
    files = {k: sorted(p.name for p, why in walk(s.folder, s.selection) if why is None) for k, s in specs.items()}
    assert files == {"handbook": ["welcome.md"], "handbook/hr": ["leave.md", "parental.md"],
                     "handbook/it": ["vpn.md"]}
    assert resolve([str(src)], "handbook/hr") == specs["handbook/hr"]


def test_a_large_collection_is_hash_sharded_once_and_keeps_its_shards_as_it_grows(tmp_path):
    src = tmp_path / "wiki"
    for i in range(9):
        doc(src / "eng" / f"page-{i}.md", f"page-{i}", "eng", f"Page {i}.")

    first = [s.key for s in discover([str(src)], tmp_path / "ws", shard_files=4)]
    for i in range(9, 40):
        doc(src / "eng" / f"page-{i}.md", f"page-{i}", "eng", f"Page {i}.")
    later = [s.key for s in discover([str(src)], tmp_path / "ws", shard_files=4)]

    assert first == later == [f"wiki/eng~{k}of4" for k in range(4)]
    specs = [resolve([str(src)], key, tmp_path / "ws") for key in later]   # the shard count is the recorded one
    read = [p.name for spec in specs for p, why in walk(spec.folder, spec.selection) if why is None]
    assert sorted(read) == sorted(f"page-{i}.md" for i in range(40))


@given(st.lists(st.text("abc/._-xyz", min_size=1, max_size=12), min_size=1, max_size=30, unique=True),
       st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_every_file_belongs_to_exactly_one_shard(paths, exponent):
    n = 2 ** exponent
    for path in paths:
        assert sum(Selection(shard=(k, n)).admits(path) for k in range(n)) == 1
        assert Selection(shard=(shard_of(path, n), n)).admits(path)


def test_shard_counts_are_powers_of_two_that_keep_shards_under_the_threshold():
    assert [shards_for(files, 100) for files in (0, 100, 101, 250, 401, 1600)] == [1, 1, 2, 4, 8, 16]


def test_a_key_naming_no_configured_source_is_refused_in_one_line(tmp_path):
    doc(tmp_path / "docs" / "hr" / "leave.md", "leave", "staff", "Annual leave is 30 days.")
    with pytest.raises(PartitionError, match="'elsewhere/hr' is not a collection or shard of the sources; known: docs/hr$"):
        resolve([str(tmp_path / "docs")], "elsewhere/hr")
    with pytest.raises(PartitionError, match="'docs/hr~4of4' is not a collection or shard"):
        resolve([str(tmp_path / "docs")], "docs/hr~4of4")


@pytest.mark.slow
def test_a_partitioned_workspace_answers_every_user_exactly_as_the_whole_one(tmp_path, corpus):
    """Same units (grouping never crosses a collection), so the same context for every question and user."""
    run_ingest(IngestSettings(workspace=str(tmp_path / "whole"), sources=[str(corpus)]))
    counts = run_partitions(IngestSettings(workspace=str(tmp_path / "parts"), sources=[str(corpus)]))
    assert sorted(counts["partitions"]) == ["corpus/installation", "corpus/operations", "corpus/security"]
    assert counts["checks_passed"]
    whole, parts = Workspace(tmp_path / "whole"), Workspace(tmp_path / "parts")
    # each unit version's members (document versions and ranges), as readers hold them; publish ids differ
    members = [sorted(r[:2] + r[3:] for r in w.snapshot().catalog.unit_membership()) for w in (whole, parts)]
    assert members[0] == members[1] and members[0]
    users = load_users(SAMPLES / "users.yaml")
    questions = [json.loads(line) for line in (SAMPLES / "questions.jsonl").read_text().splitlines()][:12]
    for q in questions:
        for method in ("longrag", "shortchunk", "elite"):
            a = whole.retrieve(method, users[q["asked_as"]], q["question"], 1000)
            b = parts.retrieve(method, users[q["asked_as"]], q["question"], 1000)
            assert [(i.doc_id, i.doc_version, i.text) for i in a.items] == \
                   [(i.doc_id, i.doc_version, i.text) for i in b.items], (method, q["qid"])


@pytest.mark.slow
def test_a_document_id_published_by_two_partitions_is_hidden_rather_than_read_under_the_wrong_acl(tmp_path):
    src = tmp_path / "docs"
    doc(src / "hr" / "salaries.md", "pay-bands", "hr", "The pay band for grade 7 is 91,000 to 104,000 euros.")
    doc(src / "public" / "bands.md", "pay-bands", "everyone", "Pay bands are published every January.")
    doc(src / "public" / "canteen.md", "canteen", "everyone", "The canteen opens at 11:30 every weekday.")
    run_partitions(IngestSettings(workspace=str(tmp_path / "ws"), sources=[str(src)]))

    ws = Workspace(tmp_path / "ws")
    assert ws.snapshot().catalog.hidden_ids() == ["pay-bands"]
    for groups in ({"everyone"}, {"hr"}, {"hr", "everyone"}):
        for method in ("longrag", "shortchunk", "elite"):
            got = ws.retrieve(method, Caller(frozenset(groups)), "What is the pay band for grade 7?", 2000)
            assert "pay-bands" not in {i.doc_id for i in got.items}
            assert "104,000" not in got.context()
    canteen = ws.retrieve("longrag", Caller(frozenset({"everyone"})), "When does the canteen open?", 2000)
    assert [i.doc_id for i in canteen.items][:1] == ["canteen"]


def test_the_sensor_adds_new_collections_and_requests_runs_only_for_changed_ones(tmp_path):
    src = tmp_path / "docs"
    doc(src / "hr" / "leave.md", "leave", "staff", "Annual leave is 30 days.")
    doc(src / "it" / "vpn.md", "vpn", "staff", "The VPN needs a hardware key.")
    settings = IngestSettings(workspace=tmp_path / "ws", sources=[src], partitioned=True)
    defs = build_definitions(workspace_resources(settings))
    sensor = defs.get_sensor_def("collection_changes")
    home = tmp_path / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        def tick(cursor):
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            for request in result.dynamic_partitions_requests:
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            return sorted(r.partition_key for r in result.run_requests), result.cursor

        first, cursor = tick(None)
        assert first == ["docs/hr", "docs/it"]
        assert sorted(instance.get_dynamic_partitions("collections")) == ["docs/hr", "docs/it"]
        assert tick(cursor)[0] == []
        doc(src / "it" / "vpn.md", "vpn", "staff", "The VPN needs a hardware key and a PIN.")
        doc(src / "legal" / "nda.md", "nda", "legal", "Every contractor signs an NDA.")
        changed, _ = tick(cursor)
        assert changed == ["docs/it", "docs/legal"]
        assert "docs/legal" in instance.get_dynamic_partitions("collections")


def test_partitioned_definitions_load_with_a_partitioned_ingest_job(tmp_path):
    settings = IngestSettings(workspace=tmp_path / "ws", sources=[SAMPLES / "corpus"], partitioned=True)
    defs = build_definitions(workspace_resources(settings))
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("ingest")
    assert job.partitions_def.name == "collections"
    assert defs.resolve_assets_def("subchunk_index").partitions_def.name == "collections"


def test_a_workspace_with_no_published_partition_says_so_in_one_line(tmp_path):
    shutil.copytree(SAMPLES / "corpus" / "security", tmp_path / "docs" / "security")
    (tmp_path / "ws" / "partitions").mkdir(parents=True)
    from rag.query.workspace import WorkspaceError

    with pytest.raises(WorkspaceError, match="no partition has published yet"):
        Workspace(tmp_path / "ws")


def test_a_workspace_is_never_written_in_both_layouts(tmp_path, corpus):
    from pipelines.errors import CliError

    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "catalog.duckdb").write_bytes(b"")
    with pytest.raises(CliError, match="holds a whole \\(unpartitioned\\) catalog"):
        run_partitions(IngestSettings(workspace=str(tmp_path / "whole"), sources=[str(corpus)]))
    (tmp_path / "parts" / "partitions").mkdir(parents=True)
    with pytest.raises(CliError, match="is partitioned by collection"):
        run_ingest(IngestSettings(workspace=str(tmp_path / "parts"), sources=[str(corpus)]))


@pytest.mark.slow
def test_an_as_of_read_sees_each_partition_as_it_was_then(tmp_path):
    src = tmp_path / "docs"
    doc(src / "hr" / "leave.md", "leave", "staff", "Annual leave is 30 days for every employee. Zephyrine is its form.")
    doc(src / "it" / "vpn.md", "vpn", "staff", "The VPN needs a hardware key.")
    run_partitions(IngestSettings(workspace=str(tmp_path / "ws"), sources=[str(src)]))
    ws = Workspace(tmp_path / "ws")
    before = ws.resolve_as_of(max(i.created_at for i in ws.snapshot().parts.values()))
    (src / "hr" / "leave.md").write_text("---\nid: leave\ntitle: leave\nversion: '2'\nacl: [staff]\n---\n"
                                         "Annual leave is 32 days for every employee.\n")
    run_partitions(IngestSettings(workspace=str(tmp_path / "ws"), sources=[str(src)]), ["docs/hr"])
    staff = Caller(frozenset({"staff"}))

    for method in ("longrag", "shortchunk"):
        now = ws.retrieve(method, staff, "How many days of annual leave?", 500)
        then = ws.retrieve(method, staff, "How many days of annual leave?", 500, as_of=before)
        assert "32 days" in now.context() and "30 days" not in now.context()
        assert "30 days" in then.context() and "32 days" not in then.context()
    snap, config = ws.snapshot(), LongRAGConfig()
    state, _ = snap.past_units_at(before)  # BM25 over both partitions' texts then: the old version's word
    assert set(_lexical(snap, staff, "Zephyrine", config, snap.lexical_at(before, state))) == {"leave"}
    assert _lexical(snap, staff, "Zephyrine", config) == {}
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    for method in ("longrag", "longrag-extract", "shortchunk"):
        for question in ("How many days of annual leave?", "What does the VPN need?"):
            current, as_of_now = (ws.retrieve(method, staff, question, 500, as_of=t) for t in (None, now))
            assert [(i.doc_id, i.doc_version, i.ranges, i.score) for i in as_of_now.items] == \
                [(i.doc_id, i.doc_version, i.ranges, i.score) for i in current.items]
