"""The sub-chunk indexes of a partitioned workspace searched as one: each partition's table at its pinned version."""
from __future__ import annotations

import pyarrow as pa

from rag.models.embedders import DEFAULT_EMBEDDER, DIMENSION
from rag.store.index import SubchunkIndex


class IndexUnion:
    """Read-only: each partition's table at its version, read as one."""

    def __init__(self, parts: dict[str, SubchunkIndex]):
        self.parts = parts
        spaces = ({(p.embedder, p.dimension) for p in parts.values() if p.count()}
                  or {(p.embedder, p.dimension) for p in parts.values()} or {(DEFAULT_EMBEDDER, DIMENSION)})
        if len(spaces) > 1:
            raise LookupError("the partitions' indexes hold different embedders' vectors ("
                              + ", ".join(sorted(e for e, _ in spaces)) + "); re-index them with one embedder")
        self._space = spaces.pop()

    @classmethod
    def readers(cls, uris: dict[str, str], versions: dict[str, int | None]) -> "IndexUnion":
        """Each partition's table at its pinned version; one that never indexed yet adds no rows."""
        parts = {}
        for key, version in versions.items():
            try:
                parts[key] = SubchunkIndex.reader(uris[key], version)
            except LookupError:
                if version is not None:
                    raise
        return cls(parts)

    @property
    def embedder(self) -> str:
        return self._space[0]

    @property
    def dimension(self) -> int:
        return self._space[1]

    def at(self, versions: dict[str, int | None]) -> "IndexUnion":
        """The partitions as these versions left them (an as-of read); partitions absent did not exist yet."""
        return IndexUnion({k: self.parts[k].as_of(v) if v is not None else self.parts[k]
                           for k, v in versions.items() if k in self.parts})

    def count(self) -> int:
        return sum(p.count() for p in self.parts.values())

    def member_keys(self) -> set:
        return set().union(*(p.member_keys() for p in self.parts.values()))

    def row_facts(self) -> pa.Table:
        return pa.concat_tables([p.row_facts() for p in self.parts.values()])

