"""Class 1: a document's ACL is never guessed from front matter the parser would otherwise ignore."""
import pytest
from hardening_helpers import write

from rag.sources.loaders import load_sources

STAFF = ("staff",)

HOSTILE = {
    "a YAML list": "---\n- acl: [secret]\n---\nBody.\n",
    "a bare line": "---\nacl [secret]\n---\nBody.\n",
    "a scalar": "---\njust words\n---\nBody.\n",
    "an unclosed block": "---\nacl: [secret]\nBody that never closes the block.\n",
    "a block closed by '...'": "---\nacl: [secret]\n...\nBody.\n",
    "duplicate acl keys": "---\nacl: [secret]\nacl: [everyone]\n---\nBody.\n",
    "duplicate nested keys": "---\nacl: [secret]\nextra: {a: 1, a: 2}\n---\nBody.\n",
    "acl with no value": "---\nacl:\n---\nBody.\n",
    "acl: null": "---\nacl: null\n---\nBody.\n",
    "acl: ~": "---\nacl: ~\n---\nBody.\n",
    "acl: empty string": "---\nacl: ''\n---\nBody.\n",
    "acl: list of empty strings": "---\nacl: ['', ' ']\n---\nBody.\n",
    "acl: a number": "---\nacl: 42\n---\nBody.\n",
    "acl: a boolean": "---\nacl: [yes]\n---\nBody.\n",
    "acl: a mapping": "---\nacl: {secret: true}\n---\nBody.\n",
    "acl: nested lists": "---\nacl: [[secret]]\n---\nBody.\n",
    "ACL in upper case": "---\nACL: [secret]\n---\nBody.\n",
    "groups instead of acl": "---\ngroups: [secret]\n---\nBody.\n",
    "front matter without acl": "---\ntitle: No ACL here\n---\nBody.\n",
    "empty front matter": "---\n---\nBody.\n",
    "JSON front matter with duplicate acl": '{\n"acl": ["secret"], "acl": ["everyone"]\n}\nBody.\n',
    "JSON front matter that is broken": '{\n"acl": ["secret",\n}\nBody.\n',
    "TOML front matter with duplicate acl": '+++\nacl = ["secret"]\nacl = ["everyone"]\n+++\nBody.\n',
    "a first line that only starts like a delimiter": "--- acl: [secret]\nBody.\n",
    "an acl line in a file without front matter": "# Title\n\nacl: [secret]\n\nBody.\n",
    "a JSON-style acl line without front matter": '{"acl": ["secret"]}\nBody.\n',
    "YAML that does not parse": "---\nacl: [secret\n---\nBody.\n",
    "tab-indented YAML": "---\nacl:\n\t- secret\n---\nBody.\n",
    "a lone surrogate in a group": '---\nacl: ["\\ud800"]\n---\nBody.\n',
    "an invisible character in a group": '---\nacl: ["sec\\u200bret"]\n---\nBody.\n',
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_front_matter_the_parser_cannot_trust_is_quarantined_never_given_the_default_acl(tmp_path, content):
    path = write(tmp_path, "doc.md", content)
    result = load_sources([tmp_path], default_acl=STAFF)
    assert result.documents == []
    [rejection] = result.rejected
    assert rejection.source_path == str(path)
    assert rejection.reason and "\n" not in rejection.reason and len(rejection.reason) < 300


@pytest.mark.parametrize("prefix", ["\ufeff", "\n\n  \n", "\u200b", "\ufeff\u200b\u2060\n", "\r\n"],
                         ids=["BOM", "blank lines", "zero-width space", "several invisibles", "CRLF blank line"])
def test_front_matter_behind_invisible_characters_is_read_as_front_matter(tmp_path, prefix):
    write(tmp_path, "doc.md", prefix + "---\nid: hidden\nacl: [secret]\n---\nBody.\n")
    [doc] = load_sources([tmp_path], default_acl=STAFF).documents
    assert (doc.doc_id, doc.acl, doc.text) == ("hidden", ("secret",), "Body.")


def test_crlf_front_matter_is_read(tmp_path):
    write(tmp_path, "doc.md", "---\r\nid: crlf\r\nacl: [secret]\r\n---\r\nBody.\r\n")
    [doc] = load_sources([tmp_path], default_acl=STAFF).documents
    assert doc.acl == ("secret",)


def test_default_acl_applies_to_a_file_with_no_front_matter_at_all(tmp_path):
    write(tmp_path, "plain.md", "# Plain\n\nA body that sets nothing.\n")
    [doc] = load_sources([tmp_path], default_acl=STAFF).documents
    assert doc.acl == STAFF


def test_without_a_default_acl_a_file_without_front_matter_is_quarantined(tmp_path):
    write(tmp_path, "plain.md", "# Plain\n\nBody.\n")
    [rejection] = load_sources([tmp_path]).rejected
    assert "no ACL" in rejection.reason


@pytest.mark.parametrize(("record", "expected"), [
    ('{"doc_id": "a", "text": "t"}', STAFF),
    ('{"doc_id": "a", "text": "t", "acl": ["own"]}', ("own",)),
    ('{"doc_id": "a", "text": "t", "acl": "own"}', ("own",)),
])
def test_jsonl_default_acl_applies_only_to_records_without_an_acl_field(tmp_path, record, expected):
    write(tmp_path, "docs.jsonl", record + "\n")
    [doc] = load_sources([tmp_path / "docs.jsonl"], default_acl=STAFF).documents
    assert doc.acl == expected


@pytest.mark.parametrize("record", [
    '{"doc_id": "a", "text": "t", "acl": null}',
    '{"doc_id": "a", "text": "t", "acl": []}',
    '{"doc_id": "a", "text": "t", "acl": [""]}',
    '{"doc_id": "a", "text": "t", "acl": [7]}',
    '{"doc_id": "a", "text": "t", "acl": [true]}',
    '{"doc_id": "a", "text": "t", "acl": {"g": 1}}',
    '{"doc_id": "a", "text": "t", "acl": ["x"], "acl": ["y"]}',
    '{"doc_id": "a", "text": "t", "ACL": ["secret"]}',
    '{"doc_id": "a", "text": "t", "Acl ": ["secret"]}',
    '{"doc_id": "a", "text": "t", "groups": ["secret"]}',
], ids=["null", "empty list", "empty name", "number", "boolean", "mapping", "duplicate key", "upper case",
        "spaced key", "groups"])
def test_jsonl_acl_present_without_a_usable_value_is_quarantined(tmp_path, record):
    write(tmp_path, "docs.jsonl", record + "\n")
    result = load_sources([tmp_path / "docs.jsonl"], default_acl=STAFF)
    assert result.documents == []
    [rejection] = result.rejected
    assert rejection.source_path.endswith("docs.jsonl:1") and rejection.doc_id == "a"


def test_yaml_scalars_stay_the_text_written(tmp_path):
    write(tmp_path, "doc.md", "---\nid: 007\nversion: 2026.10\nacl: ['010']\n---\nBody.\n")
    [doc] = load_sources([tmp_path]).documents
    assert (doc.doc_id, doc.version, doc.acl) == ("007", "2026.10", ("010",))
