"""The permission property over random folder trees: after any sequence of folder ACL file edits, document ACL edits
and deletions, each followed by a publish, no caller receives a byte of a document its effective ACL excludes."""
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_acl_changes import publish

from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.sources.access import ACCESS_FILE
from rag.store.publish import NothingToPublish

GROUPS = ("finance", "audit", "staff", "sales")
DEFAULT = ("staff",)
FOLDERS = ("", "a", "a/b", "c")
DOCS = tuple(f"d{i}" for i in range(5))
MARKER = re.compile(r"marker-(d\d)")
INVALID, WITHHELD, KEPT = "invalid", "withheld", "kept"

groups = st.lists(st.sampled_from(GROUPS), min_size=1, max_size=3, unique=True).map(lambda g: tuple(sorted(g)))
folder_file = st.one_of(st.none(), st.just(INVALID), st.tuples(groups, st.booleans()))
own_acl = st.one_of(st.none(), groups)
operation = st.one_of(st.tuples(st.just("folder"), st.sampled_from(FOLDERS), folder_file),
                      st.tuples(st.just("acl"), st.sampled_from(DOCS), own_acl),
                      st.tuples(st.just("delete"), st.sampled_from(DOCS), st.none()))


def effective(folder: str, own: tuple | None, folder_files: dict) -> tuple | str:
    """The oracle, written from the rules, not from the code: the ACL a document gets, WITHHELD (hidden: its folder
    files do not allow it) or KEPT (quarantined, its last published version stays: no ACL written anywhere)."""
    chain = [""] + ["/".join(folder.split("/")[:n]) for n in range(1, len(folder.split("/")) + 1)] if folder else [""]
    state, broken = None, False
    for f in chain:
        spec = folder_files.get(f)
        if spec is None or broken:
            continue
        if spec == INVALID:
            broken = True
            continue
        allowed, inherit = spec
        if inherit and state is not None and not set(allowed) <= set(state):
            broken = True
        else:
            state = allowed
    if broken:
        return WITHHELD
    if state is None:
        return own or KEPT
    if own is None:
        return state
    return own if set(own) <= set(state) else WITHHELD


def write_tree(src: Path, docs: dict, folder_files: dict) -> None:
    for f in FOLDERS:
        path = src / f / ACCESS_FILE
        spec = folder_files.get(f)
        if spec is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("acl: []\n" if spec == INVALID else
                            f"acl: [{', '.join(spec[0])}]\n" + ("" if spec[1] else "inherit: false\n"))
    for doc_id in DOCS:
        for f in FOLDERS:
            (src / f / f"{doc_id}.md").unlink(missing_ok=True)
        if doc_id in docs:
            folder, own = docs[doc_id]
            acl = f"acl: [{', '.join(own)}]\n" if own else ""
            (src / folder).mkdir(parents=True, exist_ok=True)
            (src / folder / f"{doc_id}.md").write_text(
                f"---\nid: {doc_id}\n{acl}---\nThe gateway quarterly report marker-{doc_id} lists revenue.\n")


def check(ws: Path, embedder, published: dict) -> None:
    reader = Workspace(ws, embedder=embedder)
    try:
        for caller in [{g} for g in GROUPS] + [set(GROUPS)]:
            result = reader.retrieve("longrag", Caller(frozenset(caller)), "gateway quarterly report revenue", 4000)
            for item in result.items:
                assert set(published.get(item.doc_id, ())) & caller, (item.doc_id, caller, published)
                for leaked in MARKER.findall(item.text):
                    assert set(published.get(leaked, ())) & caller, (leaked, caller, published)
            if caller == set(GROUPS):
                assert {i.doc_id for i in result.items} == set(published)
    finally:
        reader.close()


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(placement=st.fixed_dictionaries({d: st.tuples(st.sampled_from(FOLDERS), own_acl) for d in DOCS}),
       folder_files=st.fixed_dictionaries({f: folder_file for f in FOLDERS}),
       operations=st.lists(operation, min_size=1, max_size=3))
def test_no_caller_ever_reads_a_document_its_effective_acl_excludes(embedder, placement, folder_files, operations):
    with tempfile.TemporaryDirectory() as tmp:
        src, ws = Path(tmp) / "src", Path(tmp) / "ws"
        docs, folders, published = dict(placement), dict(folder_files), {}
        for step in [None, *operations]:
            if step is not None:
                kind, target, value = step
                if kind == "folder":
                    folders[target] = value
                elif kind == "acl" and target in docs:
                    docs[target] = (docs[target][0], value)
                elif kind == "delete":
                    docs.pop(target, None)
            write_tree(src, docs, folders)
            outcome = {d: effective(f, own, folders) for d, (f, own) in docs.items()}
            try:
                publish(ws, src, embedder)[0].close()
            except NothingToPublish:
                assert all(acl == KEPT for acl in outcome.values())
                continue
            published = {d: published[d] if acl == KEPT else acl for d, acl in outcome.items()
                         if acl != WITHHELD and (acl != KEPT or d in published)}
            check(ws, embedder, published)
