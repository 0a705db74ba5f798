"""Folder ACL files: a `.access.yaml` in a folder of a source sets who may read every document below it.

The nearest folder file wins. A folder file inherits from the folder files above it (it may only narrow them)
unless it says `inherit: false`. A document's own `acl` may only narrow its folder's groups. A folder file that
cannot be read or is invalid quarantines every document below it: nothing there gets a guessed ACL.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rag.sources.documents import InputError, Withheld, content_hash
from rag.sources.file_groups import file_groups
from rag.sources.front_matter import load_yaml
from rag.sources.partitions import Selection
from rag.sources.records import acl_groups

ACCESS_FILE = ".access.yaml"
KEYS = ("acl", "inherit")
MAX_BYTES = 64 * 1024
NOTE = "folder ACL file (sets who may read the documents below its folder)"


@dataclass(frozen=True)
class AccessOptions:
    """Where a source's folder ACL files start (a partition reads those of the source folder above its own too),
    and whether the file system's groups bound a file's ACL (`--acl-from posix`; `everyone` if world-readable)."""

    top: str | None = None
    posix: bool = False
    everyone: bool = False

    def __post_init__(self):
        if self.top:   # compared with resolved source folders
            object.__setattr__(self, "top", str(Path(self.top).resolve()))

    @classmethod
    def of(cls, select: Selection | None, acl_from: str = "") -> AccessOptions:
        """A partition's run reads the folder files of the source folder its collection is in."""
        return cls(select.top if select is not None else None, acl_from.startswith("posix"), acl_from.endswith(
            ",everyone"))

    def start(self, root: Path) -> Path:
        return Path(self.top) if self.top and root.is_relative_to(self.top) else root


@dataclass(frozen=True)
class FolderAcl:
    """What the folder files above a document allow: `groups` None when no folder file applies."""

    groups: tuple[str, ...] | None = None
    file: str = ""            # the nearest folder file
    error: str | None = None  # an invalid folder file above: every document below is quarantined


def folder_acl(path: Path, root: Path, access: AccessOptions = AccessOptions()) -> FolderAcl:
    """The folder ACL of the file at `path`: the folder files from `root` (or `access.top`) down to its folder."""
    acl = FolderAcl()
    for folder in _chain(path, access.start(root)):
        own = _folder_file(folder / ACCESS_FILE)
        if own is not None:
            acl = _combine(acl, own, str(folder / ACCESS_FILE))
    return acl


def ceiling_of(path: Path, root: Path, access: AccessOptions = AccessOptions()) -> dict:
    """The Origin fields of a document read from `path`; raises the one-line error of an invalid folder file above."""
    acl = folder_acl(path, root, access)
    if acl.error:
        raise Withheld(acl.error)
    if not access.posix:
        return {"ceiling": acl.groups, "ceiling_file": f"the folder ACL file {acl.file}"}
    try:
        groups = file_groups(path, access.everyone)
    except InputError as err:
        raise Withheld(str(err)) from None
    if acl.groups is None:
        if not groups:
            raise Withheld("no group may read it on the file system (--acl-from posix)")
        return {"ceiling": groups, "ceiling_file": f"its file-system groups ({', '.join(groups)})"}
    if not (both := tuple(g for g in groups if g in acl.groups)):
        raise Withheld(f"none of its file-system groups ({', '.join(groups) or 'none'}) is allowed by the folder "
                       f"ACL file {acl.file}")
    return {"ceiling": both, "ceiling_file": f"the folder ACL file {acl.file} and its file-system groups"}


def fingerprint(path: Path, root: Path, seen: dict[Path, str], access: AccessOptions = AccessOptions()) -> str:
    """A hash of every folder file above `path` (their bytes) and, with `--acl-from posix`, of its file-system
    groups: it changes when the file's ACL may change (a chmod or chgrp changes no content)."""
    parts = []
    for folder in _chain(path, root):
        if folder not in seen:
            seen[folder] = _raw_hash(folder / ACCESS_FILE)
        parts.append(seen[folder])
    if access.posix:
        try:
            parts.append("posix:" + ",".join(file_groups(path, access.everyone)))
        except InputError as err:
            parts.append(str(err))
    return content_hash(*parts) if any(parts) else ""


def _chain(path: Path, root: Path) -> list[Path]:
    """The folders from `root` down to the file's own folder (only the file's folder if it is outside `root`)."""
    folder = path.parent
    if not folder.is_relative_to(root):
        return [folder]
    rel = folder.relative_to(root).parts
    return [root.joinpath(*rel[:n]) for n in range(len(rel) + 1)]


@dataclass(frozen=True)
class _Own:
    groups: tuple[str, ...] = ()
    inherit: bool = True
    error: str | None = None


def _combine(above: FolderAcl, own: _Own, file: str) -> FolderAcl:
    if above.error:
        return above
    if own.error:
        return FolderAcl(error=f"folder ACL file {file}: {own.error}", file=file)
    if own.inherit and above.groups is not None and (extra := sorted(set(own.groups) - set(above.groups))):
        return FolderAcl(error=f"folder ACL file {file} allows group '{extra[0]}' that the folder file above it "
                               f"({above.file}) does not; narrow it or set 'inherit: false'", file=file)
    return FolderAcl(own.groups, file)


def _folder_file(path: Path) -> _Own | None:
    """The folder file at `path` (None if there is none), or why it cannot be used."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as err:
        return _Own(error=f"cannot read it: {err.strerror}")
    if stat.S_ISLNK(st.st_mode):
        return _Own(error="is a symbolic link (links are never followed)")
    if not stat.S_ISREG(st.st_mode):
        return _Own(error="is not a regular file")
    return _parsed(str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@lru_cache(maxsize=4096)
def _parsed(path: str, size: int, mtime_ns: int, ctime_ns: int, ino: int) -> _Own:
    """One folder file, read once per state (its stat), so a folder of many documents reads it once."""
    try:
        raw = _read(Path(path))
        return _Own(*_fields(raw))
    except InputError as err:
        return _Own(error=str(err))


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read it: {err.strerror}") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // 1024} KB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def _fields(raw: str) -> tuple[tuple[str, ...], bool]:
    """(groups, inherit) of a folder file's text; exact keys, a non-empty ACL, names without control characters."""
    fields = load_yaml(raw)
    if not isinstance(fields, dict):
        kind = "empty" if fields is None else f"a {type(fields).__name__}"
        raise InputError(f"is {kind}, not a mapping with an 'acl' key")
    for key in fields:
        if key not in KEYS:
            raise InputError(f"unknown key '{str(key)[:40]}' (the keys are 'acl' and 'inherit')")
    if "acl" not in fields:
        raise InputError("has no 'acl' key")
    inherit = fields.get("inherit", "true")
    if inherit not in ("true", "false"):
        raise InputError("'inherit' must be true or false")
    return acl_groups(fields["acl"]), inherit == "true"


def _raw_hash(path: Path) -> str:
    """The bytes of a folder file, hashed; a marker when it exists but cannot be read (so its repair is noticed)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"
    try:
        return content_hash(_read(path), str(stat.S_IFMT(st.st_mode)))
    except InputError as err:
        return content_hash(str(err), str(st.st_ctime_ns))
