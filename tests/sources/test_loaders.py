"""Loaders: what comes out of a folder of Markdown/text files and of benchmark JSONL, and what is refused."""
from collections import Counter
from pathlib import Path

import pytest

from rag.sources.loaders import _load_files, load_sources

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BAD = SAMPLES / "bad"
CORPUS = SAMPLES / "corpus"


@pytest.fixture(scope="module")
def bad_folder():
    return load_sources([BAD], default_acl=("support",))


@pytest.fixture(scope="module")
def sample_corpus():
    return load_sources([CORPUS])


def rejections_for(result, source_path):
    return [r for r in result.rejected if r.source_path == str(source_path)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("malformed-front-matter.md", "malformed front matter"),
        ("no-acl.md", "no ACL"),
        ("latin1.md", "not UTF-8"),
        ("binary.md", "binary file"),
        ("empty.md", "empty file"),
        ("whitespace-only.md", "empty file"),
        ("no-body.md", "empty body"),
        ("bad-acl-type.md", "'acl' must be a list of strings"),
        ("bad-version.md", "'version' must be a single value"),
        ("list-front-matter.md", "front matter is a list, not a mapping"),
        ("unclosed-front-matter.md", "unclosed front matter"),
        ("duplicate-acl.md", "duplicate key 'acl'"),
        ("unorderable-version.md", "cannot be ordered"),
        ("empty.jsonl", "empty file (no JSON records)"),
    ],
)
def test_each_bad_file_is_rejected_once_with_a_one_line_reason_naming_the_file(name, expected):
    result = load_sources([BAD])
    [rejection] = rejections_for(result, BAD / name)
    assert expected in rejection.reason
    assert "\n" not in rejection.reason
    assert not [d for d in result.documents if d.source_path == str(BAD / name)]


def test_empty_acl_list_is_rejected_without_a_default_acl():
    [rejection] = rejections_for(load_sources([BAD]), BAD / "empty-acl.md")
    assert "no ACL" in rejection.reason


def test_explicit_empty_acl_is_rejected_even_when_the_caller_supplies_a_default_acl(bad_folder):
    [rejection] = rejections_for(bad_folder, BAD / "empty-acl.md")
    assert "ACL" in rejection.reason


def test_front_matter_error_reports_the_yaml_line():
    [rejection] = rejections_for(load_sources([BAD]), BAD / "malformed-front-matter.md")
    assert "at line 6" in rejection.reason


def test_non_utf8_rejection_names_the_offending_byte():
    [rejection] = rejections_for(load_sources([BAD]), BAD / "latin1.md")
    assert "0xe9" in rejection.reason


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (3, "not JSON"),
        (4, "missing doc_id"),
        (5, "missing text"),
        (7, "empty text"),
        (8, "expected a JSON object, got list"),
    ],
)
def test_each_bad_jsonl_line_is_rejected_on_its_own_with_path_and_line(bad_folder, line, expected):
    [rejection] = rejections_for(bad_folder, f"{BAD / 'bad.jsonl'}:{line}")
    assert expected in rejection.reason
    assert "\n" not in rejection.reason


def test_jsonl_rejection_keeps_the_doc_id_when_the_record_has_one(bad_folder):
    [rejection] = rejections_for(bad_folder, f"{BAD / 'bad.jsonl'}:5")
    assert rejection.doc_id == "bench-no-text"


def test_blank_jsonl_line_is_skipped_not_rejected(bad_folder):
    assert not rejections_for(bad_folder, f"{BAD / 'bad.jsonl'}:6")


def test_only_the_two_good_jsonl_records_load(bad_folder):
    from_jsonl = [d for d in bad_folder.documents if d.source_path.startswith(str(BAD / "bad.jsonl"))]
    assert [(d.doc_id, d.source_path) for d in from_jsonl] == [
        ("bench-good-1", f"{BAD / 'bad.jsonl'}:1"),
        ("bench-good-2", f"{BAD / 'bad.jsonl'}:2"),
    ]
    assert all(d.acl == ("support",) for d in from_jsonl)


def test_jsonl_records_without_acl_are_rejected_when_no_default_acl_is_given():
    result = load_sources([BAD / "bad.jsonl"])
    assert not result.documents
    assert {r.source_path for r in result.rejected} >= {f"{BAD / 'bad.jsonl'}:1", f"{BAD / 'bad.jsonl'}:2"}


@pytest.mark.parametrize(
    ("name", "doc_id"),
    [("missing-link.md", "missing-link"), ("cycle-a.md", "cycle-a"), ("cycle-b.md", "cycle-b"),
     ("notes.txt", "field-notes-txt")],
)
def test_valid_edge_cases_load_as_documents(bad_folder, name, doc_id):
    [doc] = [d for d in bad_folder.documents if d.source_path == str(BAD / name)]
    assert doc.doc_id == doc_id
    assert not rejections_for(bad_folder, BAD / name)


