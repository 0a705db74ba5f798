"""Every file a publish writes, lost or damaged: readers refuse it in one line, the next ingest repairs it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from file_damage import DAMAGES, damage

from pipelines.cli import main
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.snapshot_files import read_pointer

# The reader refuses these until the next ingest; an older manifest is not read, and the catalog is the writer's.
READERS_REFUSE = ("pointer", "manifest", "segment", "text file")
KINDS = (*READERS_REFUSE, "older manifest")
QUESTION = "when is the turbine gearbox serviced"


def doc(folder: Path, n: int, version: int) -> None:
    (folder / f"doc{n}.md").write_text(f'---\nid: doc{n}\ntitle: Gearbox {n}\nversion: "{version}"\nacl: [crew]\n---\n'
                                       f"The turbine gearbox {n} is serviced every spring, revision {version}.\n")


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """Sources and a workspace published three times, doc1 re-versioned each time (its versions 1 and 2 are history
    that only the published read state holds)."""
    root = tmp_path_factory.mktemp("damage")
    src = root / "src"
    src.mkdir()
    for version in (1, 2, 3):
        for n in (1, 2, 3):
            doc(src, n, version if n == 1 else 1)
        assert main(["ingest", "--source", str(src), "--workspace", str(root / "ws")]) == 0
    return src, root / "ws"


def file_of(ws: Path, kind: str) -> Path:
    """The file of this kind that the current publish wrote (or, for an older manifest, the one before)."""
    folder = ws / "snapshots"
    pointer = json.loads((folder / "CURRENT").read_text())
    tables = json.loads((folder / pointer["file"]).read_text())["tables"]
    return {"pointer": folder / "CURRENT", "manifest": folder / pointer["file"],
            "older manifest": folder / f"{pointer['seq'] - 1:08d}.json",
            "segment": folder / "segments" / tables["documents"][-1],
            "text file": folder / "segments" / tables["texts"][-1]}[kind]


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *argv], cwd=REPO, capture_output=True, text=True)


def retrieve(ws: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["retrieve", "--workspace", str(ws), "--groups", "crew", "--json", QUESTION])
    out, err = capsys.readouterr()
    return code, out, err


def served(out: str) -> dict[str, str]:
    return {i["doc_id"]: i["doc_version"] for i in json.loads(out)["items"]}


def published_versions(ws: Path) -> dict[tuple[str, str], str]:
    """(doc id, version) → status, as readers of the current publish see them."""
    reader = Catalog.snapshot(ws, read_pointer(ws))
    try:
        return {(d, v): s for d, v, s in reader.rows("SELECT doc_id, version, status FROM documents")}
    finally:
        reader.close()


def assert_consistent(ws: Path) -> dict[tuple[str, str], str]:
    """The catalog, index and published read state agree; the published versions."""
    catalog, index = Catalog(ws / "catalog.duckdb"), SubchunkIndex(ws / "lancedb")
    try:
        for finding in (consistency.documents_in_exactly_one_unit(catalog),
                        consistency.index_matches_current_units(catalog, index),
                        consistency.no_stale_rows(catalog, index), consistency.index_rows_match_catalog(catalog, index)):
            assert finding.passed, finding.examples
        writer = dict(((d, v), s) for d, v, s in catalog.rows("SELECT doc_id, version, status FROM documents"))
        texts = dict(catalog.rows(f"SELECT doc_id, text FROM {catalog.with_texts} WHERE status = 'current'"))
    finally:
        catalog.close()
    assert all(t and "revision" in t for t in texts.values()) and len(texts) == 3   # every current text is there
    held = published_versions(ws)
    assert {k: s for k, s in held.items() if k in writer} == writer
    assert {k for k, s in held.items() if s == "current"} == {k for k, s in writer.items() if s == "current"}
    return held


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_store_file_is_refused_by_readers_in_one_line_and_repaired_by_the_next_ingest(
        published, tmp_path, capsys, kind, how):
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    history = published_versions(ws)
    damage(file_of(ws, kind), how)

    code, out, err = retrieve(ws, capsys)
    if kind in READERS_REFUSE:
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and "unexpected" not in err, err
    else:
        assert code == 0 and served(out)["doc1"] == "3", err

    capsys.readouterr()
    assert main(["ingest", "--source", str(src), "--workspace", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checks_passed"] is True
    code, out, err = retrieve(ws, capsys)
    assert code == 0 and served(out) == {"doc1": "3", "doc2": "1", "doc3": "1"}, err
    held = assert_consistent(ws)
    if kind != "segment":   # history only a damaged segment held is gone with it
        assert {k: s for k, s in held.items() if k[0] == "doc1"} == {k: s for k, s in history.items() if k[0] == "doc1"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", READERS_REFUSE)
def test_through_the_cli_processes_a_damaged_file_is_named_in_one_line_then_repaired(published, tmp_path, kind):
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    path = file_of(ws, kind)
    damage(path, "deleted" if kind == "manifest" else "garbage")
    ask = ("retrieve", "--workspace", str(ws), "--groups", "crew", "--json", QUESTION)

    before = cli(*ask)
    assert before.returncode == 2 and before.stdout == "" and "Traceback" not in before.stderr
    assert len(before.stderr.splitlines()) == 1 and path.name in before.stderr, before.stderr
    ingest = cli("ingest", "--source", str(src), "--workspace", str(ws), "--json")
    assert ingest.returncode == 0 and "Traceback" not in ingest.stderr, ingest.stderr
    assert f"{path.name}" in ingest.stderr and json.loads(ingest.stdout)["checks_passed"] is True
    after = cli(*ask)
    assert after.returncode == 0 and served(after.stdout)["doc1"] == "3", after.stderr
    assert_consistent(ws)


@pytest.mark.slow
@pytest.mark.parametrize("how", DAMAGES)
def test_the_catalog_lost_is_rebuilt_and_damaged_is_refused_in_one_line_while_readers_serve(
        published, tmp_path, capsys, how):
    """The catalog is the store of record: a damaged one is never guessed at, and readers never open it."""
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    damage(ws / "catalog.duckdb", how)
    code, out, err = retrieve(ws, capsys)
    assert code == 0 and served(out)["doc1"] == "3", err
    code = main(["ingest", "--source", str(src), "--workspace", str(ws), "--json"])
    err = capsys.readouterr().err
    if how == "deleted":
        assert code == 0
        assert_consistent(ws)
    else:
        assert code == 2 and len(err.splitlines()) == 1 and "catalog.duckdb: cannot open the catalog" in err, err
        assert "move it away and run the ingest again to rebuild it from the sources" in err
    code, out, err = retrieve(ws, capsys)
    assert code == 0 and served(out)["doc1"] == "3", err


@pytest.mark.slow
@pytest.mark.parametrize("part", ["_versions", "data"])
def test_a_damaged_index_is_refused_in_one_line_saying_how_to_rebuild_it(published, tmp_path, capsys, part):
    """The index table's newest manifest or data file overwritten: readers and the ingest stop in one line; the
    folder moved away, the next ingest rebuilds the index from the catalog."""
    src, clean = published
    ws = tmp_path / "ws"
    shutil.copytree(clean, ws)
    files = sorted((ws / "lancedb" / "subchunks.lance" / part).iterdir(), key=lambda p: p.stat().st_mtime_ns)
    damage([f for f in files if f.suffix in (".manifest", ".lance")][-1], "garbage")
    code, out, err = retrieve(ws, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "unexpected" not in err, err
    code = main(["ingest", "--source", str(src), "--workspace", str(ws)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "lancedb: the index cannot be read" in err and "move that folder away" in err, err
    shutil.move(ws / "lancedb", tmp_path / "damaged-lancedb")
    assert main(["ingest", "--source", str(src), "--workspace", str(ws)]) == 0
    code, out, err = retrieve(ws, capsys)
    assert code == 0 and served(out) == {"doc1": "3", "doc2": "1", "doc3": "1"}, err
    assert_consistent(ws)


@pytest.mark.slow
def test_a_partition_stores_lost_manifest_is_refused_then_repaired_by_the_next_partitioned_ingest(tmp_path, capsys):
    src = tmp_path / "src"
    for n, collection in enumerate(("hr", "eng")):
        (src / collection).mkdir(parents=True)
        doc(src / collection, n, 1)
    ingest = ["ingest", "--partitioned", "--source", str(src), "--workspace", str(tmp_path / "ws")]
    assert main(ingest) == 0
    (store,) = [p for p in (tmp_path / "ws" / "partitions").iterdir() if p.name.startswith("src_hr")]
    (store / "snapshots" / json.loads((store / "snapshots" / "CURRENT").read_text())["file"]).unlink()
    code, out, err = retrieve(tmp_path / "ws", capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "src_hr" in err, err
    assert main(ingest) == 0
    code, out, err = retrieve(tmp_path / "ws", capsys)
    assert code == 0 and served(out) == {"doc0": "1", "doc1": "1"}, err
