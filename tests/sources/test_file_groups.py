"""`--acl-from posix`: the groups that may read a file on the file system bound its ACL; a chmod or chgrp is noticed."""
import grp
import os
import struct

import pytest

from rag.sources.access import ACCESS_FILE, AccessOptions
from rag.sources.file_groups import file_groups
from rag.sources.formats import ExtractOptions
from rag.sources.loaders import load_sources
from rag.sources.scan import ReadAs, scan_sources

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another group needs root")
POSIX = ExtractOptions(acl_from="posix")
# Two groups every Debian system has, other than the caller's own.
G1, G2 = (g.gr_name for g in sorted(grp.getgrall(), key=lambda g: g.gr_gid)[1:3])


def write(path, text, mode, group):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chown(path, -1, grp.getgrnam(group).gr_gid)
    path.chmod(mode)
    return path


def set_posix_acl(path, entries):
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, gid) for tag, perm, gid in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", raw)
    except OSError as err:
        pytest.skip(f"this file system keeps no POSIX ACL ({err.strerror})")


def test_the_owning_group_counts_when_it_may_read_and_everyone_only_when_asked(tmp_path):
    f = write(tmp_path / "a.md", "A.\n", 0o640, G1)
    assert file_groups(f, everyone=False) == (G1,)
    f.chmod(0o604)
    assert file_groups(f, everyone=False) == () and file_groups(f, everyone=True) == ("everyone",)
    f.chmod(0o644)
    assert file_groups(f, everyone=True) == tuple(sorted((G1, "everyone")))


def test_posix_acl_group_entries_count_within_the_mask(tmp_path):
    f = write(tmp_path / "a.md", "A.\n", 0o640, G1)
    gid2 = grp.getgrnam(G2).gr_gid
    # user::rw- group::r-- group:G2:r-- mask::r-- other::---
    set_posix_acl(f, [(1, 6, 2**32 - 1), (4, 4, 2**32 - 1), (8, 4, gid2), (0x10, 4, 2**32 - 1), (0x20, 0, 2**32 - 1)])
    assert file_groups(f, everyone=True) == tuple(sorted((G1, G2)))
    set_posix_acl(f, [(1, 6, 2**32 - 1), (4, 4, 2**32 - 1), (8, 4, gid2), (0x10, 0, 2**32 - 1), (0x20, 0, 2**32 - 1)])
    assert file_groups(f, everyone=True) == ()   # the mask lets no group read


def test_file_system_groups_bound_the_folder_and_the_document(tmp_path):
    write(tmp_path / ACCESS_FILE, f"acl: [{G1}, audit]\n", 0o644, G1)
    write(tmp_path / "plain.md", "Plain.\n", 0o640, G1)
    write(tmp_path / "other.md", "Other group.\n", 0o640, G2)
    write(tmp_path / "private.md", "Owner only.\n", 0o600, G1)
    write(tmp_path / "sub" / "wide.md", f"---\nid: wide\nacl: [{G1}, audit]\n---\nWide.\n", 0o640, G1)
    result = load_sources([tmp_path], options=POSIX)
    assert {d.doc_id: d.acl for d in result.documents} == {"plain": (G1,)}
    reasons = {r.doc_id: r.reason for r in result.rejected}
    assert reasons["other"] == (f"none of its file-system groups ({G2}) is allowed by the folder ACL file "
                                f"{tmp_path / ACCESS_FILE}")
    assert reasons["private"].startswith("none of its file-system groups (none)")
    assert reasons["wide"] == (f"'acl' group 'audit' is not allowed by the folder ACL file {tmp_path / ACCESS_FILE} "
                               "and its file-system groups")
    assert all(r.withheld for r in result.rejected)


def test_without_a_folder_file_the_file_system_groups_are_the_acl(tmp_path):
    write(tmp_path / "a.md", "A.\n", 0o640, G1)
    write(tmp_path / "b.md", "B.\n", 0o600, G1)
    result = load_sources([tmp_path], default_acl=("staff",), options=POSIX)
    assert {d.doc_id: d.acl for d in result.documents} == {"a": (G1,)}
    assert [r.reason for r in result.rejected] == ["no group may read it on the file system (--acl-from posix)"]
    assert {d.doc_id: d.acl for d in load_sources([tmp_path], default_acl=("staff",)).documents} == {
        "a": ("staff",), "b": ("staff",)}


def test_a_chmod_or_chgrp_changes_no_content_yet_the_scan_reads_the_file_again(tmp_path):
    f = write(tmp_path / "a.md", "A.\n", 0o640, G1)
    first = scan_sources([str(tmp_path)], ReadAs(options=POSIX), {}, lambda files: {})
    known = dict(first.states)
    os.chown(f, -1, grp.getgrnam(G2).gr_gid)
    again = scan_sources([str(tmp_path)], ReadAs(options=POSIX), known, lambda files: {})
    assert [d.acl for d in again.parsed.values()] == [(G2,)]
    assert AccessOptions.of(None, "posix,everyone") == AccessOptions(None, True, True)
