"""PDF, Office, HTML and e-mail files as documents: read once, whole, refused if they change while read."""
from __future__ import annotations

import os
import stat
import time
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

from rag.sources.access import AccessOptions, ceiling_of
from rag.sources.documents import FormatReading, InputError, LoadResult, Rejected, Withheld
from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.registry import MAX_BYTES, read, reason
from rag.sources.records import Origin, default_id, document


def load_formatted(path: Path, root: Path, default_acl: tuple[str, ...], collection: str | None,
                   options: ExtractOptions, access: AccessOptions = AccessOptions()) -> LoadResult:
    """One PDF, Office, HTML or e-mail file as a document; a refusal keeps the id, so its last good version stays."""
    doc_id = default_id(path, root)
    reading = FormatReading(files=1)
    started = time.perf_counter()
    try:
        data, modified_ns = read_bytes(path)
        found = read(path.suffix, data, options)
        reading.pages = found.pages
        title = "".join(ch for ch in (found.title or "") if unicodedata.category(ch)[0] not in "CZ" or ch == " ")
        fields = {"title": " ".join(title.split())[:1000]} if title.strip() else {}
        fields["version"] = modified_version(modified_ns)
        doc = document(fields, found.text, Origin(str(path), "id", doc_id, True, default_acl, collection,
                                                  **ceiling_of(path, root, access)))
    except ExtractError as err:
        return _read_as(path, reading, started, rejected=[Rejected(str(path), reason(err), doc_id,
                                                                    empty=err.kind == "empty")])
    except Exception as err:  # noqa: BLE001 - a per-file failure is contained and named
        return _read_as(path, reading, started, rejected=[Rejected(str(path), unexpected_reason(err), doc_id,
                                                                    withheld=isinstance(err, Withheld))])
    notes = [Rejected(str(path), note, doc_id) for note in found.dropped]
    return _read_as(path, reading, started, documents=[doc], warnings=notes)


def _read_as(path: Path, reading: FormatReading, started: float, **outcome) -> LoadResult:
    reading.seconds = time.perf_counter() - started
    return LoadResult(**outcome, formats={path.suffix.lower(): reading})


def modified_version(mtime_ns: int) -> str:
    """A file without front matter is versioned by when it was last modified (UTC), e.g. 2026.12.06.145903."""
    return datetime.fromtimestamp(mtime_ns / 1e9, timezone.utc).strftime("%Y.%m.%d.%H%M%S")


def read_bytes(path: Path) -> tuple[bytes, int]:
    """A file's bytes and modification time, refused if it is not a regular file, is too large, or changes while
    it is read."""
    try:
        with open_no_follow(path) as handle:
            before = os.fstat(handle.fileno())
            if not stat.S_ISREG(before.st_mode):
                raise InputError("not a regular file")
            if before.st_size > MAX_BYTES:
                raise ExtractError("too large", f"too large: {before.st_size / 2**20:.0f} MB (limit "
                                                f"{MAX_BYTES // 2**20} MB)")
            data = handle.read(MAX_BYTES + 1)
            after = os.fstat(handle.fileno())
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise ExtractError("changed while read", "changed while read: the file disappeared") from None
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror}") from None
    if len(data) != after.st_size or _stamp(before) != _stamp(after) or (now.st_ino, now.st_dev) != (
            after.st_ino, after.st_dev) or _stamp(now) != _stamp(after):
        raise ExtractError("changed while read", "changed while read: the file was written or replaced during the "
                                                 "reading (read again at the next run)")
    return data, after.st_mtime_ns


def _stamp(st: os.stat_result) -> tuple[int, int]:
    return st.st_size, st.st_mtime_ns


def open_no_follow(path: Path):
    """Never follow a link swapped in after the listing, never block on a pipe."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")


def unexpected_reason(err: Exception) -> str:
    if isinstance(err, InputError):
        return str(err)
    if isinstance(err, RecursionError):
        return "nested too deeply to read"
    return f"unexpected {type(err).__name__}: {one_line(err)}"


def one_line(err: Exception) -> str:
    return " ".join(str(err).split())[:200] or type(err).__name__
