"""A snapshot's read state as files on the host: each part's arrays written once, then mapped by every worker.

A part (rag.retrieval.read_state.WARM_PARTS) is a folder of numpy `.npy` files and a `meta.json` of its small
values, under `<workspace>/read_state/<snapshot key>/<part>/`. The first reader of a snapshot builds a part and writes
it into a temporary folder renamed into place, holding a lock file meanwhile: a worker that arrives during the build
waits for it and maps the result, and no reader ever sees half a part. Every later worker maps the files read-only
(`np.load(mmap_mode="r")`), so the workers of a host share one copy in the page cache and a new worker answers
after mapping, not after rebuilding. A snapshot's files never change; the folders of all but the newest
`KEPT_STATES` snapshots are removed when a new one is written (a worker still mapping one keeps its pages until it
lets go). An array the new snapshot keeps whole from a mapped one (a vector segment, an unchanged partition's
postings) is not written again: its file is hard-linked into the new folder, so a publish writes what changed and
the page cache holds one copy; arrays held as segments (rag.retrieval.segments) are one file per segment.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.retrieval.segments import Segments

FORMAT = 6          # bumped when a part's arrays change meaning: older folders are then rebuilt, never misread
STATE_DIR = "read_state"
KEPT_STATES = 3     # snapshots whose files stay: the one served, the one being swapped in, one more for a slow worker


@dataclass(frozen=True)
class Arrays:
    """One part's arrays (mapped when read from files) and its small values."""

    arrays: dict[str, np.ndarray]
    meta: dict

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


def snapshot_key(*identity) -> str:
    """A folder name for what identifies a snapshot's read state (its catalog snapshots, index versions and the
    settings that change what its parts hold)."""
    return hashlib.sha256(repr((FORMAT, *identity)).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class StateFiles:
    """The read-state folders of one workspace, and the key of the snapshot read."""

    root: Path
    key: str

    def part(self, name: str, build: Callable[[], Arrays]) -> Arrays:
        """The part's arrays from its files; built (by this worker or the one holding the lock), written and mapped
        when there are none. Without a writable folder the built arrays are returned as they are."""
        found = self._load(name)
        if found is not None:
            return found
        folder = self.root / self.key
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return build()
        with _locked(folder / f"{name}.lock"):
            found = self._load(name)  # another worker wrote it while this one waited
            if found is not None:
                return found
            built = build()
            try:
                self._write(name, built)
            except OSError:  # a full disk or a read-only folder: serve from memory
                return built
        self._prune()
        return self._load(name) or built

    def has(self, name: str) -> bool:
        """Whether the part's files are written."""
        return (self.root / self.key / name / "meta.json").exists()

    def _load(self, name: str) -> Arrays | None:
        folder = self.root / self.key / name
        try:
            meta = json.loads((folder / "meta.json").read_text())
            shared = {a: Segments([_mapped(folder / f"{a}.{k}.npy") for k in range(count)])
                      for a, count in meta["segments"].items()}
            return Arrays({a: _mapped(folder / f"{a}.npy") for a in meta["arrays"]} | shared, meta["meta"])
        except (OSError, ValueError, KeyError):  # absent, or pruned while this worker opened it: built again
            return None

    def _write(self, name: str, built: Arrays) -> None:
        final = self.root / self.key / name
        tmp = final.with_name(f".{name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            own = {a: v for a, v in built.arrays.items() if not isinstance(v, Segments)}
            shared = {a: v for a, v in built.arrays.items() if isinstance(v, Segments)}
            for a, values in own.items():
                _save(tmp / f"{a}.npy", values)
            for a, values in shared.items():
                for k, segment in enumerate(values.arrays):
                    _save(tmp / f"{a}.{k}.npy", segment)
            (tmp / "meta.json").write_text(json.dumps({"arrays": list(own), "meta": built.meta,
                                                       "segments": {a: len(v.arrays) for a, v in shared.items()}}))
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _prune(self) -> None:
        """Remove the folders of all but the newest KEPT_STATES snapshots (by when they were last written)."""
        try:
            folders = sorted((p for p in self.root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)
        except OSError:
            return
        for old in folders[:-KEPT_STATES]:
            if old.name != self.key:
                shutil.rmtree(old, ignore_errors=True)


def _save(path: Path, values: np.ndarray) -> None:
    """The array as a .npy file: a link to the file it is mapped from when it is that file's whole array."""
    source = _file_of(values)
    if source is not None:
        try:
            os.link(source, path)
            return
        except OSError:  # another file system, or one without hard links: written again
            pass
    np.save(path, np.ascontiguousarray(values), allow_pickle=False)


def _file_of(values: np.ndarray) -> str | None:
    """The .npy file whose whole array `values` is, mapped read-only by _mapped; None for any other array."""
    mapped = values
    while isinstance(mapped, np.ndarray) and not isinstance(mapped, np.memmap):
        mapped = mapped.base
    if (isinstance(mapped, np.memmap) and mapped.filename and values.shape == mapped.shape
            and values.dtype == mapped.dtype
            and values.__array_interface__["data"][0] == mapped.__array_interface__["data"][0]):
        return mapped.filename
    return None


def _mapped(path: Path) -> np.ndarray:
    """The array in the file, mapped read-only, as a plain ndarray (what np.memmap's slices would be)."""
    return np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)


@contextmanager
def _locked(path: Path):
    """An exclusive lock on the file for the block; the system releases it if the holder dies."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
