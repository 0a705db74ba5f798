"""Change detection per file: only changed files (JSONL: changed lines) are read, and the catalog ends up
exactly as a run that re-reads every file would leave it."""
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag.sources import scan
from rag.store.catalog import Catalog
from rag.store.publish import NothingToPublish, publish_documents
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import read_pointer


def md(doc_id, version, text, acl="support"):
    return f"---\nid: {doc_id}\nversion: \"{version}\"\nacl: [{acl}]\n---\n{text}\n"


def line(doc_id, version, text, acl=("support",)):
    return json.dumps({"doc_id": doc_id, "version": str(version), "text": text, "acl": list(acl)})


def run(catalog, folder, **kw):
    changes, _ = publish_documents(catalog, IngestSettings(sources=[str(folder)], **kw))
    return changes


def documents(catalog):
    return sorted(catalog.rows("SELECT doc_id, version, status, acl, links, collection, source, "
                               f"{catalog.source_path_sql}, content_hash, meta_hash FROM documents"))


def read_versions(workspace):
    """(doc_id, version, status) of every version the published read state holds."""
    reader = Catalog.snapshot(workspace, read_pointer(workspace))
    try:
        return sorted(reader.rows("SELECT doc_id, version, status FROM documents"))
    finally:
        reader.close()


def problems(catalog):
    (pid,), = catalog.rows("SELECT max(publish_id) FROM publish_log")
    return sorted(catalog.rows("SELECT severity, source_path, doc_id, reason FROM quarantine WHERE publish_id = ?",
                               [pid]))


def published(tmp_path, files: dict[str, str]):
    """A source folder holding `files`, published once into a new catalog."""
    src = tmp_path / "src"
    src.mkdir()
    for name, content in files.items():
        (src / name).write_text(content)
    catalog = Catalog(tmp_path / "c.duckdb")
    return src, catalog, run(catalog, src)


@pytest.fixture
def settled(monkeypatch):
    """Files count as settled at once, so the stat comparison (not the hash) decides, as it does in production."""
    monkeypatch.setattr(scan, "RACY_NS", 0)


def test_a_run_with_no_change_reads_no_file(tmp_path, settled):
    files = {f"d{i}.md": md(f"d{i}", 1, f"Text {i}.") for i in range(5)}
    files["many.jsonl"] = "\n".join(line(f"j{i}", 1, f"Line {i}.") for i in range(20)) + "\n"
    src, catalog, first = published(tmp_path, files)
    assert first.reading == {"files_read": 6, "files_unchanged": 0, "files_removed": 0, "lines_parsed": 20}
    again = run(catalog, src)
    assert again.reading == {"files_read": 0, "files_unchanged": 6, "files_removed": 0, "lines_parsed": 0}
    assert (again.new, again.deleted, again.updated_in_place) == ([], [], [])


def test_a_touched_file_is_hashed_but_not_parsed(tmp_path, settled):
    src, catalog, _ = published(tmp_path, {"a.md": md("a", 1, "Alpha.")})
    os.utime(src / "a.md", ns=(10**18, 10**18))
    changes = run(catalog, src)
    assert changes.reading["files_read"] == 0 and changes.reading["files_unchanged"] == 1


def test_one_edited_jsonl_line_is_the_only_line_parsed(tmp_path, settled):
    lines = [line(f"j{i}", 1, f"Line {i}.") for i in range(50)]
    src, catalog, _ = published(tmp_path, {"many.jsonl": "\n".join(lines) + "\n"})
    lines[7] = line("j7", 2, "Line 7, revised.")
    (src / "many.jsonl").write_text("\n".join(lines) + "\n")
    changes = run(catalog, src)
    assert changes.reading["lines_parsed"] == 1
    assert (changes.new, changes.superseded) == ([("j7", "2")], [("j7", "1")])


def test_records_kept_line_by_line_after_edits_equal_the_records_of_a_full_rereading(tmp_path, settled):
    """Only the records that differ are rewritten (an edited, inserted or removed line, and the lines it moved), and
    what is stored equals what a new catalog reading the file once stores."""
    lines = [line(f"j{i}", 1, f"Line {i}.") for i in range(50)]
    src, catalog, _ = published(tmp_path, {"many.jsonl": "\n".join(lines) + "\n"})
    lines[7] = line("j7", 2, "Line 7, revised.")
    lines[20:20] = [line("new", 1, "A new line."), "not json"]
    del lines[40]
    (src / "many.jsonl").write_text("\n".join(lines) + "\n")
    run(catalog, src)
    reread = Catalog(tmp_path / "reread" / "c.duckdb")
    run(reread, src)
    stored = ("SELECT file, source, position, line_hash, source_path, doc_id, version, content_hash, meta_hash, "
              "reason, holds, empty FROM source_records ORDER BY position")
    assert catalog.rows(stored) == reread.rows(stored)
    assert len(catalog.rows(stored)) == 51


