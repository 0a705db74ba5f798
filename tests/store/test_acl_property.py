"""The permission property over random folder trees: after any sequence of folder ACL file edits, document ACL edits,
chmod and chgrp (with `--acl-from posix`) and deletions, each followed by a publish, no caller receives a byte of a
document its effective ACL excludes, from any method."""
import grp
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_acl_changes import publish

from rag.query.methods import METHODS
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


def effective(folder: str, own: tuple | None, folder_files: dict, fs: tuple | None = None) -> tuple | str:
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
    if fs is not None:   # the file system's groups bound the folder's (or are the groups without a folder file)
        state = fs if state is None else tuple(g for g in fs if g in state)
        if not state:
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
        folder, own = docs.get(doc_id, (None, None))
        for f in FOLDERS:
            if f != folder:
                (src / f / f"{doc_id}.md").unlink(missing_ok=True)
        if folder is not None:   # written only when its text changes, so a chmod or chgrp is the only change
            acl = f"acl: [{', '.join(own)}]\n" if own else ""
            text = f"---\nid: {doc_id}\n{acl}---\nThe gateway quarterly report marker-{doc_id} lists revenue.\n"
            path = src / folder / f"{doc_id}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != text:
                path.write_text(text)


def check(ws: Path, embedder, published: dict, groups=GROUPS) -> None:
    """Every method at two budgets, the way the evaluation asks (`rag retrieve` and `rag serve` ask one budget of
    the same call): no item, and no marker inside an item's text, of a document the caller may not read."""
    reader = Workspace(ws, embedder=embedder)
    try:
        for caller in [{g} for g in groups] + [set(groups)]:
            for name in METHODS:
                for result, _ in reader.retrieve_at_budgets(name, Caller(frozenset(caller)),
                                                            "gateway quarterly report revenue", (1000, 4000)):
                    for item in result.items:
                        assert set(published.get(item.doc_id, ())) & caller, (name, item.doc_id, caller, published)
                        for leaked in MARKER.findall(item.text):
                            assert set(published.get(leaked, ())) & caller, (name, leaked, caller, published)
            result = reader.retrieve("longrag", Caller(frozenset(caller)), "gateway quarterly report revenue", 4000)
            if caller == set(groups):
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


# Two groups the system knows (files can be given them), "everyone" for world-readable files, and a group no file has.
G1, G2 = (g.gr_name for g in sorted(grp.getgrall(), key=lambda g: g.gr_gid)[1:3])
POSIX_GROUPS = (G1, G2, "everyone", "audit")
MODES = (0o640, 0o600, 0o644, 0o604)
p_groups = st.lists(st.sampled_from(POSIX_GROUPS), min_size=1, max_size=3, unique=True).map(lambda g: tuple(sorted(g)))
p_folder_file = st.one_of(st.none(), st.just(INVALID), st.tuples(p_groups, st.booleans()))
p_operation = st.one_of(st.tuples(st.just("folder"), st.sampled_from(FOLDERS), p_folder_file),
                        st.tuples(st.just("acl"), st.sampled_from(DOCS), st.one_of(st.none(), p_groups)),
                        st.tuples(st.just("chmod"), st.sampled_from(DOCS), st.sampled_from(MODES)),
                        st.tuples(st.just("chgrp"), st.sampled_from(DOCS), st.sampled_from((G1, G2))),
                        st.tuples(st.just("delete"), st.sampled_from(DOCS), st.none()))


def file_system_groups(mode: int, group: str) -> tuple:
    return tuple(sorted(({group} if mode & 0o040 else set()) | ({"everyone"} if mode & 0o004 else set())))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another group needs root")
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(placement=st.fixed_dictionaries({d: st.tuples(st.sampled_from(FOLDERS), st.one_of(st.none(), p_groups),
                                                     st.sampled_from(MODES), st.sampled_from((G1, G2)))
                                        for d in DOCS}),
       folder_files=st.fixed_dictionaries({f: p_folder_file for f in FOLDERS}),
       operations=st.lists(p_operation, min_size=1, max_size=3))
def test_with_file_system_groups_no_chmod_or_chgrp_lets_a_caller_read_what_it_may_not(embedder, placement,
                                                                                      folder_files, operations):
    with tempfile.TemporaryDirectory() as tmp:
        src, ws = Path(tmp) / "src", Path(tmp) / "ws"
        docs, folders, published = dict(placement), dict(folder_files), {}
        for step in [None, *operations]:
            if step is not None:
                kind, target, value = step
                if kind == "folder":
                    folders[target] = value
                elif kind == "delete":
                    docs.pop(target, None)
                elif target in docs:
                    folder, own, mode, group = docs[target]
                    docs[target] = (folder, value if kind == "acl" else own, value if kind == "chmod" else mode,
                                    value if kind == "chgrp" else group)
            write_tree(src, {d: (f, own) for d, (f, own, _, _) in docs.items()}, folders)
            for d, (f, _, mode, group) in docs.items():
                os.chown(src / f / f"{d}.md", -1, grp.getgrnam(group).gr_gid)
                (src / f / f"{d}.md").chmod(mode)
            outcome = {d: effective(f, own, folders, file_system_groups(mode, group))
                       for d, (f, own, mode, group) in docs.items()}
            try:
                publish(ws, src, embedder, acl_from="posix,everyone")[0].close()
            except NothingToPublish:
                assert not docs
                continue
            published = {d: acl for d, acl in outcome.items() if acl != WITHHELD}
            check(ws, embedder, published, POSIX_GROUPS)
