"""Every metadata file of a partitioned workspace, lost or damaged: the next ingest repairs it from the data of record
or refuses in one line, and readers go on serving the other partitions; never a traceback, never `unexpected …`."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from file_damage import DAMAGES as BASIC_DAMAGES
from file_damage import WRONG_SHAPE, damage

from pipelines.cli import main
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.sources.partitions import LAYOUT, PARTITIONS_DIR, STORE_INFO, retired_keys, slug

DAMAGES = (*BASIC_DAMAGES, WRONG_SHAPE)
QUESTION = "when is the turbine gearbox serviced"
CREW = Caller(frozenset({"crew"}))
HR_ONLY = {"hr1"}   # what readers cannot serve while hr's partition.json is damaged
EVERY = {"hr1", "eng1", "big1", "big2", "big3"}   # `dup` is in hr and eng: hidden from readers


def doc(folder: Path, doc_id: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{doc_id}.md").write_text(f"---\nid: {doc_id}\ntitle: Gearbox {doc_id}\nversion: \"1\"\nacl: [crew]\n"
                                         f"---\nThe turbine gearbox {doc_id} is serviced every spring.\n")


def ingest(src: Path, ws: Path) -> list[str]:
    return ["ingest", "--partitioned", "--source", str(src), "--workspace", str(ws), "--json"]


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """Collections hr and eng (sharing the id `dup`), big (three files, split in two shards when first seen) and old
    (published, then gone from the source: its store is retired)."""
    root = tmp_path_factory.mktemp("meta")
    src, ws = root / "src", root / "ws"
    for folder, ids in (("hr", ["hr1", "dup"]), ("eng", ["eng1", "dup"]), ("big", ["big1", "big2", "big3"]),
                        ("old", ["old1"])):
        for doc_id in ids:
            doc(src / folder, doc_id)
    os.environ["RAG_SHARD_FILES"] = "2"
    try:
        assert main(ingest(src, ws)) == 0
    finally:
        del os.environ["RAG_SHARD_FILES"]
    shutil.rmtree(src / "old")
    assert main(ingest(src, ws)) == 0
    assert retired_keys(ws) == {"src/old"}
    return src, ws


def store_of(ws: Path, key: str) -> Path:
    return ws / PARTITIONS_DIR / slug(key)


def marker(ws: Path, kind: str) -> Path:
    h = hashlib.sha256(b"dup").hexdigest()[:32]
    return {"layout.json": ws / PARTITIONS_DIR / LAYOUT,
            "partition.json": store_of(ws, "src/hr") / STORE_INFO,
            "retired partition.json": store_of(ws, "src/old") / STORE_INFO,
            "shard partition.json": store_of(ws, "src/big~1of2") / STORE_INFO,
            "doc_ids.json": store_of(ws, "src/hr") / "doc_ids.json",
            "id marker": ws / "doc_ids" / "ids" / h / f"{slug('src/hr')}.json",
            "shared mark": ws / "doc_ids" / "shared" / f"{h}.json"}[kind]


KINDS = ("layout.json", "partition.json", "retired partition.json", "shard partition.json", "doc_ids.json",
         "id marker", "shared mark")
REBUILT = KINDS[:5]   # written again by the next ingest just as they were


def retrieve(ws: Path, capsys) -> tuple[int, set[str], str]:
    capsys.readouterr()
    code = main(["retrieve", "--workspace", str(ws), "--groups", "crew", "--budget", "8000", "--json", QUESTION])
    out, err = capsys.readouterr()
    return code, {i["doc_id"] for i in json.loads(out)["items"]} if code == 0 else set(), err


def content(path: Path) -> object:
    """A metadata file as the ingest means it: a retired store's mark is a time, only its presence counts; a store's
    index location is its workspace's (this one's copy, once written again), under the store's own name."""
    meta = json.loads(path.read_bytes())
    if path.name != STORE_INFO:
        return meta
    assert meta.pop("lance_uri").endswith(f"/{PARTITIONS_DIR}/{path.parent.name}")
    return meta | {"retired_at": True} if "retired_at" in meta else meta


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_metadata_file_is_repaired_by_the_next_ingest_while_readers_serve_the_other_partitions(
        published, tmp_path, capsys, kind, how):
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    path = marker(ws, kind)
    before = content(path)
    damage(path, how)

    code, served, err = retrieve(ws, capsys)
    assert code == 0 and "unexpected" not in err and "Traceback" not in err, err
    # Readers leave out only a store whose partition.json they cannot read: hr's (then eng's `dup` is its only
    # copy they see, so they serve it) or the second shard of big's (which holds big1 and big3).
    expected = {"partition.json": EVERY - HR_ONLY | {"dup"}, "shard partition.json": EVERY - {"big1", "big3"}}
    assert served == expected.get(kind, EVERY), (served, err)

    capsys.readouterr()
    assert main(ingest(src, ws)) == 0
    out, err = capsys.readouterr()
    assert "unexpected" not in err and "Traceback" not in err and json.loads(out)["checks_passed"] is True, err
    # A retired store runs again only when its mark was lost with its partition.json: it deletes nothing more.
    assert set(json.loads(out)["partitions"]) - {"src/old"} == {"src/hr", "src/eng", "src/big~0of2", "src/big~1of2"}
    if kind in REBUILT:
        assert content(path) == before
    assert retired_keys(ws) == {"src/old"}
    code, served, err = retrieve(ws, capsys)
    assert code == 0 and served == EVERY, (served, err)


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES[1:])
def test_a_damaged_store_name_that_no_collection_of_the_layout_has_is_refused_in_one_line(
        published, tmp_path, capsys, how):
    """With both the layout and a retired store's partition.json damaged, nothing says which collection the store
    held: the ingest names the file and what to do instead of guessing; readers serve the live partitions."""
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    damage(marker(ws, "layout.json"), how)
    damage(marker(ws, "retired partition.json"), how)
    capsys.readouterr()
    assert main(ingest(src, ws)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unexpected" not in err, err
    assert f"{slug('src/old')}/{STORE_INFO}" in err and "move" in err, err
    code, served, err = retrieve(ws, capsys)
    assert code == 0 and served == EVERY, (served, err)


@pytest.mark.slow
def test_through_cli_processes_a_garbage_partition_json_is_named_on_one_line_then_written_again(published, tmp_path):
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    path = marker(ws, "partition.json")
    before = path.read_bytes()
    damage(path, "garbage")
    cli = [sys.executable, "-m", "pipelines.cli"]
    ask = [*cli, "retrieve", "--workspace", str(ws), "--groups", "crew", "--budget", "8000", "--json", QUESTION]

    first = subprocess.run(ask, cwd=REPO, capture_output=True, text=True)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert len(first.stderr.splitlines()) == 1 and f"{slug('src/hr')}/{STORE_INFO}" in first.stderr, first.stderr
    assert {i["doc_id"] for i in json.loads(first.stdout)["items"]} == EVERY - HR_ONLY | {"dup"}
    run = subprocess.run([*cli, *ingest(src, ws)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr and STORE_INFO in run.stderr, run.stderr
    assert json.loads(path.read_bytes())["key"] == json.loads(before)["key"]
    after = subprocess.run(ask, cwd=REPO, capture_output=True, text=True)
    assert after.returncode == 0 and {i["doc_id"] for i in json.loads(after.stdout)["items"]} == EVERY, after.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
def test_with_its_doc_ids_json_damaged_a_partition_removes_the_id_records_of_documents_it_no_longer_holds(
        tmp_path, capsys, how):
    """The id record says which partitions publish an id; one left behind by a deleted document would report the id
    shared once another partition publishes it."""
    src, ws = tmp_path / "src", tmp_path / "ws"
    for doc_id in ("hr1", "hr2"):
        doc(src / "hr", doc_id)
    assert main(ingest(src, ws)) == 0
    damage(marker(ws, "doc_ids.json"), how)
    (src / "hr" / "hr1.md").unlink()
    left = ws / "doc_ids" / "ids" / hashlib.sha256(b"hr1").hexdigest()[:32] / f"{slug('src/hr')}.json"
    assert left.exists()
    assert main(ingest(src, ws)) == 0
    assert not left.exists()
    assert json.loads(marker(ws, "doc_ids.json").read_bytes()).keys() == {"hr2"}
    code, served, err = retrieve(ws, capsys)
    assert code == 0 and served == {"hr2"}, (served, err)


@pytest.mark.slow
def test_a_long_lived_reader_whose_partition_json_is_damaged_meanwhile_serves_the_other_partitions(
        published, tmp_path):
    """What `rag serve` holds: a workspace opened before the damage goes on answering, without that partition."""
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    reader = Workspace(ws)
    try:
        assert {i.doc_id for i in reader.retrieve("longrag", CREW, QUESTION, 8000).items} == EVERY
        damage(marker(ws, "shard partition.json"), "garbage")
        assert {i.doc_id for i in reader.retrieve("longrag", CREW, QUESTION, 8000).items} == EVERY - {"big1", "big3"}
        assert main(ingest(src, ws)) == 0
        assert {i.doc_id for i in reader.retrieve("longrag", CREW, QUESTION, 8000).items} == EVERY
    finally:
        reader.close()


@pytest.mark.slow
def test_a_damaged_id_record_is_named_once_with_what_to_do_and_doing_it_writes_the_record_again(published, tmp_path):
    """Another partition's id record is never written by this one: the ingest names it and goes on, and removing the
    partition's doc_ids.json, as the line says, makes that partition's next run write its records again."""
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    path = marker(ws, "id marker")
    damage(path, "garbage")
    cli = [sys.executable, "-m", "pipelines.cli", *ingest(src, ws)]

    run = subprocess.run(cli, cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    named = [line for line in run.stderr.splitlines() if path.name in line]
    assert len(named) == 1 and f"{slug('src/hr')}/doc_ids.json" in named[0], run.stderr
    assert json.loads(run.stdout)["shared_ids"] == []   # the id's place in hr is unknown until it is written again
    marker(ws, "doc_ids.json").unlink()
    again = subprocess.run(cli, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert [s["doc_id"] for s in json.loads(again.stdout)["shared_ids"]] == ["dup"]
    assert json.loads(path.read_bytes())["partition"] == "src/hr"
