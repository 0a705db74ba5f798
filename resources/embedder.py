from __future__ import annotations

from functools import lru_cache

from dagster import ConfigurableResource

from rag.models.embedders import DEFAULT_EMBEDDER, load_embedder
from rag.models.tokens import TokenCounter, default_counter


@lru_cache(maxsize=4)
def _embedder(name: str, batch_size: int, threads: int):
    return load_embedder(name, batch_size=batch_size, threads=threads or None)


class EmbedderResource(ConfigurableResource):
    """The embedders of rag.models.embedders (MiniLM by default, USE multilingual on request), loaded once per process
    and sha256-checked; the token counter is MiniLM's WordPiece whatever the embedder."""

    batch_size: int = 64
    threads: int = 0  # 0 lets torch (or numpy) decide

    def embedder(self, name: str = DEFAULT_EMBEDDER):
        return _embedder(name, self.batch_size, self.threads)

    def counter(self) -> TokenCounter:
        return default_counter()
