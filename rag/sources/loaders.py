"""Loaders: a folder of Markdown/text files with YAML front matter, PDF, Office, HTML and e-mail files
(rag.sources.formats), and benchmark-style JSONL.

Every input the loader passes over gets a row saying why; a failure of one file or one line is contained
and named, so it never stops the run.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from rag.sources.access import ACCESS_FILE, AccessOptions, ceiling_of
from rag.sources.access import NOTE as ACCESS_NOTE
from rag.sources.documents import Document, InputError, LoadResult, Rejected, Withheld
from rag.sources.formats import ExtractOptions
from rag.sources.formats.registry import READERS
from rag.sources.formatted import load_formatted, one_line, open_no_follow, unexpected_reason
from rag.sources.front_matter import split_front_matter, unique_pairs
from rag.sources.partitions import Selection
from rag.sources.records import Origin, default_id, document, recover_id

TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
MAX_FILE_BYTES = 64 * 2**20
MAX_LINE_BYTES = 64 * 2**20
_RAW_DOC_ID = re.compile(r'"doc_id"\s*:\s*"((?:[^"\\]|\\.){1,500})"')


def load_sources(
    sources: Iterable[str | Path],
    default_acl: tuple[str, ...] = (),
    collection: str | None = None,
    select: Selection | None = None,
    options: ExtractOptions = ExtractOptions(),
) -> LoadResult:
    """Load every source (folder, Markdown/text file or JSONL file) into one result.

    A source named here is resolved once (it may itself be a link); nothing found inside it is followed.
    `select` narrows a folder to one partition's files.
    """
    result = LoadResult()
    for source in sources:
        path = Path(source).resolve()
        try:
            one = _load_source(path, default_acl, collection, select, options)
        except Exception as err:  # noqa: BLE001 - one source's failure must not stop the others
            one = LoadResult(rejected=[Rejected(str(path), f"cannot read source: {one_line(err)}")])
        one.documents = [replace(d, source=str(path)) for d in one.documents]
        result.extend(one)
    return result


def _load_source(path: Path, default_acl: tuple[str, ...], collection: str | None,
                 select: Selection | None = None, options: ExtractOptions = ExtractOptions()) -> LoadResult:
    if not path.exists():
        return LoadResult(rejected=[Rejected(str(path), "source does not exist")])
    if path.is_dir():
        result = load_folder(path, default_acl, collection, select, options)
    elif not path.is_file():
        return LoadResult(rejected=[Rejected(str(path), f"not a regular file ({_kind(path.stat().st_mode)})")])
    elif path.suffix == ".jsonl":
        result = load_jsonl(path, default_acl, collection)
    else:
        result = _load_files([path], path.parent, default_acl, collection, options)
    result.scanned.append(str(path))
    return result


def load_folder(folder: Path, default_acl: tuple[str, ...] = (), collection: str | None = None,
                select: Selection | None = None, options: ExtractOptions = ExtractOptions()) -> LoadResult:
    """Every regular file below the folder; links are never followed and each gets a row."""
    result = LoadResult()
    files: list[Path] = []
    for path, problem in walk(folder, select):
        if problem is None:
            files.append(path)
        else:
            skipped, reason = problem
            (result.skipped if skipped else result.rejected).append(Rejected(str(path), reason))
    access = AccessOptions.of(select, options.acl_from)
    for p in (p for p in files if p.suffix == ".jsonl"):
        result.extend(load_jsonl(p, default_acl, collection, folder, access))
    result.extend(_load_files([p for p in files if p.suffix != ".jsonl"], folder, default_acl, collection, options,
                              access))
    return result


def watched(rel: Path) -> bool:
    """A document a load would read, or a folder ACL file (its edit changes who may read the documents below it)."""
    if any(part.startswith(".") for part in rel.parts[:-1]):
        return False
    if rel.name == ACCESS_FILE:
        return True
    suffix = rel.suffix.lower()
    return not rel.name.startswith(".") and (suffix in TEXT_SUFFIXES or suffix in READERS or suffix == ".jsonl")


Passed = tuple[bool, str] | None  # (skipped on purpose rather than refused, reason); None: read it


def walk(folder: Path, select: Selection | None = None) -> Iterable[tuple[Path, Passed]]:
    """(path, None) for each regular file to read, (path, why) for everything passed over, sorted.

    With a selection, only the entries it admits (by path inside the folder) are listed at all.
    """
    root = folder.resolve()
    if select is not None:
        return [(p, why) for p, why in walk(folder) if select.admits(p.relative_to(root).as_posix())]
    entries: list[tuple[Path, Passed]] = []

    def unreadable(err: OSError) -> None:
        entries.append((Path(err.filename), (False, f"cannot read folder: {err.strerror}")))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if name.startswith(".") or (here / name).is_symlink():
                entries.append((here / name, _passed_over(here / name, root)))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (here / d).is_symlink())
        for name in filenames:
            path = here / name
            entries.append((path, _passed_over(path, root)))
    return sorted(entries)


def _passed_over(path: Path, root: Path) -> Passed:
    """Why a folder entry is not read as a document (None: it is a regular file to read)."""
    try:
        mode = path.lstat().st_mode
    except OSError as err:
        return False, f"cannot read file: {err.strerror}"
    if stat.S_ISLNK(mode):
        return _link_reason(path, root)
    if path.name == ACCESS_FILE and stat.S_ISREG(mode):
        return True, ACCESS_NOTE
    if path.name.startswith("."):
        return True, "hidden (dot) file or folder"
    if path.name == "README.md":
        return True, "a README.md describes its folder, it is not a document"
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return False, f"not a regular file ({_kind(mode)})"
    return None


def _link_reason(path: Path, root: Path) -> Passed:
    """Links are never followed: one leaving the source folder is refused, one inside is skipped (its target is read)."""
    try:
        target = path.resolve(strict=True)
    except RuntimeError:
        return False, "symbolic link loop (links are never followed)"
    except FileNotFoundError:
        return False, "dangling symbolic link (links are never followed)"
    except OSError as err:
        return False, f"symbolic link that cannot be resolved: {err.strerror}"
    if not target.is_relative_to(root):
        return False, "symbolic link to a path outside the source folder (refused: links are never followed)"
    return True, f"symbolic link inside the source folder (not followed; {target.relative_to(root)} is read itself)"


def _load_files(files: list[Path], root: Path, default_acl: tuple[str, ...], collection: str | None,
                options: ExtractOptions = ExtractOptions(), access: AccessOptions = AccessOptions()) -> LoadResult:
    result = LoadResult()
    for path in files:
        if path.suffix.lower() in READERS:
            result.extend(load_formatted(path, root, default_acl, collection, options, access))
            continue
        if path.suffix.lower() not in TEXT_SUFFIXES:
            result.rejected.append(Rejected(str(path), f"unsupported file type '{path.suffix or path.name}'"))
            continue
        try:
            raw = read_text(path)
        except InputError as err:
            result.rejected.append(Rejected(str(path), str(err), _id_in(path), empty=str(err) == "empty file"))
            continue
        try:
            result.documents.append(parse_markdown(raw, path, root, default_acl, collection, access))
        except Exception as err:  # noqa: BLE001 - a per-file failure is contained and named
            doc_id = recover_id(raw) or default_id(path, root)
            result.rejected.append(Rejected(str(path), unexpected_reason(err), doc_id,
                                            withheld=isinstance(err, Withheld)))
    return result


def read_text(path: Path) -> str:
    """Read a regular file as UTF-8 text, refusing binary, empty, oversized and wrongly encoded files."""
    try:
        with open_no_follow(path) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputError("not a regular file")
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError("file disappeared while the run was reading it") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError("became a symbolic link while the run was reading it (links are never followed)") from None
        raise InputError(f"cannot read file: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"file is larger than {MAX_FILE_BYTES // 2**20} MB")
    if b"\0" in data[:8192]:
        raise InputError("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    if not text.strip():
        raise InputError("empty file")
    return text


def parse_markdown(
    raw: str, path: Path, root: Path, default_acl: tuple[str, ...] = (), collection: str | None = None,
    access: AccessOptions = AccessOptions()
) -> Document:
    meta, body = split_front_matter(raw)
    body = body.strip()
    if not body:
        raise InputError("empty body (front matter only)")
    return document(meta or {}, body, Origin(str(path), "id", default_id(path, root), meta is None, default_acl,
                                             collection, text_sets_acl=meta is None,
                                             **ceiling_of(path, root, access)))


def load_jsonl(path: Path, default_acl: tuple[str, ...] = (), collection: str | None = None,
               root: Path | None = None, access: AccessOptions = AccessOptions()) -> LoadResult:
    """Benchmark format: one JSON object per line with doc_id, text and optionally title, version, acl; the folder
    ACL files from `root` (default: the file's own folder) down apply to its records."""
    result = LoadResult()
    try:
        lines = list(jsonl_lines(path))
    except OSError as err:
        result.rejected.append(Rejected(str(path), f"cannot read file: {err.strerror}"))
        return result
    for lineno, line in lines:
        outcome = jsonl_record(path, lineno, line, default_acl, collection, root, access)
        (result.documents if isinstance(outcome, Document) else result.rejected).append(outcome)
    if not lines:
        result.rejected.append(empty_jsonl(path))
    return result


def jsonl_lines(path: Path) -> Iterable[tuple[int, bytes | None]]:
    """(line number, line) for each non-blank line; None for a line over MAX_LINE_BYTES (not kept in memory)."""
    with path.open("rb") as handle:
        for lineno, line in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                _skip_rest_of_line(handle)
                yield lineno, None
            elif line.strip():
                yield lineno, line


def jsonl_record(path: Path, lineno: int, line: bytes | None, default_acl: tuple[str, ...],
                 collection: str | None, root: Path | None = None, access: AccessOptions = AccessOptions()
                 ) -> Document | Rejected:
    """The document one JSONL line holds, or why it cannot be published; one bad line never stops the file."""
    where = f"{path}:{lineno}"
    if line is None:
        return Rejected(where, f"line is longer than {MAX_LINE_BYTES // 2**20} MB", holds=str(path))
    try:
        record = _json_record(line)
        return document(record, _record_text(record), Origin(where, "doc_id", default_acl=default_acl,
                                                             collection=collection,
                                                             **ceiling_of(path, root or path.parent, access)))
    except Exception as err:  # noqa: BLE001 - one bad line never stops the file
        doc_id = _maybe_id(line)
        return Rejected(where, unexpected_reason(err), doc_id, holds=None if doc_id or _parses(line) else str(path),
                        withheld=isinstance(err, Withheld))


def empty_jsonl(path: Path) -> Rejected:
    return Rejected(str(path), "empty file (no JSON records)", empty=True)


def _json_record(line: bytes) -> dict[str, Any]:
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{line[err.start]:02x})") from None
    try:
        record = json.loads(text, object_pairs_hook=unique_pairs)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON ({err.msg.removesuffix(' at')}, column {err.colno})") from None
    except RecursionError:
        raise InputError("not JSON this loader accepts: nested too deeply") from None
    except InputError:
        raise
    except ValueError:  # the one other ValueError json raises: an integer with more digits than Python converts
        raise InputError("not JSON this loader accepts: a number with more than 4300 digits") from None
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}")
    return record


