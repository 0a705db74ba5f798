"""From the fields a loader read (front matter or a JSONL record) to a Document, refusing anything guessed."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.sources.documents import Document, InputError, UnorderableVersion, Withheld, version_order
from rag.sources.front_matter import Unquoted

FIELDS = ("id", "doc_id", "title", "text", "version", "acl", "links", "collection")
# Names an author may use for the groups: present without 'acl', they would otherwise get the default ACL.
ACL_LOOKALIKES = {"acls", "group", "groups", "permission", "permissions", "access", "readers", "allow", "allowed"}
MAX_FIELD_CHARS = {"id": 500, "doc_id": 500, "title": 1000, "version": 64, "collection": 200}
# A line that sets an ACL, in any notation: refused in a file without front matter rather than guessed.
ACL_LINE = re.compile(r"""^[\s>#*+{\[("'-]*acl["']?\s*[:=]""", re.IGNORECASE | re.MULTILINE)
_JOINERS = {"\u200c", "\u200d"}  # zero-width (non-)joiners belong to emoji and Indic titles
_RECOVER_ID = re.compile(r"""^\s*(?:id|"doc_id")\s*:\s*["']?([^"'\n#,}]+?)["']?\s*(?:[,}#].*)?$""", re.MULTILINE)


@dataclass(frozen=True)
class Origin:
    """Where a record was read and what it may leave unsaid.

    `may_default`: no ACL could have been written (see the README's rules); `text_sets_acl`: refuse a text
    with a line that sets an ACL (a Markdown file without front matter).
    """

    source_path: str
    id_key: str
    default_id: str | None = None
    may_default: bool = True
    default_acl: tuple[str, ...] = ()
    collection: str | None = None
    text_sets_acl: bool = False
    ceiling: tuple[str, ...] | None = None   # the groups its folder ACL files allow (rag.sources.access)
    ceiling_file: str = ""


def document(fields: dict[str, Any], text: str, origin: Origin) -> Document:
    """Validate the fields and build the document."""
    _check_keys(fields)
    _check_text(text)
    doc_id = _string(fields, origin.id_key) or origin.default_id
    if not doc_id:
        raise InputError(f"missing {origin.id_key}")
    version = _string(fields, "version") or "1"
    try:
        version_order(version)
    except UnorderableVersion as err:
        raise InputError(str(err)) from None
    return Document(
        doc_id=doc_id,
        title=_string(fields, "title") or _first_heading(text) or Path(doc_id).name,
        text=text,
        version=version,
        acl=_acl(fields, origin, text if origin.text_sets_acl else ""),
        links=_str_list(fields.get("links"), "links"),
        collection=_string(fields, "collection") or origin.collection or "default",
        source_path=origin.source_path,
    )


def default_id(path: Path, root: Path) -> str:
    """The path below the source folder without its suffix: unique for distinct files but for a.md next to a.txt."""
    rel = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
    return rel.with_suffix("").as_posix()


def recover_id(raw: str) -> str | None:
    """The id an unreadable input declares, if a line of it still says so (so its published version is kept)."""
    m = _RECOVER_ID.search(raw[:20000])
    return m.group(1).strip() if m else None


def _check_keys(fields: dict[str, Any]) -> None:
    for key in fields:
        if not isinstance(key, str):
            raise InputError(f"field name {key!r} is not a string")
        norm = key.strip().lower().replace("-", "_")
        if norm in FIELDS and key != norm:
            raise InputError(f"field '{key}' must be written '{norm}'")
        if norm in ACL_LOOKALIKES and "acl" not in fields:
            raise InputError(f"'{key}' is not a field: a document's groups go in 'acl'")


def _check_text(text: str) -> None:
    _encodable(text, "text")
    if not any(unicodedata.category(ch)[0] not in "ZC" for ch in text):
        raise InputError("empty text (only whitespace or invisible characters)")


def _encodable(value: str, key: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(f"'{key}' contains a lone surrogate (U+{ord(value[err.start]):04X}) at character "
                         f"{err.start}") from None
    return value


def _string(fields: dict[str, Any], key: str) -> str | None:
    """A single value written as text (or a whole number); floats, booleans and dates would be guesses."""
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        kind = "a float" if isinstance(value, float) else type(value).__name__
        raise InputError(f"'{key}' must be a single value written as text, got {kind} (quote it)")
    text = _encodable(str(value).strip(), key)
    if len(text) > MAX_FIELD_CHARS.get(key, 1000):
        raise InputError(f"'{key}' is {len(text)} characters long (limit {MAX_FIELD_CHARS.get(key, 1000)})")
    if any(unicodedata.category(ch) in ("Cc", "Cf") and (key != "title" or ch not in _JOINERS) for ch in text):
        raise InputError(f"'{key}' contains control or invisible characters")
    return text or None


def _str_list(value: Any, key: str, strings_only: bool = False) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise InputError(f"'{key}' must be a list of strings")
    if strings_only and (odd := next((v for v in value if isinstance(v, (int, Unquoted))), None)) is not None:
        raise InputError(f"'{key}' must be a list of strings: {str(odd)[:40]} is not a name (quote it)")
    return tuple(_encodable(str(v).strip(), key) for v in value if str(v).strip())


def acl_groups(value: Any) -> tuple[str, ...]:
    """An `acl` value as written: quoted names, at least one, no control or invisible characters; sorted."""
    if value is None:
        raise InputError("'acl' is present but empty: a document without groups is readable by nobody")
    groups = _str_list(value, "acl", strings_only=True)
    if not groups:
        raise InputError("no ACL: 'acl' lists no group, so the document would be readable by nobody")
    if any(unicodedata.category(ch) in ("Cc", "Cf") for g in groups for ch in g):
        raise InputError("'acl' group names contain control or invisible characters")
    return tuple(sorted(set(groups)))


def _acl(fields: dict[str, Any], origin: Origin, text: str) -> tuple[str, ...]:
    """The ACL as written, within what its folder allows; the folder's or the default ACL only where none is written
    (see the README's rules)."""
    if "acl" in fields:
        groups = acl_groups(fields["acl"])
        if origin.ceiling is not None and (wider := [g for g in groups if g not in origin.ceiling]):
            raise Withheld(f"'acl' group '{wider[0]}' is not allowed by {origin.ceiling_file}")
        return groups
    if not origin.may_default and origin.ceiling is None:
        raise InputError("no ACL: the front matter has no 'acl' key (the default ACL applies only to files "
                         "without front matter)")
    if ACL_LINE.search(text):
        raise InputError("a line of the text sets an ACL but the file has no front matter; put it in a front "
                         "matter block that opens the file")
    groups = origin.default_acl if origin.ceiling is None else origin.ceiling
    if not groups:
        raise InputError("no ACL: a document without groups is readable by nobody")
    return tuple(sorted(set(groups)))


def _first_heading(body: str) -> str | None:
    for line in body.splitlines()[:5]:
        if line.startswith("# "):
            return line[2:].strip()[:MAX_FIELD_CHARS["title"]] or None
    return None

