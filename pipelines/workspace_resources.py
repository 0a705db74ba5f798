"""Resolve resource settings from the environment, so `dagster dev`, the CLI and tests share one layout."""
from __future__ import annotations

import os
from pathlib import Path

from resources import CatalogResource, EmbedderResource, ReadSideResource, SourceSettings, VectorStoreResource
from resources.llm import LLMResource

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO / "samples" / "corpus"
SAMPLE_CORPUS_ZH = REPO / "samples" / "corpus-zh"


def workspace_resources(workspace: str | Path, sources: list[str], default_acl: list[str] | None = None,
                        collection: str | None = None, derive_links: bool = False,
                        lance_uri: str | None = None, wait_s: float | None = None,
                        embedder: str | None = None, allow_empty: bool = False, partitioned: bool = False) -> dict:
    """Resources for one workspace folder: `catalog.duckdb` and `lancedb/` inside it unless told otherwise."""
    ws = Path(workspace).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    return {
        "catalog": CatalogResource(path=str(ws / "catalog.duckdb"), wait_s=wait_s, lance_uri=lance_uri),
        "vector_store": VectorStoreResource(uri=lance_uri or str(ws / "lancedb"), workspace=str(ws)),
        "read_side": ReadSideResource(workspace=str(ws), lance_uri=lance_uri or str(ws / "lancedb")),
        "embedder": EmbedderResource(),
        "source_settings": SourceSettings(sources=sources, default_acl=default_acl or [], collection=collection,
                                          derive_links=derive_links, embedder=embedder, allow_empty=allow_empty,
                                          partitioned=partitioned, workspace=str(ws) if partitioned else None),
        "llm": LLMResource(reader=os.environ.get("RAG_READER", "extractive")),
    }


def resources_from_env() -> dict:
    """RAG_WORKSPACE, RAG_SOURCES (os.pathsep-separated), RAG_DEFAULT_ACL (comma-separated), RAG_LANCE_URI,
    RAG_EMBEDDER, RAG_ALLOW_EMPTY=1 (a source emptied of documents deletes what it published),
    RAG_PARTITIONS=collections (each collection is a Dagster partition with a store of its own)."""
    sources = [s for s in os.environ.get("RAG_SOURCES", str(SAMPLE_CORPUS)).split(os.pathsep) if s]
    acl = [g for g in os.environ.get("RAG_DEFAULT_ACL", "").split(",") if g]
    return workspace_resources(os.environ.get("RAG_WORKSPACE", str(REPO / ".rag" / "workspace")), sources, acl,
                               os.environ.get("RAG_COLLECTION") or None,
                               os.environ.get("RAG_DERIVE_LINKS", "") == "titles", os.environ.get("RAG_LANCE_URI"),
                               embedder=os.environ.get("RAG_EMBEDDER") or None,
                               allow_empty=os.environ.get("RAG_ALLOW_EMPTY", "") in ("1", "true", "yes"),
                               partitioned=os.environ.get("RAG_PARTITIONS", "") == "collections")