def _record_text(record: dict[str, Any]) -> str:
    text = record.get("text")
    if not isinstance(text, str):
        raise InputError("missing text")
    if not text.strip():
        raise InputError("empty text")
    return text.strip()


def _maybe_id(line: bytes) -> str | None:
    """The doc_id a rejected line declares, parsed if it parses, otherwise read off the raw text."""
    try:
        record = json.loads(line)
        if isinstance(record, dict) and isinstance(record.get("doc_id"), (str, int)) and str(record["doc_id"]).strip():
            return str(record["doc_id"]).strip()
        return None
    except Exception:  # noqa: BLE001 - unparsable: fall back to the raw text
        m = _RAW_DOC_ID.search(line.decode("utf-8", "replace"))
        return m.group(1).strip() or None if m else None


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
        return True
    except Exception:  # noqa: BLE001
        return False


def _id_in(path: Path) -> str | None:
    """The id a file that cannot be read as text still declares (latin-1, binary junk around front matter)."""
    try:
        with open_no_follow(path) as handle:
            return recover_id(handle.read(20000).decode("utf-8", "replace"))
    except OSError:
        return None


def _skip_rest_of_line(handle) -> None:
    while (chunk := handle.readline(2**20)) and not chunk.endswith(b"\n"):
        pass


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"
