"""Class 3: one bad file or line is contained and named; the run still publishes and applies deletions."""
import pytest
from hardening_helpers import good, publish_all, write

from rag.sources.loaders import load_sources
from rag.store.catalog import Catalog
from rag.store.publish import NothingToPublish, publish_documents
from rag.store.settings import IngestSettings

DEEP = 100_000

BAD_FILES = {
    "deep-yaml.md": "---\nacl: [a]\nx: " + "[" * DEEP + "]" * DEEP + "\n---\nBody.\n",
    "deep-yaml-map.md": "---\nacl: [a]\nx: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n---\nBody.\n",
    "surrogate-title.md": '---\nacl: [a]\ntitle: "\\ud800 broken"\n---\nBody.\n',
    "surrogate-id.md": '---\nid: "x\\udfff"\nacl: [a]\n---\nBody.\n',
    "huge-int.md": "---\nacl: [a]\nversion: " + "9" * 5000 + "\n---\nBody.\n",
    "json-front-matter.md": '{\n"acl": ["a"], "title": \n}\nBody.\n',
    "json-deep.md": "{\n\"x\": " + "[" * DEEP + "]" * DEEP + "\n}\nBody.\n",
    "toml-broken.md": '+++\nacl = ["a"\n+++\nBody.\n',
    "yaml-alias-bomb.md": "---\nacl: [a]\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                          "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\ntitle: *c\n---\nBody.\n",
    "python-tag.md": "---\nacl: [a]\ntitle: !!python/object/apply:os.system ['true']\n---\nBody.\n",
    "long-id.md": "---\nid: " + "i" * 600 + "\nacl: [a]\n---\nBody.\n",
    "control-in-id.md": '---\nid: "evil\\x00id"\nacl: [a]\n---\nBody.\n',
    "invisible-body.md": "---\nacl: [a]\n---\n\u200b\u200b\u2060\n",
    "binary-after-front-matter.md": b"---\nacl: [a]\n---\n\x00\x01\x02",
    "latin1.md": "---\nacl: [a]\n---\ncaf\xe9\n".encode("latin-1"),
}
BAD_LINES = [
    '{"doc_id": "deep", "text": ' + "[" * DEEP + "]" * DEEP + "}",
    '{"doc_id": "surrogate", "text": "\\ud800"}',
    '{"doc_id": "s2", "text": "ok", "title": "\\udc00"}',
    '{"doc_id": ' + "1" * 5000 + ', "text": "t"}',
    '{"doc_id": "nan", "text": "t", "version": NaN}',
    '{"doc_id": "float", "text": "t", "version": 1.10}',
    '{"doc_id": ["list"], "text": "t"}',
    '{"doc_id": "x", "text": 5}',
    "\x00\x01 not json",
    '"a string"',
    "[" * DEEP,
]


def test_every_bad_file_is_rejected_by_name_and_the_good_one_loads(tmp_path):
    for name, content in BAD_FILES.items():
        write(tmp_path, name, content)
    write(tmp_path, "good.md", good("good", acl="a"))
    result = load_sources([tmp_path])
    assert [d.doc_id for d in result.documents] == ["good"]
    by_path = {r.source_path: r.reason for r in result.rejected}
    assert set(by_path) == {str(tmp_path / n) for n in BAD_FILES}
    assert all(reason and "\n" not in reason and len(reason) < 300 for reason in by_path.values())
    assert not any("unexpected" in r for r in by_path.values()), by_path


def test_every_bad_jsonl_line_is_rejected_by_file_and_line(tmp_path):
    write(tmp_path, "docs.jsonl", "\n".join(BAD_LINES + ['{"doc_id": "fine", "text": "Fine."}']) + "\n")
    result = load_sources([tmp_path / "docs.jsonl"], default_acl=("a",))
    assert [d.doc_id for d in result.documents] == ["fine"]
    assert [r.source_path for r in result.rejected] == [f"{tmp_path / 'docs.jsonl'}:{i}"
                                                        for i in range(1, len(BAD_LINES) + 1)]
    assert all("\n" not in r.reason and len(r.reason) < 300 for r in result.rejected)


def test_a_source_that_cannot_be_listed_does_not_stop_the_other_sources(tmp_path):
    write(tmp_path / "ok", "good.md", good("good", acl="a"))
    result = load_sources([tmp_path / "missing", tmp_path / "ok", "/dev/null"])
    assert [d.doc_id for d in result.documents] == ["good"]
    assert {r.source_path for r in result.rejected} == {str(tmp_path / "missing"), "/dev/null"}


def test_a_run_with_crashing_inputs_still_publishes_and_applies_deletions(tmp_path, embedder):
    src = tmp_path / "src"
    write(src, "keep.md", good("keep", "Kept text."))
    write(src, "gone.md", good("gone", "Deleted text about turbines."))
    catalog, *_ = publish_all(tmp_path / "ws", [src], embedder.encode)
    catalog.close()
    (src / "gone.md").unlink()
    for name, content in BAD_FILES.items():
        write(src, name, content)
    write(src, "lines.jsonl", "\n".join(BAD_LINES) + "\n")
    catalog, index, changes, _ = publish_all(tmp_path / "ws", [src], embedder.encode, default_acl=("a",))
    assert changes.deleted == [("gone", "1")]
    assert {d.doc_id for d in catalog.current_documents()} == {"keep"}
    named = {p for _, p, _, _ in catalog.quarantine()}
    assert {str(src / n) for n in BAD_FILES} <= named
    assert index.table.count_rows("doc_id = 'gone'") == 0


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x00", b"", b"   \n\t\n"])
def test_only_bad_inputs_stop_the_run_with_one_line_naming_the_file(tmp_path, content):
    write(tmp_path, "bad.md", content)
    catalog = Catalog(tmp_path / "catalog.duckdb")
    with pytest.raises(NothingToPublish) as err:
        publish_documents(catalog, IngestSettings(sources=[str(tmp_path)]))
    assert str(tmp_path / "bad.md") in str(err.value) and "\n" not in str(err.value)