def test_line_hashes_of_another_width_kept_by_an_older_catalog_make_its_lines_parsed_once_and_change_nothing(
        tmp_path, settled):
    """Line hashes were 128 bits; they are 64 now (a JSONL line's record kept them, its widest column)."""
    lines = [line(f"j{i}", 1, f"Line {i}.") for i in range(30)]
    src, catalog, _ = published(tmp_path, {"many.jsonl": "\n".join(lines) + "\n"})
    assert {len(h) for (h,) in catalog.rows("SELECT line_hash FROM source_records")} == {16}
    before = documents(catalog), catalog.rows("SELECT * EXCLUDE (line_hash) FROM source_records ORDER BY position")
    catalog.con.execute("UPDATE source_records SET line_hash = line_hash || repeat('0', 16)")   # as kept before
    catalog.con.execute("UPDATE source_files SET content_hash = 'digest of the 128-bit line hashes'")
    os.utime(src / "many.jsonl", ns=(10**18, 10**18))
    upgraded = run(catalog, src)
    assert upgraded.reading["lines_parsed"] == 30 and (upgraded.new, upgraded.updated_in_place) == ([], [])
    assert (documents(catalog), catalog.rows("SELECT * EXCLUDE (line_hash) FROM source_records ORDER BY position")
            ) == before
    assert run(catalog, src).reading["lines_parsed"] == 0


def test_a_removed_file_deletes_its_documents_from_the_list_of_files(tmp_path, settled):
    src, catalog, _ = published(tmp_path, {"a.md": md("a", 1, "Alpha."), "b.md": md("b", 1, "Beta.")})
    (src / "b.md").unlink()
    changes = run(catalog, src)
    assert changes.deleted == [("b", "1")]
    assert changes.reading == {"files_read": 0, "files_unchanged": 1, "files_removed": 1, "lines_parsed": 0}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_made_unreadable_keeps_its_document_and_says_why(tmp_path, settled):
    src, catalog, _ = published(tmp_path, {"a.md": md("a", 1, "Alpha."), "b.md": md("b", 1, "Beta.")})
    (src / "b.md").chmod(0)
    try:
        for _ in range(2):   # the second run reads nothing, and still says why b is not read
            run(catalog, src)
            assert ("b", "1", "current") in [r[:3] for r in documents(catalog)]
            assert [r[3] for r in problems(catalog) if r[1].endswith("b.md")] == ["cannot read file: Permission denied"]
    finally:
        (src / "b.md").chmod(0o644)


# The property: incremental runs leave the catalog as runs that re-read every file do. ---------------------

IDS = ["a", "b", "c", "d"]
TEXTS = ["Alpha.", "Beta text.", "Gamma, revised.", "Delta."]


@st.composite
def steps(draw):
    """One edit of the source folder: Markdown files and one JSONL file written, broken, moved or removed."""
    kind = draw(st.sampled_from(["md", "md", "md-broken", "md-remove", "jsonl", "jsonl-remove", "jsonl-junk",
                                 "jsonl-blank", "empty-jsonl"]))
    return kind, draw(st.sampled_from(IDS)), draw(st.integers(1, 3)), draw(st.sampled_from(TEXTS)), \
        draw(st.sampled_from(["support", "partners"])), draw(st.sampled_from(["x", "y"]))


