"""A published table version read with Lance alone, so a query on the current snapshot never imports LanceDB.

`import lancedb` costs seconds of a cold `rag retrieve` (mostly its generated REST client), while reading the
current snapshot needs only the pinned version's rows and schema, which Lance (the format LanceDB stores) reads
directly. Anything else (a vector search at a past version, an index listing) opens LanceDB's table at the same
version on first use.
"""
from __future__ import annotations


class PinnedTable:
    """One table at one version of a LanceDB database folder: Lance's dataset, with LanceDB's Table API behind it."""

    def __init__(self, uri: str, name: str, version: int | None):
        import lance

        self._uri, self._name = uri, name
        self._dataset = lance.dataset(f"{uri.rstrip('/')}/{name}.lance", version=version)
        self._table = None

    @property
    def version(self) -> int:
        return self._dataset.version

    @property
    def schema(self):
        return self._dataset.schema

    def to_lance(self):
        return self._dataset

    def count_rows(self, filter: str | None = None) -> int:
        return self._dataset.count_rows(filter)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._table is None:
            import lancedb

            self._table = lancedb.connect(self._uri).open_table(self._name)
            self._table.checkout(self._dataset.version)
        return getattr(self._table, name)
