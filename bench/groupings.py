"""Benchmark workspaces whose units come from one of three groupings, for the grouping comparison.

- `title-links`: the product today (`derive_links=True`): a document is linked to the documents whose exact
  title its text mentions, and to the documents sharing its title.
- `shared-titles`: only documents sharing a title are linked (one article's paragraphs become one unit).
- `none`: no derived links (`derive_links=False`): every document is a unit of its own.

Each variant is a copy of the product's workspace re-planned with its own links; the ACL partitions and the
oversize split stay the product's (rag.units.long_units.plan_units), and no vector is re-embedded (the index's cache
is keyed by the sub-chunk text, which does not depend on the unit). The unit cap is the product's unless `cap`
names another (smaller units where title links chain many paragraphs).
"""
from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from unittest import mock

from rag.evaluation.prepared import BENCH_ACL, Prepared, open_prepared, prepare_workspace
from rag.models.tokens import default_counter
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings
from rag.units.linking import LinkGraph, build_links
from rag.units.long_units import DEFAULT_CAP

GROUPINGS = ("title-links", "shared-titles", "none")


def shared_title_links(docs, derive_from_titles: bool = False) -> LinkGraph:
    """Explicit links plus one link between documents that share a title; no title mentions."""
    graph = build_links(docs, derive_from_titles=False)
    by_title: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        by_title[d.title].append(d.doc_id)
    for ids in by_title.values():
        for other in ids[1:]:
            graph.add(ids[0], other)
    return graph


def workspace_name(folder: Path, grouping: str, cap: int = DEFAULT_CAP) -> str:
    """The folder's workspace for a grouping and cap; the product's own (title links, default cap) is the plain name."""
    suffix = ("" if grouping == "title-links" else f"@{grouping}") + ("" if cap == DEFAULT_CAP else f"@cap{cap}")
    return folder.name + suffix


def prepare(folder: Path, root: Path, grouping: str, embedder, cap: int = DEFAULT_CAP) -> Prepared:
    """The benchmark's workspace with `grouping`'s units under `cap`, brought up to date and open for queries."""
    counter = default_counter()
    base = root / folder.name
    prepared = prepare_workspace(folder, base, embedder, counter)
    if grouping == "title-links" and cap == DEFAULT_CAP:
        return prepared
    prepared.close()
    workspace = root / workspace_name(folder, grouping, cap)
    if not workspace.exists():
        shutil.copytree(base, workspace, ignore=shutil.ignore_patterns("*.lock", "writer*"))
    settings = IngestSettings(sources=[str(folder / "docs.jsonl")], default_acl=(BENCH_ACL,),
                              derive_links=grouping != "none", unit_cap=cap)
    catalog = Catalog(workspace / "catalog.duckdb", entry="bench/groupings.py")
    try:
        with mock.patch("rag.units.long_units.build_links", shared_title_links if grouping == "shared-titles" else build_links):
            publish_documents(catalog, settings)
            publish_units(catalog, counter, settings)
            publish_index(catalog, SubchunkIndex(str(workspace / "lancedb")), embedder.encode, counter, settings,
                          embedder.name)
    finally:
        catalog.close()
    return open_prepared(folder.name, workspace, embedder, counter)
