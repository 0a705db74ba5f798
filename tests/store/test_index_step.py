"""The index step reads the rows of the documents a publish changed, not every row, and falls back to comparing
every row with every unit once a run stopped halfway."""
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings


class Stopped(RuntimeError):
    """Stands for the process being killed at that point."""


class WatchedIndex(SubchunkIndex):
    """The real index, noting which documents' rows each publish reads (None: every row), and stopping once
    right after the catalog committed the units if asked to."""

    def __init__(self, uri):
        super().__init__(uri)
        self.asked: list[set[str] | None] = []
        self.stop_before_removing = False

    def member_keys(self, doc_ids=None):
        self.asked.append(None if doc_ids is None else set(doc_ids))
        return super().member_keys(doc_ids)

    def remove_stale(self, live, doc_ids=None):
        if self.stop_before_removing:
            self.stop_before_removing = False
            raise Stopped("killed after commit_units")
        self.asked.append(None if doc_ids is None else set(doc_ids))
        return super().remove_stale(live, doc_ids)


def write(src, doc_id, text, version=1):
    (src / f"{doc_id}.md").write_text(
        f"---\nid: {doc_id}\ntitle: Title of {doc_id}\nversion: \"{version}\"\nacl: [ops]\n---\n{text}\n")


def publish(workspace, src, embedder) -> WatchedIndex:
    settings = IngestSettings(sources=[str(src)], allow_empty=True)
    catalog, index = Catalog(workspace / "catalog.duckdb"), WatchedIndex(workspace / "lancedb")
    try:
        publish_documents(catalog, settings)
        publish_units(catalog, default_counter(), settings)
        publish_index(catalog, index, embedder.encode, default_counter(), settings)
    finally:
        catalog.close()
    return index


def assert_in_step(workspace):
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    try:
        for finding in (consistency.index_matches_current_units(catalog, index),
                        consistency.no_stale_rows(catalog, index),
                        consistency.index_rows_match_catalog(catalog, index)):
            assert finding.passed, finding.examples
    finally:
        catalog.close()


@pytest.fixture
def corpus(tmp_path, embedder):
    src, workspace = tmp_path / "src", tmp_path / "ws"
    src.mkdir()
    workspace.mkdir()
    for i in range(6):
        write(src, f"doc-{i}", f"Pump {i} is inspected every {i + 2} weeks. Its seals are replaced yearly.")
    assert publish(workspace, src, embedder).asked == [None, None]   # the first publish compares every row
    return src, workspace


def test_an_edit_and_a_deletion_read_only_those_documents_rows_and_leave_the_index_in_step(corpus, embedder):
    src, workspace = corpus
    write(src, "doc-2", "Pump 2 is inspected every week now. Its seals are replaced yearly.", version=2)
    (src / "doc-4.md").unlink()
    assert publish(workspace, src, embedder).asked == [{"doc-2"}, {"doc-2", "doc-4"}]
    assert_in_step(workspace)
    assert publish(workspace, src, embedder).asked == [set(), set()]   # nothing changed: no row is read
    assert_in_step(workspace)


def test_a_run_stopped_after_committing_its_units_is_repaired_by_a_next_run_that_changes_nothing(corpus, embedder):
    src, workspace = corpus
    write(src, "doc-3", "Pump 3 was replaced by a larger model. It is inspected monthly.", version=2)
    settings = IngestSettings(sources=[str(src)])
    catalog, index = Catalog(workspace / "catalog.duckdb"), WatchedIndex(workspace / "lancedb")
    index.stop_before_removing = True
    try:
        publish_documents(catalog, settings)
        publish_units(catalog, default_counter(), settings)
        with pytest.raises(Stopped):
            publish_index(catalog, index, embedder.encode, default_counter(), settings)
    finally:
        catalog.close()
    index = publish(workspace, src, embedder)
    assert_in_step(workspace)   # the old version's rows were found by comparing every row with every unit
    assert index.asked == [None, None]
    assert publish(workspace, src, embedder).asked == [set(), set()]


def test_an_index_folder_put_back_to_an_older_copy_is_compared_whole_by_the_next_publish(corpus, embedder):
    src, workspace = corpus
    shutil.copytree(workspace / "lancedb", workspace.parent / "lancedb-copy")
    write(src, "doc-1", "Pump 1 is inspected daily. Its seals are replaced monthly.", version=2)
    publish(workspace, src, embedder)
    shutil.rmtree(workspace / "lancedb")
    shutil.copytree(workspace.parent / "lancedb-copy", workspace / "lancedb")
    index = publish(workspace, src, embedder)
    assert_in_step(workspace)   # doc-1's version 2 has its rows again, version 1's are gone
    assert index.asked == [None, None]


EDITS = st.lists(st.tuples(st.sampled_from(["revise", "delete", "add", "regroup", "relink"]), st.integers(0, 5)),
                 min_size=1, max_size=3)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(EDITS, min_size=2, max_size=4))
def test_after_random_edits_each_publish_reads_only_the_change_and_leaves_every_row_in_step(rounds, embedder):
    """Edits, deletions, additions, ACL changes in place (rows re-keyed) and link changes (units re-grouped)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, workspace = Path(tmp) / "src", Path(tmp) / "ws"
        src.mkdir()
        workspace.mkdir()
        docs = {i: {"version": 1, "acl": "ops", "link": None, "text": f"Pump {i} is inspected every {i + 2} weeks."}
                for i in range(6)}

        def write_all():
            for old in src.glob("*.md"):
                old.unlink()
            for i, d in docs.items():
                links = f"links: [doc-{d['link']}]\n" if d["link"] is not None else ""
                (src / f"doc-{i}.md").write_text(
                    f"---\nid: doc-{i}\ntitle: Title of doc-{i}\nversion: \"{d['version']}\"\nacl: [{d['acl']}]\n"
                    f"{links}---\n{d['text']}\n")

        write_all()
        assert publish(workspace, src, embedder).asked == [None, None]
        for n, edits in enumerate(rounds):
            for kind, i in edits:
                if kind == "add" or i not in docs:
                    docs[i] = {"version": 1, "acl": "ops", "link": None, "text": f"Valve {i} opens at {n} bar."}
                elif kind == "delete" and len(docs) > 1:
                    del docs[i]
                elif kind == "revise":
                    docs[i] = dict(docs[i], version=docs[i]["version"] + 1, text=f"{docs[i]['text']} Revised {n}.")
                elif kind == "regroup":   # the same version under another ACL: its rows are written again
                    docs[i] = dict(docs[i], acl="ops" if docs[i]["acl"] == "field" else "field")
                elif kind == "relink":
                    docs[i] = dict(docs[i], link=(i + n + 1) % 6)
            write_all()
            assert None not in publish(workspace, src, embedder).asked   # the change's rows only
            assert_in_step(workspace)
