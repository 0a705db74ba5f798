"""Class 2: nothing outside the source folder is read; links are never followed and every one gets a row."""
import os

import pytest
from hardening_helpers import good, write

from rag.sources.loaders import load_sources


@pytest.fixture
def tree(tmp_path):
    """A source folder next to a secret outside it."""
    src, outside = tmp_path / "src", tmp_path / "outside"
    write(src, "real.md", good("real"))
    write(outside, "secret.md", good("secret", "The root password is hunter2.", acl="support"))
    return src, outside


def rows(result):
    return {os.path.basename(r.source_path): r.reason for r in result.rejected + result.skipped}


def loaded_text(result):
    return " ".join(d.text for d in result.documents)


@pytest.mark.parametrize("target", ["file", "folder", "system file", "relative path", "link to a link"])
def test_links_leaving_the_source_folder_are_refused_with_a_row(tree, target):
    src, outside = tree
    link = src / "escape.md"
    if target == "file":
        link.symlink_to(outside / "secret.md")
    elif target == "folder":
        link = src / "escape"
        link.symlink_to(outside, target_is_directory=True)
    elif target == "system file":
        link.symlink_to("/etc/hostname")
    elif target == "relative path":
        link.symlink_to("../outside/secret.md")
    else:
        (src / "hop.md").symlink_to(outside / "secret.md")
        link.symlink_to(src / "hop.md")
    result = load_sources([src], default_acl=("staff",))
    assert "hunter2" not in loaded_text(result)
    assert [d.doc_id for d in result.documents] == ["real"]
    assert "outside the source folder" in rows(result)[link.name]
    assert str(link) in {r.source_path for r in result.rejected}


def test_link_inside_the_folder_is_skipped_with_a_row_and_its_target_read_once(tree):
    src, _ = tree
    (src / "alias.md").symlink_to(src / "real.md")
    (src / "sub").mkdir()
    (src / "sub" / "up").symlink_to(src, target_is_directory=True)
    result = load_sources([src])
    assert [d.doc_id for d in result.documents] == ["real"]
    assert "inside the source folder" in rows(result)["alias.md"]
    assert "inside the source folder" in rows(result)["up"]
    assert result.rejected == []


def test_dangling_links_and_loops_are_refused_with_a_row(tree):
    src, _ = tree
    (src / "dangling.md").symlink_to(src / "nowhere.md")
    (src / "loop-a.md").symlink_to(src / "loop-b.md")
    (src / "loop-b.md").symlink_to(src / "loop-a.md")
    reasons = rows(load_sources([src]))
    assert "dangling" in reasons["dangling.md"]
    assert "loop" in reasons["loop-a.md"] and "loop" in reasons["loop-b.md"]


def test_special_files_are_refused_without_being_opened(tree):
    src, _ = tree
    os.mkfifo(src / "pipe.md")  # opening a FIFO for reading would block the run forever
    result = load_sources([src])
    assert "named pipe" in rows(result)["pipe.md"]
    assert [d.doc_id for d in result.documents] == ["real"]


def test_a_named_source_that_is_itself_a_link_is_read_as_its_target(tree, tmp_path):
    src, _ = tree
    (tmp_path / "named").symlink_to(src, target_is_directory=True)
    result = load_sources([tmp_path / "named"])
    assert [d.doc_id for d in result.documents] == ["real"]
    assert result.documents[0].source == str(src)


def test_hidden_files_and_readmes_are_passed_over_with_a_row(tree):
    src, _ = tree
    write(src, ".draft.md", good("draft"))
    write(src, ".git/config", "[core]\n")
    write(src, "sub/README.md", "# About\n")
    result = load_sources([src])
    reasons = rows(result)
    assert {".draft.md", ".git", "README.md"} <= set(reasons)
    assert result.rejected == [] and [d.doc_id for d in result.documents] == ["real"]


def test_unreadable_subfolder_gets_a_row(tree):
    src, _ = tree
    locked = src / "locked"
    write(locked, "inner.md", good("inner"))
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as a user that reads any folder")
        assert "cannot read folder" in rows(load_sources([src]))["locked"]
    finally:
        locked.chmod(0o755)


def test_a_file_swapped_for_a_link_after_the_listing_is_not_followed(tree):
    from rag.sources.loaders import _load_files

    src, outside = tree
    swapped = src / "swapped.md"
    swapped.symlink_to(outside / "secret.md")  # as if replaced between listing and reading
    result = _load_files([swapped], src, (), None)
    assert result.documents == []
    assert "symbolic link" in result.rejected[0].reason
