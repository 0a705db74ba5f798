"""Resolve resource settings from the environment, so `dagster dev`, the CLI and tests share one layout."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import dagster as dg

from rag.sources.bucket import check_bucket_sources
from rag.store.settings import IngestSettings
from resources import CatalogResource, EmbedderResource, ReadSideResource, SourceSettings, VectorStoreResource
from resources.llm import LLMResource

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO / "samples" / "corpus"
SAMPLE_CORPUS_ZH = REPO / "samples" / "corpus-zh"


def workspace_resources(settings: IngestSettings) -> dict:
    """Resources for one workspace folder: `catalog.duckdb` and `lancedb/` inside it unless told otherwise."""
    check_bucket_sources(settings.sources, settings.partitioned)
    ws = Path(settings.workspace).resolve()
    ws.mkdir(parents=True, exist_ok=True)
    settings = replace(settings, workspace=str(ws))
    return {
        "catalog": CatalogResource(path=str(ws / "catalog.duckdb"), wait_s=settings.wait_s,
                                   lance_uri=settings.lance_uri),
        "vector_store": VectorStoreResource(uri=settings.index_uri, workspace=str(ws)),
        "read_side": ReadSideResource(workspace=str(ws), lance_uri=settings.index_uri),
        "embedder": EmbedderResource(),
        "source_settings": SourceSettings.of(settings),
        "llm": LLMResource(reader=_env("RAG_READER") or "extractive", base_url=_env("OPENAI_BASE_URL"),
                           api_key=_env("OPENAI_API_KEY"), model=_env("RAG_LLM_MODEL")),
    }


def _env(name: str) -> dg.EnvVar | None:
    """A setting the run resolves from its own environment: the UI shows the variable's name, never a key."""
    return dg.EnvVar(name) if os.environ.get(name) else None


def resources_from_env() -> dict:
    """The workspace the RAG_* environment variables name (see IngestSettings.from_env); the sample corpus and
    `.rag/workspace` in this repository when they are unset."""
    return workspace_resources(IngestSettings.from_env(os.environ, str(REPO / ".rag" / "workspace"),
                                                       [str(SAMPLE_CORPUS)]))
