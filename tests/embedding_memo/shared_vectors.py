"""MiniLM document vectors shared by every process of one test run through files, so that a text is embedded once
per run, not once per xdist worker and once more in each `rag ingest`, run worker or bench process a test starts.

The folder is named by the sha256 recorded for the ONNX graph that every process's MiniLM is made from (rag.models.
onnx_export), so vectors of other weights are never read; a vector is the real model's output for that exact text.
"""
import hashlib
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag.models.embedders import DIMENSION, Embedder
from rag.models.files import model_dir
from rag.models.onnx_export import onnx_path

FOLDER_ENV = "RAG_TEST_EMBEDDINGS"   # set by tests/conftest.py for the whole run; unset: nothing is shared


class SharedVectors:
    """One file per text (its sha256), written to a temporary name and renamed: a reader never sees half a vector,
    and two processes that embed the same text at once both write the same bytes."""

    def __init__(self, root: Path):
        graph = onnx_path(model_dir())
        weights = graph.with_name(graph.name + ".sha256").read_text().strip()
        self.folder = root / f"minilm-{weights[:16]}"
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, text: str) -> Path:
        return self.folder / hashlib.sha256(text.encode()).hexdigest()

    def get(self, texts: list[str]) -> dict[str, np.ndarray]:
        found = {}
        for text in texts:
            try:
                data = self._path(text).read_bytes()
            except FileNotFoundError:
                continue
            if len(data) == 4 * DIMENSION:
                found[text] = np.frombuffer(data, dtype=np.float32)
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        for text, vector in vectors.items():
            path = self._path(text)
            temporary = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
            temporary.write_bytes(np.asarray(vector, dtype=np.float32).tobytes())
            os.replace(temporary, path)


def shared_vectors() -> SharedVectors | None:
    folder = os.environ.get(FOLDER_ENV)
    return _shared(folder) if folder else None


@lru_cache(maxsize=4)
def _shared(folder: str) -> SharedVectors:
    return SharedVectors(Path(folder))


class SharedVectorsEmbedder(Embedder):
    """The real ONNX MiniLM in a process a test started: documents' vectors come from the run's files where another
    process has embedded the text already, and are computed (then shared) otherwise. Nothing is kept in memory, so
    a process's RSS is what it would be without it; queries are always computed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shared = shared_vectors()

    def encode(self, texts, progress=None):
        known = self.shared.get(list(dict.fromkeys(texts))) if self.shared else {}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            computed = dict(zip(missing, super().encode(missing)))
            if self.shared:
                self.shared.put(computed)
            known |= computed
        for start in range(0, len(texts), self.batch_size):
            if progress:
                progress(min(self.batch_size, len(texts) - start))
        return np.array([known[t] for t in texts], dtype=np.float32).reshape(len(texts), DIMENSION)
