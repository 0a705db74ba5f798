"""Folder ACL files: a `.access.yaml` sets who may read every document below its folder; a document only narrows."""
import json
import os

import pytest

from rag.sources.access import ACCESS_FILE, NOTE
from rag.sources.loaders import load_sources


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def md(doc_id, acl=None, body="Body text."):
    acl_line = f"acl: {json.dumps(acl)}\n" if acl is not None else ""
    return f"---\nid: {doc_id}\n{acl_line}---\n{body}\n"


def acls(result):
    return {d.doc_id: d.acl for d in result.documents}


def reasons(result):
    return {r.doc_id: r.reason for r in result.rejected}


def test_a_folder_file_sets_the_acl_of_every_document_below_it_in_any_notation(tmp_path):
    write(tmp_path, f"finance/{ACCESS_FILE}", "acl: [finance, audit]\n")
    write(tmp_path, "finance/plain.md", "No front matter here.\n")
    write(tmp_path, "finance/front.md", md("front"))                       # front matter without 'acl'
    write(tmp_path, "finance/deep/deeper/page.html", "<html><body><p>Quarterly numbers.</p></body></html>")
    write(tmp_path, "finance/records.jsonl", json.dumps({"doc_id": "j1", "text": "A record."}) + "\n")
    write(tmp_path, "other.md", "Outside the folder.\n")
    result = load_sources([tmp_path], default_acl=("staff",))
    assert acls(result) == {"finance/plain": ("audit", "finance"), "front": ("audit", "finance"),
                            "finance/deep/deeper/page": ("audit", "finance"), "j1": ("audit", "finance"),
                            "other": ("staff",)}
    assert [(r.source_path, r.reason) for r in result.skipped] == [(str(tmp_path / "finance" / ACCESS_FILE), NOTE)]


def test_the_nearest_folder_file_wins_and_a_document_may_narrow_it(tmp_path):
    write(tmp_path, ACCESS_FILE, "acl: [staff, finance, audit]\n")
    write(tmp_path, f"finance/{ACCESS_FILE}", "acl: [finance, audit]\n")
    write(tmp_path, "finance/all.md", "Both groups.\n")
    write(tmp_path, "finance/narrow.md", md("narrow", ["audit"]))
    write(tmp_path, "top.md", "Top level.\n")
    assert acls(load_sources([tmp_path])) == {"finance/all": ("audit", "finance"), "narrow": ("audit",),
                                              "top": ("audit", "finance", "staff")}


def test_a_document_acl_wider_than_its_folder_is_quarantined_naming_the_group_and_the_folder_file(tmp_path):
    folder_file = write(tmp_path, f"finance/{ACCESS_FILE}", "acl: [finance]\n")
    write(tmp_path, "finance/leak.md", md("leak", ["finance", "everyone"]))
    write(tmp_path, "finance/records.jsonl", json.dumps({"doc_id": "j", "text": "T.", "acl": ["sales"]}) + "\n")
    result = load_sources([tmp_path])
    assert result.documents == []
    assert reasons(result) == {
        "leak": f"'acl' group 'everyone' is not allowed by the folder ACL file {folder_file}",
        "j": f"'acl' group 'sales' is not allowed by the folder ACL file {folder_file}"}


def test_a_folder_file_may_only_narrow_the_one_above_it_unless_it_breaks_inheritance(tmp_path):
    write(tmp_path, ACCESS_FILE, "acl: [finance]\n")
    wide = write(tmp_path, f"wide/{ACCESS_FILE}", "acl: [finance, everyone]\n")
    write(tmp_path, f"public/{ACCESS_FILE}", "acl: [everyone]\ninherit: false\n")
    write(tmp_path, "wide/a.md", "A.\n")
    write(tmp_path, "public/b.md", "B.\n")
    write(tmp_path, "public/c.md", md("c", ["finance"]))   # inherit: false never lets a document widen
    result = load_sources([tmp_path])
    assert acls(result) == {"public/b": ("everyone",)}
    assert reasons(result)["wide/a"] == (f"folder ACL file {wide} allows group 'everyone' that the folder file above "
                                         f"it ({tmp_path / ACCESS_FILE}) does not; narrow it or set 'inherit: false'")
    assert "'acl' group 'finance' is not allowed" in reasons(result)["c"]


