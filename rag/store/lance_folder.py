"""The LanceDB calls a writer makes, done by Lance (the format LanceDB stores) directly.

`import lancedb` costs a writer process ~2.5 CPU-s (mostly its REST namespace client building pydantic validators),
`import lance` ~0.2 s. A writer only creates, appends to, deletes from, indexes and compacts tables of one folder,
which Lance does alone with the same files and versions: LanceDB's table `name` is the Lance dataset
`<uri>/<name>.lance`, and each call below commits one version as LanceDB's does.
"""
from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import lance
import pyarrow as pa

from rag.store.object_store import is_object_uri

# Lance copies a delete's predicate into the new version's manifest and its transaction file, both kept with the
# version: a publish's delete of ~700 documents' rows by an IN list left ~30 KB a version (bench/storage.py).
RECORDED_PREDICATE = 256
# Lance leaves the string columns of a short fragment (a publish's ~1,000 rows) uncompressed: 2Wiki's sub-chunk
# rows took ~80 B there against ~44 in the first fragment. With zstd, its five re-publishes leave 0.61 MB of
# sub-chunk data instead of 0.83 (bench/storage.py). A table's schema carries it: Lance encodes an append
# and a compaction by the table's field metadata, so a table made before keeps its encoding.
ZSTD = {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "9"}


def zstd_field(name: str, type_: pa.DataType) -> pa.Field:
    """A column Lance stores zstd-compressed in every fragment of a table created with it."""
    return pa.field(name, type_, metadata=ZSTD)


class LanceTable:
    """One table, at its newest version unless checked out at another."""

    def __init__(self, dataset: lance.LanceDataset):
        self._dataset = dataset

    @property
    def version(self) -> int:
        return self._dataset.version

    @property
    def schema(self) -> pa.Schema:
        return self._dataset.schema

    def to_lance(self) -> lance.LanceDataset:
        return self._dataset

    def to_arrow(self) -> pa.Table:
        return self._dataset.to_table()

    def count_rows(self, filter: str | None = None) -> int:
        return self._dataset.count_rows(filter)

    def add(self, data: pa.Table, mode: str = "append") -> None:
        self._dataset = lance.write_dataset(data, self._dataset, mode=mode)

    def delete(self, where: str) -> None:
        """Delete the rows `where` selects; a long predicate is not recorded (see `delete_unrecorded`)."""
        if len(where) <= RECORDED_PREDICATE:
            self._dataset.delete(where)
        else:
            self._dataset = delete_unrecorded(self._dataset, where)

    def drop_columns(self, columns: list[str]) -> None:
        self._dataset.drop_columns(columns)

    def list_indices(self) -> list:
        return self._dataset.describe_indices()   # each with the `name` LanceDB's list gives

    def drop_index(self, name: str) -> None:
        self._dataset.drop_index(name)

    def create_btree(self, column: str, name: str) -> None:
        self._dataset.create_scalar_index(column, "BTREE", name=name, replace=True)

    def optimize(self, cleanup_older_than: timedelta) -> None:
        """LanceDB's `optimize`: compact the files, drop versions past the retention, bring indexes up to date."""
        self._dataset.optimize.compact_files()
        self.checkout_latest()
        self._dataset.cleanup_old_versions(older_than=cleanup_older_than)
        self._dataset.optimize.optimize_indices()
        self.checkout_latest()

    def checkout_latest(self) -> None:
        self._dataset = self._dataset.checkout_version(self._dataset.latest_version)


class LanceFolder:
    """A LanceDB database: a local folder or an object-storage URI holding one Lance dataset per table."""

    def __init__(self, uri: str):
        self.uri = str(uri).rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.uri}/{name}.lance"

    def exists(self, name: str) -> bool:
        if not is_object_uri(self.uri):
            return (Path(self._path(name)) / "_versions").is_dir()
        try:
            lance.dataset(self._path(name))
        except ValueError:   # what Lance raises for a dataset that is not there
            return False
        return True

    def open_table(self, name: str) -> LanceTable:
        try:
            return LanceTable(lance.dataset(self._path(name)))
        except (OSError, ValueError) as err:
            raise unreadable(self.uri, err) from None

    def create_table(self, name: str, data: pa.Table | None = None, *, schema: pa.Schema | None = None,
                     mode: str = "create") -> LanceTable:
        data = data if data is not None else schema.empty_table()
        return LanceTable(lance.write_dataset(data, self._path(name), schema=data.schema, mode=mode))

    def drop_table(self, name: str) -> None:
        if is_object_uri(self.uri):
            import lancedb  # Lance has no call that deletes a dataset; only a table from before vectors stood apart

            lancedb.connect(self.uri).drop_table(name)
        else:
            shutil.rmtree(self._path(name))


def delete_unrecorded(dataset: lance.LanceDataset, where: str) -> lance.LanceDataset:
    """Delete the rows `where` selects, fragment by fragment, and commit one version that records a short note
    instead of the predicate (only one writer commits, so nothing re-evaluates it); the newest version after."""
    updated, emptied = [], []
    for fragment in dataset.get_fragments():
        after = fragment.delete(where)
        if after is None:   # every row deleted
            emptied.append(fragment.fragment_id)
        elif after.deletion_file != fragment.metadata.deletion_file:
            updated.append(after)
    if not updated and not emptied:
        return dataset
    note = f"{len(where)}-character predicate, not recorded"
    return lance.LanceDataset.commit(dataset, lance.LanceOperation.Delete(updated, emptied, note),
                                     read_version=dataset.version)


class IndexUnreadable(RuntimeError):
    """Lance cannot read the index's files: one line saying how to rebuild it."""


def unreadable(uri: str, err: Exception) -> Exception:
    """`err` as IndexUnreadable when it is Lance's own error about the files (nothing is guessed about an index that
    cannot be read: moved away, it is rebuilt from the catalog), else as it is."""
    if "LanceError" not in str(err):
        return err
    return IndexUnreadable(f"{uri}: the index cannot be read ({str(err).splitlines()[0][:200]}); move that folder "
                           "away and run the ingest again to rebuild it from the catalog")