def apply(src: Path, step, clock: list[int], state: dict) -> None:
    kind, doc_id, version, text, acl, name = step
    jsonl = state.setdefault("lines", [])
    if kind == "md":
        (src / f"{name}-{doc_id}.md").write_text(md(doc_id, version, text, acl))
    elif kind == "md-broken":
        (src / f"{name}-{doc_id}.md").write_text(f"---\nid: {doc_id}\nacl: [unclosed\n{text}\n")
    elif kind == "md-remove":
        for p in src.glob(f"*-{doc_id}.md"):
            p.unlink()
    elif kind == "jsonl":
        jsonl.insert(version % (len(jsonl) + 1), line(doc_id, version, text, (acl,)))
    elif kind == "jsonl-remove" and jsonl:
        jsonl.pop(version % len(jsonl))
    elif kind == "jsonl-junk":
        jsonl.insert(0, '{"doc_id": oops')
    elif kind == "jsonl-blank":
        jsonl.insert(0, "")
    elif kind == "empty-jsonl":
        jsonl.clear()
    if kind.startswith(("jsonl", "empty")):
        (src / "all.jsonl").write_text("\n".join(jsonl) + ("\n" if jsonl else ""))
    clock[0] += 10**9
    for p in src.iterdir():   # distinct timestamps per step, as a real clock gives edits seconds apart
        if p.stat().st_mtime_ns < 10**17:
            os.utime(p, ns=(clock[0], clock[0]))


@pytest.mark.slow   # 40 histories of real catalog runs: 45–64 s, the inner loop's longest test
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(steps(), min_size=1, max_size=8), st.booleans(), st.booleans())
# A version no file held any more (dropped by the writer, held by the read state) comes back as the current one leaves.
@example([("md", "a", 1, "Alpha.", "support", "x"), ("md", "a", 2, "Alpha.", "support", "x"),
          ("md", "a", 1, "Alpha.", "support", "x")], False, False)
# An emptied JSONL file held back the removal of the version it held; a junk line then lifted that, and an older
# version in an unchanged Markdown file had to become current again (the incremental run did not look at its id).
@example([("md", "a", 1, "Alpha.", "support", "x")] * 3 + [
    ("jsonl", "a", 2, "Beta text.", "support", "x"), ("jsonl-junk", "a", 1, "Alpha.", "support", "x"),
    ("empty-jsonl", "a", 1, "Alpha.", "support", "x"), ("jsonl-junk", "a", 1, "Alpha.", "support", "x")], False, False)
def test_incremental_runs_leave_the_catalog_as_full_rereads_do(monkeypatch, history, settled_files, allow_empty):
    if settled_files:
        monkeypatch.setattr(scan, "RACY_NS", 0)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        # Each in a workspace of its own: a workspace's read state is its catalog's (the writer reads history there).
        incremental, full = Catalog(Path(tmp) / "inc" / "c.duckdb"), Catalog(Path(tmp) / "full" / "c.duckdb")
        clock, state = [0], {}
        try:
            for step in history:
                apply(src, step, clock, state)
                outcomes = []
                for catalog, rescan in ((incremental, False), (full, True)):
                    try:
                        run(catalog, src, rescan=rescan, allow_empty=allow_empty, default_acl=("support",))
                        outcomes.append("published")
                    except NothingToPublish as err:
                        outcomes.append(str(err))
                assert outcomes[0] == outcomes[1]
                assert documents(incremental) == documents(full)
                assert problems(incremental) == problems(full)
        finally:
            incremental.close()
            full.close()


def test_an_older_version_in_an_unchanged_file_is_current_again_once_nothing_holds_back_the_newer_ones_removal(
        tmp_path, settled):
    """An emptied file holds back the removal of the version it held; once the file holds something else, that
    version is deleted and the older one, in a file no run read again, is current again, as a full re-read has it."""
    src, catalog, _ = published(tmp_path, {"a.md": md("a", 1, "Alpha."),
                                           "all.jsonl": line("a", 2, "Alpha, two.") + "\n"})
    (src / "all.jsonl").write_text("")
    run(catalog, src)
    assert [r[:3] for r in documents(catalog)] == [("a", "1", "superseded"), ("a", "2", "current")]
    (src / "all.jsonl").write_text(line("b", 1, "Beta.") + "\n")
    changes = run(catalog, src)
    assert changes.reading["files_read"] == 1
    assert [r[:3] for r in documents(catalog)] == [("a", "1", "current"), ("b", "1", "current")]
    assert read_versions(tmp_path) == [("a", "1", "current"), ("a", "2", "deleted"), ("b", "1", "current")]
    again = run(catalog, src, rescan=True)   # a full re-read finds nothing left to change
    assert (again.new, again.superseded, again.deleted, again.updated_in_place) == ([], [], [], [])


