"""Loaders: a folder of Markdown/text files with YAML front matter, and benchmark-style JSONL."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

import frontmatter
import yaml

from rag.documents import Document, LoadResult, Rejected

TEXT_SUFFIXES = {".md", ".markdown", ".txt"}


class InputError(ValueError):
    """A document that cannot be published; the message is the one-line reason."""


def load_sources(
    sources: Iterable[str | Path],
    default_acl: tuple[str, ...] = (),
    collection: str | None = None,
) -> LoadResult:
    """Load every source (folder, Markdown/text file or JSONL file) into one result."""
    result = LoadResult()
    for source in sources:
        path = Path(source).resolve()
        if not path.exists():
            result.rejected.append(Rejected(str(path), "source does not exist"))
            continue
        if path.is_dir():
            one = load_folder(path, default_acl, collection)
        elif path.suffix == ".jsonl":
            one = load_jsonl(path, default_acl, collection)
        else:
            one = _load_files([path], path.parent, default_acl, collection)
        one.documents = [replace(d, source=str(path)) for d in one.documents]
        result.extend(one)
    return result


def load_folder(folder: Path, default_acl: tuple[str, ...] = (), collection: str | None = None) -> LoadResult:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _hidden(p.relative_to(folder)))
    result = LoadResult()
    jsonl = [p for p in files if p.suffix == ".jsonl"]
    for p in jsonl:
        result.extend(load_jsonl(p, default_acl, collection))
    others = [p for p in files if p.suffix != ".jsonl"]
    result.extend(_load_files(others, folder, default_acl, collection))
    return result


def _load_files(files: list[Path], root: Path, default_acl: tuple[str, ...], collection: str | None) -> LoadResult:
    result = LoadResult()
    for path in files:
        if path.suffix.lower() not in TEXT_SUFFIXES:
            result.rejected.append(Rejected(str(path), f"unsupported file type '{path.suffix or path.name}'"))
            continue
        try:
            result.documents.append(parse_markdown(read_text(path), path, root, default_acl, collection))
        except InputError as err:
            result.rejected.append(Rejected(str(path), str(err)))
    return result


def read_text(path: Path) -> str:
    """Read a file as UTF-8 text, refusing binary, empty and wrongly encoded files."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file disappeared while the run was reading it") from None
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror}") from None
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
    raw: str, path: Path, root: Path, default_acl: tuple[str, ...] = (), collection: str | None = None
) -> Document:
    try:
        post = frontmatter.loads(raw)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise InputError(f"malformed front matter{where}: {problem}") from None
    meta = post.metadata
    body = post.content.strip()
    if not body:
        raise InputError("empty body (front matter only)")
    rel = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
    doc_id = _scalar(meta, "id") or rel.with_suffix("").as_posix().split(".")[0]
    return Document(
        doc_id=doc_id,
        title=_scalar(meta, "title") or _first_heading(body) or Path(doc_id).name,
        text=body,
        version=_scalar(meta, "version") or "1",
        acl=_acl(meta.get("acl"), default_acl),
        links=_str_list(meta.get("links"), "links"),
        collection=_scalar(meta, "collection") or collection or "default",
        source_path=str(path),
    )


def load_jsonl(path: Path, default_acl: tuple[str, ...] = (), collection: str | None = None) -> LoadResult:
    """Benchmark format: one JSON object per line with doc_id, text and optionally title, version, acl."""
    result = LoadResult()
    try:
        handle = path.open("rb")
    except OSError as err:
        result.rejected.append(Rejected(str(path), f"cannot read file: {err.strerror}"))
        return result
    with handle:
        for lineno, line in enumerate(handle, 1):
            where = f"{path}:{lineno}"
            if not line.strip():
                continue
            try:
                record = _json_record(line)
                result.documents.append(_jsonl_document(record, where, default_acl, collection))
            except InputError as err:
                result.rejected.append(Rejected(where, str(err), _maybe_id(line)))
    return result


def _json_record(line: bytes) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{line[err.start]:02x})") from None
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON ({err.msg.removesuffix(' at')}, column {err.colno})") from None
    if not isinstance(record, dict):
        raise InputError(f"expected a JSON object, got {type(record).__name__}")
    return record


def _jsonl_document(record: dict[str, Any], where: str, default_acl: tuple[str, ...], collection: str | None) -> Document:
    doc_id = _scalar(record, "doc_id")
    if not doc_id:
        raise InputError("missing doc_id")
    text = record.get("text")
    if not isinstance(text, str):
        raise InputError("missing text")
    if not text.strip():
        raise InputError("empty text")
    return Document(
        doc_id=doc_id,
        title=_scalar(record, "title") or doc_id,
        text=text.strip(),
        version=_scalar(record, "version") or "1",
        acl=_acl(record.get("acl"), default_acl),
        links=_str_list(record.get("links"), "links"),
        collection=_scalar(record, "collection") or collection or "default",
        source_path=where,
    )


def _scalar(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, (list, dict, set)):
        raise InputError(f"'{key}' must be a single value, got {type(value).__name__}")
    return str(value).strip() or None


def _str_list(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise InputError(f"'{key}' must be a list of strings")
    return tuple(str(v).strip() for v in value if str(v).strip())


def _acl(value: Any, default_acl: tuple[str, ...]) -> tuple[str, ...]:
    """The default ACL fills in only where no ACL is given; an explicit empty list stays readable by nobody."""
    groups = tuple(default_acl) if value is None else _str_list(value, "acl")
    if not groups:
        raise InputError("no ACL: a document without groups is readable by nobody")
    return tuple(sorted(set(groups)))


def _first_heading(body: str) -> str | None:
    for line in body.splitlines()[:5]:
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def _hidden(rel: Path) -> bool:
    """Dot-files and README.md files describe a folder; they are not documents."""
    return any(part.startswith(".") for part in rel.parts) or rel.name == "README.md"


def _maybe_id(line: bytes) -> str | None:
    try:
        record = json.loads(line)
        return str(record["doc_id"]) if isinstance(record, dict) and record.get("doc_id") else None
    except (ValueError, KeyError):
        return None
