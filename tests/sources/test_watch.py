"""A sensor's cursor names changes, not states: every change gets a run key of its own, and nothing else does."""
import os

from hypothesis import given
from hypothesis import strategies as st

from rag.sources.watch import Changes, fingerprint, snapshot

STATES = st.lists(st.dictionaries(st.sampled_from(["hr", "ops", "eng"]), st.sampled_from(["fp0", "fp1", "fp2"]),
                                  min_size=1), min_size=1, max_size=12)


def requested(states: list[dict[str, str]], cursor: str | None = None, scope: str = "/ws") -> list[str]:
    keys = []
    for prints in states:
        seen = Changes.load(cursor, scope)
        now = seen.after(prints)
        keys += [now.run_key(k) for k in seen.changed(prints)]
        cursor = now.dump()
    return keys


@given(STATES)
def test_a_run_is_requested_for_each_change_and_no_two_changes_share_a_run_key(states):
    keys = requested(states)
    assert len(keys) == len(set(keys))
    last: dict[str, str] = {}
    changes = 0
    for prints in states:
        changes += sum(last.get(k) != fp for k, fp in prints.items())
        last = prints
    assert len(keys) == changes


def test_a_folder_that_returns_to_an_earlier_state_is_requested_again():
    added, removed = {"ops": "with-seven-files"}, {"ops": "without-them"}
    keys = requested([removed, added, removed, added, removed])
    assert len(keys) == 5 == len(set(keys))


@given(STATES)
def test_a_reset_cursor_or_another_workspaces_cursor_reuses_no_earlier_key(states):
    first = requested(states)
    assert not set(first) & set(requested(states))   # the cursor wiped: a new epoch
    seen = Changes.load(None, "/ws-a").after(states[-1])
    other = Changes.load(seen.dump(), "/ws-b")
    assert other.changed(states[-1]) == sorted(states[-1])   # the other workspace has ingested nothing yet


def test_a_cursor_of_an_older_format_or_garbage_knows_nothing():
    for cursor in ["13f75b0d2a", '{"docs/hr": "fp0"}', "[]", "null", '{"scope": 1}']:
        assert Changes.load(cursor, "/ws").changed({"docs/hr": "fp0"}) == ["docs/hr"]


def test_the_fingerprint_moves_when_a_file_is_removed_and_again_when_it_is_put_back_with_its_old_mtime(tmp_path):
    (tmp_path / "a.md").write_text("one")
    (tmp_path / "b.md").write_text("two")
    before = fingerprint(snapshot(tmp_path))
    saved = (tmp_path / "b.md").stat()
    (tmp_path / "b.md").unlink()
    removed = fingerprint(snapshot(tmp_path))
    assert removed != before
    (tmp_path / "b.md").write_text("two")
    os.utime(tmp_path / "b.md", ns=(saved.st_atime_ns, saved.st_mtime_ns))
    # the same name, size and mtime, but a new ctime (it may carry other permissions): a change again
    assert fingerprint(snapshot(tmp_path)) not in (removed, before) or os.stat(tmp_path / "b.md").st_ctime_ns == (
        saved.st_ctime_ns)


def test_the_fingerprint_moves_when_a_folder_acl_file_or_a_pdf_changes_but_not_for_other_dot_files(tmp_path):
    (tmp_path / "finance").mkdir()
    (tmp_path / "finance" / "report.pdf").write_bytes(b"%PDF-1.4 one")
    (tmp_path / "finance" / ".access.yaml").write_text("acl: [finance, audit]\n")
    (tmp_path / "finance" / ".notes").write_text("editor state")
    before = fingerprint(snapshot(tmp_path))
    assert set(snapshot(tmp_path)) == {"finance/report.pdf", "finance/.access.yaml"}
    (tmp_path / "finance" / ".notes").write_text("other editor state")
    assert fingerprint(snapshot(tmp_path)) == before
    (tmp_path / "finance" / ".access.yaml").write_text("acl: [finance]\n")
    revoked = fingerprint(snapshot(tmp_path))
    assert revoked != before
    (tmp_path / "finance" / "report.pdf").write_bytes(b"%PDF-1.4 two, longer")
    assert fingerprint(snapshot(tmp_path)) != revoked


def test_a_collection_partition_notices_the_folder_acl_file_of_its_source_folder(tmp_path):
    from rag.sources.partitions import discover

    (tmp_path / "src" / "hr").mkdir(parents=True)
    (tmp_path / "src" / "hr" / "pay.md").write_text("Pay bands.\n")
    (tmp_path / "src" / ".access.yaml").write_text("acl: [hr, audit]\n")
    [spec] = discover([str(tmp_path / "src")], tmp_path / "ws")
    before = snapshot(spec.folder, spec.selection)
    assert set(before) == {"pay.md", "../.access.yaml"}
    (tmp_path / "src" / ".access.yaml").write_text("acl: [hr]\n")
    assert fingerprint(snapshot(spec.folder, spec.selection)) != fingerprint(before)