INVALID = {
    "not a mapping": "- finance\n",
    "empty": "",
    "no acl key": "inherit: true\n",
    "acl in capitals": "ACL: [finance]\n",
    "an unknown key": "acl: [finance]\ngroups: [sales]\n",
    "empty acl": "acl: []\n",
    "null acl": "acl:\n",
    "blank group": "acl: ['']\n",
    "unquoted number": "acl: [42]\n",
    "boolean group": "acl: [yes]\n",
    "control character": 'acl: ["fin\\u0007ance"]\n',
    "invisible character": 'acl: ["fin\\u200bance"]\n',
    "duplicate keys": "acl: [finance]\nacl: [everyone]\n",
    "inherit not a boolean": "acl: [finance]\ninherit: maybe\n",
    "YAML that does not parse": "acl: [finance\n",
    "mapping acl": "acl: {finance: true}\n",
}


@pytest.mark.parametrize("content", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_folder_file_quarantines_every_document_below_it_naming_the_folder_file(tmp_path, content):
    folder_file = write(tmp_path, f"finance/{ACCESS_FILE}", content)
    write(tmp_path, "finance/a.md", "A.\n")
    write(tmp_path, "finance/sub/b.md", md("b", ["finance"]))
    write(tmp_path, f"finance/sub/{ACCESS_FILE}", "acl: [finance]\ninherit: false\n")
    write(tmp_path, "finance/records.jsonl", json.dumps({"doc_id": "j", "text": "T.", "acl": ["finance"]}) + "\n")
    write(tmp_path, "outside.md", md("outside", ["staff"]))
    result = load_sources([tmp_path], default_acl=("staff",))
    assert acls(result) == {"outside": ("staff",)}
    assert set(reasons(result)) == {"finance/a", "b", "j"}
    for reason in reasons(result).values():
        assert reason.startswith(f"folder ACL file {folder_file}: ") and "\n" not in reason and len(reason) < 300


def test_a_folder_file_that_is_a_link_or_not_utf8_or_a_folder_quarantines_below_it(tmp_path):
    write(tmp_path, "real.yaml", "acl: [everyone]\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ACCESS_FILE).symlink_to(tmp_path / "real.yaml")
    write(tmp_path, "b/x.md", "X.\n")
    (tmp_path / "b" / ACCESS_FILE).write_bytes(b"acl: [fin\xe9]\n")
    (tmp_path / "c" / ACCESS_FILE).mkdir(parents=True)
    write(tmp_path, "a/x.md", "X.\n")
    write(tmp_path, "c/x.md", "X.\n")
    result = load_sources([tmp_path], default_acl=("staff",))
    assert [d.doc_id for d in result.documents] == []
    assert {k: v.split(": ", 1)[1] for k, v in reasons(result).items() if k} == {
        "a/x": "is a symbolic link (links are never followed)", "b/x": "not UTF-8 text (byte 0xe9 at offset 9)",
        "c/x": "is not a regular file"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_folder_file_quarantines_below_it(tmp_path):
    folder_file = write(tmp_path, ACCESS_FILE, "acl: [finance]\n")
    write(tmp_path, "a.md", "A.\n")
    folder_file.chmod(0)
    result = load_sources([tmp_path], default_acl=("staff",))
    assert result.documents == []
    assert reasons(result) == {"a": f"folder ACL file {folder_file}: cannot read it: Permission denied"}


def test_a_partitioned_run_reads_the_folder_files_of_the_source_folder_above_its_collection(tmp_path):
    """Both layouts give one document one ACL: a collection's partition is bound by the source folder's file too."""
    from rag.sources.partitions import discover
    from rag.sources.scan import ReadAs, scan_sources

    src = tmp_path / "src"
    write(src, ACCESS_FILE, "acl: [finance, audit]\n")
    write(src, "hr/pay.md", "Pay bands.\n")
    write(src, "hr/narrow.md", md("narrow", ["audit"]))
    write(src, "top.md", "Top level.\n")
    whole = acls(load_sources([src]))
    by_partition = {}
    for spec in discover([str(src)], tmp_path / "ws"):
        by_partition |= acls(load_sources([spec.folder], select=spec.selection))
        scan = scan_sources([str(spec.folder)], ReadAs(), {}, lambda files: {}, select=spec.selection)
        assert {d.doc_id: d.acl for d in scan.parsed.values()} == acls(load_sources([spec.folder], select=spec.selection))
    assert whole == {"hr/pay": ("audit", "finance"), "narrow": ("audit",), "top": ("audit", "finance")}
    assert by_partition == {"pay": ("audit", "finance"), "narrow": ("audit",), "top": ("audit", "finance")}
