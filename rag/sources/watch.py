"""Cheap change detection for a source: a fingerprint of file names, sizes and modification times."""
from __future__ import annotations

import hashlib
from pathlib import Path

from rag.sources.loaders import TEXT_SUFFIXES
from rag.sources.partitions import Selection


def snapshot(source: str | Path, select: Selection | None = None) -> dict[str, tuple[int, int]]:
    """relative path → (mtime_ns, size) of every file a load of this source (or of one partition) would read."""
    root = Path(source)
    if root.is_file():
        st = root.stat()
        return {root.name: (st.st_mtime_ns, st.st_size)}
    if not root.is_dir():
        return {}
    out = {}
    for p in sorted(root.iterdir() if select and select.top_level_only else root.rglob("*")):
        rel = p.relative_to(root)
        if select and not select.admits(rel.as_posix()):
            continue
        if p.is_file() and not any(part.startswith(".") for part in rel.parts) and \
                (p.suffix.lower() in TEXT_SUFFIXES or p.suffix == ".jsonl"):
            st = p.stat()
            out[rel.as_posix()] = (st.st_mtime_ns, st.st_size)
    return out


def fingerprint(snap: dict[str, tuple[int, int]]) -> str:
    h = hashlib.sha256()
    for name, (mtime, size) in sorted(snap.items()):
        h.update(f"{name}\0{mtime}\0{size}\n".encode())
    return h.hexdigest()[:24]