def test_dangling_link_is_kept_on_the_document(bad_folder):
    [doc] = [d for d in bad_folder.documents if d.doc_id == "missing-link"]
    assert doc.links == ("no-such-document",)


def test_folder_readme_is_not_a_document(bad_folder):
    paths = {d.source_path for d in bad_folder.documents} | {r.source_path for r in bad_folder.rejected}
    assert str(BAD / "README.md") not in paths


def test_nested_readme_and_dot_files_are_skipped(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "README.md").write_text("# About this folder\n")
    (tmp_path / ".draft.md").write_text("---\nacl: [a]\n---\nDraft.\n")
    (tmp_path / "doc.md").write_text("---\nacl: [a]\n---\nReal text.\n")
    result = load_sources([tmp_path])
    assert [d.doc_id for d in result.documents] == ["doc"]
    assert result.rejected == []


def test_default_acl_applies_to_a_file_without_front_matter(tmp_path):
    path = tmp_path / "plain.md"
    path.write_text("# Plain\n\nBody text.\n")
    [doc] = load_sources([path], default_acl=("support", "partners")).documents
    assert doc.acl == ("partners", "support")


def test_default_acl_never_fills_in_front_matter_without_an_acl(tmp_path):
    path = tmp_path / "plain.md"
    path.write_text("---\ntitle: Plain\n---\nBody text.\n")
    result = load_sources([path], default_acl=("support", "partners"))
    assert result.documents == []
    [rejection] = result.rejected
    assert "no 'acl' key" in rejection.reason


def test_front_matter_acl_wins_over_the_default_acl(tmp_path):
    path = tmp_path / "own.md"
    path.write_text("---\nacl: [security-team]\n---\nBody text.\n")
    [doc] = load_sources([path], default_acl=("everyone",)).documents
    assert doc.acl == ("security-team",)


def test_missing_id_title_and_version_fall_back_to_path_heading_and_one(tmp_path):
    (tmp_path / "ops").mkdir()
    path = tmp_path / "ops" / "runbook.2026.md"
    path.write_text("---\nacl: [support]\n---\n# Runbook heading\n\nSteps.\n")
    [doc] = load_sources([tmp_path], collection="operations").documents
    assert (doc.doc_id, doc.title, doc.version, doc.collection) == ("ops/runbook.2026", "Runbook heading", "1",
                                                                    "operations")


def test_unsupported_file_type_in_a_folder_is_rejected(tmp_path):
    (tmp_path / "diagram.png").write_bytes(b"\x89PNG")
    [rejection] = load_sources([tmp_path]).rejected
    assert rejection.source_path == str(tmp_path / "diagram.png")
    assert rejection.reason == "unsupported file type '.png'"


def test_file_that_disappears_between_listing_and_reading_is_rejected(tmp_path):
    gone = tmp_path / "gone.md"
    result = _load_files([gone], tmp_path, ("support",), None)
    assert result.documents == []
    [rejection] = result.rejected
    assert rejection.source_path == str(gone)
    assert "file disappeared" in rejection.reason


@pytest.mark.parametrize("name", ["no-such-folder", "no-such-file.md", "no-such-file.jsonl"])
def test_source_that_does_not_exist_is_rejected_by_path(tmp_path, name):
    result = load_sources([tmp_path / name])
    assert result.documents == []
    [rejection] = result.rejected
    assert rejection.source_path == str(tmp_path / name)


def test_documents_carry_the_source_they_were_loaded_from(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("---\nacl: [support]\n---\nText.\n")
    [doc] = load_sources([tmp_path]).documents
    assert (doc.source, doc.source_path) == (str(tmp_path), str(path))


def test_sample_corpus_loads_42_documents_without_rejections(sample_corpus):
    assert len(sample_corpus.documents) == 42
    assert sample_corpus.rejected == []
    assert len({d.doc_id for d in sample_corpus.documents}) == 37


def test_sample_corpus_versions_are_strings_and_acls_sorted_tuples(sample_corpus):
    for doc in sample_corpus.documents:
        assert isinstance(doc.version, str)
        assert isinstance(doc.acl, tuple)
        assert list(doc.acl) == sorted(set(doc.acl))
    assert {d.version for d in sample_corpus.documents if d.doc_id == "edge-offline-cache"} == {"2025", "2026"}


def test_sample_corpus_collections_follow_front_matter(sample_corpus):
    assert Counter(d.collection for d in sample_corpus.documents) == {"operations": 18, "installation": 14, "security": 10}


def test_document_without_links_key_has_no_links(sample_corpus):
    [doc] = [d for d in sample_corpus.documents if d.doc_id == "vulnerability-disclosure"]
    assert doc.links == ()
