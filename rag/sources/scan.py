"""Change detection over source files: stat first, hash a file only if its stat changed, parse only what changed.

A JSONL file whose content changed is read line by line and only the lines whose bytes are new are parsed;
the others keep the record they yielded before, at their new line number. What every file yielded is kept
as records (a document's fields without its text, or a rejection), so an unchanged file is never read.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from rag.sources.access import AccessOptions, fingerprint
from rag.sources.bucket import Naming, naming
from rag.sources.documents import Document, FormatReading, LoadResult, Rejected, add_readings, content_hash
from rag.sources.formats import ExtractOptions
from rag.sources.formatted import open_no_follow
from rag.sources.loaders import (
    _load_files,
    empty_jsonl,
    jsonl_lines,
    jsonl_record,
    load_jsonl,
    load_sources,
    walk,
)
from rag.sources.partitions import Selection

# A file changed within this long after it was read may keep its size and timestamps (coarse clocks):
# it is hashed again on the next run whatever its stat says.
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class FileState:
    path: str
    source: str
    root: str           # the folder default ids are relative to
    size: int
    mtime_ns: int
    ctime_ns: int       # a chmod changes only this, and may make a file readable or unreadable
    ino: int
    content_hash: str
    settings: str       # the loader settings it was read with (default ACL, collection)
    checked_ns: int

    def same_stat(self, other: "FileState") -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino) == (
            other.size, other.mtime_ns, other.ctime_ns, other.ino) and self.same_reading(other) and not self.racy

    def same_reading(self, other: "FileState") -> bool:
        """Read through the same source with the same settings, so the same bytes yield the same records."""
        return (self.source, self.root, self.settings) == (other.source, other.root, other.settings)

    @property
    def racy(self) -> bool:
        return self.checked_ns - max(self.mtime_ns, self.ctime_ns) < RACY_NS


@dataclass(frozen=True)
class Record:
    """What one input (a file, or a line of a JSONL file) yielded: a document without its text, or a rejection."""

    file: str
    source: str
    position: int
    line_hash: str
    source_path: str
    doc_id: str | None
    version: str | None = None
    content_hash: str | None = None
    meta_hash: str | None = None
    acl: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    collection: str | None = None
    reason: str | None = None
    holds: str | None = None
    empty: bool = False
    withheld: bool = False   # hidden by its ACL sources: its source still holds it (rag.sources.access)

    @property
    def is_document(self) -> bool:
        return self.reason is None

    def rejected(self) -> Rejected:
        return Rejected(self.source_path, self.reason or "", self.doc_id, self.holds, self.empty, self.withheld)

    def at(self, position: int, source_path: str) -> "Record":
        return replace(self, position=position, source_path=source_path)


def record_of(outcome: Document | Rejected, state: FileState, position: int, line_hash: str) -> Record:
    if isinstance(outcome, Document):
        return Record(state.path, state.source, position, line_hash, outcome.source_path, outcome.doc_id,
                      outcome.version, outcome.content_hash, outcome.meta_hash, outcome.acl, outcome.links,
                      outcome.collection)
    return Record(state.path, state.source, position, line_hash, outcome.source_path, outcome.doc_id,
                  reason=outcome.reason, holds=outcome.holds, empty=outcome.empty, withheld=outcome.withheld)


@dataclass
class Scan:
    """What the sources hold now, as far as this run had to read them."""

    states: dict[str, FileState] = field(default_factory=dict)       # every file listed, as it is now
    changed: dict[str, list[Record]] = field(default_factory=dict)   # file → its records, for files read anew
    before: dict[str, list[Record]] = field(default_factory=dict)    # what those files yielded at the last run
    parsed: dict[tuple[str, int], Document] = field(default_factory=dict)  # (file, position) → parsed this run
    restated: list[str] = field(default_factory=list)   # files whose stat changed but not their content
    passed_over: LoadResult = field(default_factory=LoadResult)  # rejections and skips met while listing
    scanned: list[str] = field(default_factory=list)
    lines_parsed: int = 0
    warnings: list[Rejected] = field(default_factory=list)   # what the files read anew left out (scripts, images)
    formats: dict[str, FormatReading] = field(default_factory=dict)  # suffix → what its reader did
    names: dict[str, Naming] = field(default_factory=dict)   # a bucket's mirror → how its paths are shown


@dataclass(frozen=True)
class ReadAs:
    """How a run reads its files: the ACL and collection of inputs that name none, and whether OCR is on."""

    default_acl: tuple[str, ...] = ()
    collection: str | None = None
    options: ExtractOptions = ExtractOptions()


def scan_sources(sources: list[str], read_as: ReadAs, known: dict[str, FileState],
                 stored: Callable[[list[str]], dict[str, list[Record]]], rescan: bool = False,
                 select: Selection | None = None) -> Scan:
    """List every source, and read only the files whose stat (then content) differs from `known`.

    `stored(files)` gives the records those files yielded before; `rescan` reads every file anew. Turning OCR on
    or off is a change of settings: every file is read again with it.
    """
    scan = Scan()
    default_acl, collection, options = read_as.default_acl, read_as.collection, read_as.options
    if select is not None and select.vanished:   # every source the store read counts as read and found empty
        scan.scanned = sorted({st.source for st in known.values()} | {str(Path(s).resolve()) for s in sources})
        return scan
    settings = content_hash(",".join(default_acl), collection or "", *(("ocr",) if options.ocr else ()))
    todo: list[tuple[FileState, FileState | None]] = []
    access, folder_files = AccessOptions.of(select, options.acl_from), {}
    for source in sources:
        path = Path(source).resolve()
        if name := naming(path):   # a bucket's mirror: its paths are shown as s3:// keys
            scan.names[str(path)] = name
            scan.passed_over.rejected += name.refusals()
        for file, root, problem in _listing(path, scan, select):
            if problem:
                scan.passed_over.extend(_renamed(problem, name))
                continue
            now = _state(file, str(path), root, _with_folder_acl(settings, file, Path(root), folder_files, access))
            if now.path in scan.states:  # reached through two sources: read where first listed
                continue
            scan.states[now.path] = now
            old = None if rescan else known.get(now.path)
            if old is not None and old.same_stat(now):
                scan.states[now.path] = old
            else:
                todo.append((now, old))
    scan.before = stored([now.path for now, old in todo if old is not None])
    for now, old in todo:
        _read(now, old, scan.before.get(now.path, []), read_as, access, scan)
    return scan


def _listing(path: Path, scan: Scan, select: Selection | None = None):
    """(file, root, None) for each regular file of a source; (None, None, problems) for what is passed over."""
    if not path.exists() or (not path.is_dir() and not path.is_file()):
        yield None, None, load_sources([path])   # the loader's own one-line reasons
        return
    scan.scanned.append(str(path))
    if path.is_file():
        yield path, str(path.parent), None
        return
    for file, problem in walk(path, select):
        if problem is None:
            yield file, str(path), None
        else:
            skipped, reason = problem
            yield None, None, LoadResult(**{"skipped" if skipped else "rejected": [Rejected(str(file), reason)]})


def _state(file: Path, source: str, root: str, settings: str) -> FileState:
    try:
        st = os.stat(file, follow_symlinks=False)
        size, mtime, ctime, ino = st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino
    except OSError:
        size = mtime = ctime = ino = -1
    return FileState(str(file), source, root, size, mtime, ctime, ino, "", settings, time.time_ns())


def _with_folder_acl(settings: str, file: Path, root: Path, seen: dict[Path, str], access: AccessOptions) -> str:
    """A folder ACL file's edit (or a chmod, with `--acl-from posix`) changes the settings a file is read with, so
    it is read again."""
    folder = fingerprint(file, access.start(root), seen, access)
    return content_hash(settings, folder) if folder else settings


def _read(now: FileState, old: FileState | None, before: list[Record], how: ReadAs, access: AccessOptions,
          scan: Scan) -> None:
    """Hash the file; parse it (a JSONL file: its new lines) only if the hash differs from the last reading."""
    path, default_acl, collection = Path(now.path), how.default_acl, how.collection
    if path.suffix == ".jsonl":
        try:
            lines = list(jsonl_lines(path))
        except OSError:
            lines = None
        digest = _lines_hash(lines)
    else:
        lines, digest = None, _file_hash(path)
    state = replace(now, content_hash=digest)
    scan.states[now.path] = state
    if old is not None and digest and digest == old.content_hash and old.same_reading(now):
        scan.restated.append(now.path)
        return
    if lines is None:
        one = (load_jsonl(path, default_acl, collection, Path(now.root), access) if path.suffix == ".jsonl"
               else _load_files([path], Path(now.root), default_acl, collection, how.options, access))
        _keep(scan, state, 0, digest, (one.documents or one.rejected)[0])
        scan.warnings += _renamed(one, scan.names.get(now.source)).warnings
        add_readings(scan.formats, one.formats)
        return
    reuse = {r.line_hash: r for r in before} if old is not None and old.same_reading(now) else {}
    shown = scan.names.get(now.source, str)
    scan.changed[now.path] = []
    for lineno, line in lines:
        h = _line_hash(line)
        if h in reuse and line is not None:
            scan.changed[now.path].append(reuse[h].at(lineno, shown(f"{path}:{lineno}")))
        else:
            scan.lines_parsed += 1
            _keep(scan, state, lineno, h, jsonl_record(path, lineno, line, default_acl, collection, Path(now.root),
                                                       access))
    if not lines:
        _keep(scan, state, 0, digest, empty_jsonl(path))


def _keep(scan: Scan, state: FileState, position: int, line_hash: str, outcome: Document | Rejected) -> None:
    name = scan.names.get(state.source)
    if isinstance(outcome, Document):
        outcome = replace(outcome, source=state.source,
                          source_path=name(outcome.source_path) if name else outcome.source_path)
        scan.parsed[(state.path, position)] = outcome
    elif name:
        outcome = name.rejected(outcome)
    scan.changed.setdefault(state.path, []).append(record_of(outcome, state, position, line_hash))


def _renamed(result: LoadResult, name: Naming | None) -> LoadResult:
    """A bucket mirror's rejections, skips and warnings, shown by their s3:// keys."""
    if name is None:
        return result
    return replace(result, rejected=[name.rejected(r) for r in result.rejected],
                   skipped=[name.rejected(r) for r in result.skipped],
                   warnings=[name.rejected(r) for r in result.warnings])


def _file_hash(path: Path) -> str:
    """sha256 of the file's bytes; empty if it cannot be read (the parse then says why)."""
    h = hashlib.sha256()
    try:
        with open_no_follow(path) as handle:
            while chunk := handle.read(2**20):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()[:32]


def _line_hash(line: bytes | None) -> str:
    # 64 bits (a collision within one file's ~10^6 lines: ~3e-8): a stored record's widest column, kept per line of
    # every JSONL file. Hashes kept by an older catalog match none, so its files' lines are parsed once more.
    return hashlib.sha256(line).hexdigest()[:16] if line is not None else "over-long"


def _lines_hash(lines: list[tuple[int, bytes | None]] | None) -> str:
    if lines is None:
        return ""
    h = hashlib.sha256()
    for lineno, line in lines:
        h.update(f"{lineno}:{_line_hash(line)}\n".encode())
    return h.hexdigest()[:32]