def test_a_version_no_source_holds_leaves_the_writer_once_published_and_is_still_known_when_a_source_brings_it_back(
        tmp_path, settled):
    """The writer keeps no superseded version that no source holds (the read state does), yet a file bringing it back
    is judged as before: the same text is that old version again (no refusal), a changed text under its label is
    refused."""
    src, catalog, _ = published(tmp_path, {"a.md": md("a", 1, "Alpha.")})
    (src / "a.md").write_text(md("a", 2, "Alpha, second."))
    run(catalog, src)
    assert [r[:3] for r in documents(catalog)] == [("a", "2", "current")]
    assert read_versions(tmp_path) == [("a", "1", "superseded"), ("a", "2", "current")]
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    (first_to, second_from), = reader.rows("SELECT max(valid_to) FILTER (version = '1'), max(valid_from) FILTER "
                                           "(version = '2') FROM documents")
    reader.close()
    assert first_to == second_from   # an as-of read before the change still finds version 1
    (src / "old.md").write_text(md("a", 1, "Alpha."))
    run(catalog, src)
    assert problems(catalog) == []
    assert [r[:3] for r in documents(catalog)] == [("a", "1", "superseded"), ("a", "2", "current")]
    assert catalog.document_texts([("a", "1")]) == {("a", "1"): ("a", "Alpha.")}
    again = run(catalog, src, rescan=True)   # a full re-read finds the restored row as its file has it
    assert (again.new, again.superseded, again.deleted, again.updated_in_place) == ([], [], [], [])
    (src / "old.md").write_text(md("a", 1, "Alpha, changed."))
    run(catalog, src)
    assert [r[3] for r in problems(catalog)] == [
        "text of 'a' version 1 changed but the version label did not; give the new text a newer version"]


def test_a_refusal_is_repeated_while_its_file_stays_as_it_is(tmp_path, settled):
    """A refusal depends on the catalog too (here: an older label), so an unchanged file is still refused."""
    src, catalog, _ = published(tmp_path, {"new.md": md("a", 2, "Alpha, second.")})
    (src / "old.md").write_text(md("a", 1, "Alpha, first."))
    for _ in range(2):
        run(catalog, src)
        assert [r[3] for r in problems(catalog)] == ["version 1 of 'a' is older than the published version 2"]


def test_a_source_path_is_held_after_its_source_and_read_back_whole_by_the_writer_and_the_readers(tmp_path, settled):
    """The catalog holds a version's source once: a path that starts with it is held as the rest. History, the next
    run's reconciliation and the published read state see the whole path, as they do for a row written before."""
    src, catalog, _ = published(tmp_path, {"all.jsonl": line("a", 1, "Alpha.") + "\n" + line("b", 1, "Beta.") + "\n",
                                           "c.md": md("c", 1, "Gamma.")})
    whole = {"a": f"{src / 'all.jsonl'}:1", "b": f"{src / 'all.jsonl'}:2", "c": str(src / "c.md")}
    assert sorted(catalog.rows("SELECT doc_id, source_path, path_tail FROM documents")) == [
        ("a", None, "/all.jsonl:1"), ("b", None, "/all.jsonl:2"), ("c", None, "/c.md")]
    catalog.con.execute("UPDATE documents SET source_path = ?, path_tail = NULL WHERE doc_id = 'c'", [whole["c"]])
    assert {d: catalog.history(d)[0][0].source_path for d in whole} == whole
    again = run(catalog, src)
    assert (again.new, again.deleted, again.updated_in_place) == ([], [], [])
    catalog.close()
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    try:
        assert {d: reader.history(d)[0][0].source_path for d in whole} == whole
    finally:
        reader.close()


def test_records_store_only_hashes_and_paths_that_differ_from_the_default_and_a_refusal_stands(tmp_path, settled):
    """A record's content hash is left out where it is the stored version's; a text changed under its label keeps its
    own, so the unchanged file is refused again at the next run."""
    src, catalog, _ = published(tmp_path, {"all.jsonl": line("a", 1, "Alpha.") + "\n" + line("b", 1, "Beta.") + "\n"})
    assert catalog.rows("SELECT count(*) FROM source_records WHERE content_hash IS NOT NULL OR source_path IS NOT NULL"
                        ) == [(0,)]
    (src / "all.jsonl").write_text(line("a", 1, "Alpha, changed.") + "\n" + line("b", 1, "Beta.") + "\n")
    for _ in range(2):
        run(catalog, src)
        assert [r[3] for r in problems(catalog)] == [
            "text of 'a' version 1 changed but the version label did not; give the new text a newer version"]
    assert catalog.rows("SELECT doc_id FROM source_records WHERE content_hash IS NOT NULL") == [("a",)]
    assert [r[:3] for r in documents(catalog)] == [("a", "1", "current"), ("b", "1", "current")]
