"""The storage figure every report states: bytes on disk of a workspace's parts ÷ the raw text they serve."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag.store.object_store import ObjectStore, is_object_uri
from rag.store.snapshot_files import SNAPSHOT_DIR
from rag.text.tables import bytes_on_disk


@dataclass(frozen=True)
class Storage:
    raw_text_bytes: int    # UTF-8 bytes of the current documents' titles and texts
    catalog_bytes: int     # the writer's DuckDB catalog (and its write-ahead log)
    read_state_bytes: int  # the published read state readers open (segments and manifests)
    index_bytes: int       # the LanceDB database (sub-chunk rows, vectors, kept versions), local or in a bucket

    def total(self, with_index: bool = True) -> int:
        """Everything a method needs on disk; ELITE (no index) needs the catalog and its read state only."""
        return self.catalog_bytes + self.read_state_bytes + (self.index_bytes if with_index else 0)

    def ratio(self, with_index: bool = True) -> float:
        return round(self.total(with_index) / max(self.raw_text_bytes, 1), 2)

    def shares(self) -> dict[str, float]:
        """Each part's bytes ÷ the raw text."""
        raw = max(self.raw_text_bytes, 1)
        return {"catalog": round(self.catalog_bytes / raw, 2), "read_state": round(self.read_state_bytes / raw, 2),
                "index": round(self.index_bytes / raw, 2)}


def measure(catalog_path: str | Path, lance_uri: str | Path, raw_text_bytes: int) -> Storage:
    """The parts of the store whose catalog is `catalog_path` (a workspace's, or one partition's)."""
    catalog = Path(catalog_path)
    return Storage(raw_text_bytes, bytes_on_disk(*catalog.parent.glob(catalog.name + "*")),
                   bytes_on_disk(catalog.parent / SNAPSHOT_DIR),
                   ObjectStore(str(lance_uri)).size() if is_object_uri(str(lance_uri)) else bytes_on_disk(lance_uri))
