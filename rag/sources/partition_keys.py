"""Partition keys as users and sensors give them: checked before any part of one reaches a path, shown in one line."""
from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_KEY_CHARS = 400


class PartitionError(ValueError):
    """A partition key that names no collection or shard of the configured sources; the message is one line."""


def check_key(key: str) -> str:
    """The key, Unicode-normalised (NFC), or a one-line PartitionError if it holds anything a path acts on."""
    if not isinstance(key, str) or not key:
        raise PartitionError("a partition key must be a non-empty string")
    k = unicodedata.normalize("NFC", key)
    problem = (f"is longer than {MAX_KEY_CHARS} characters" if len(k) > MAX_KEY_CHARS else
               "holds a control character" if _CONTROL.search(k) else
               "holds a backslash" if "\\" in k else
               "starts or ends with '/'" if k.startswith("/") or k.endswith("/") else
               "has an empty, '.' or '..' part" if any(p in ("", ".", "..") for p in k.split("/")) else None)
    if problem:
        raise PartitionError(f"partition {show_key(key)} {problem}; a key names a collection or shard exactly")
    return k


def show_key(key: str) -> str:
    """A key as one printable line: control characters escaped, cut at 80 characters."""
    return "'" + key[:80].encode("unicode_escape").decode("ascii") + ("…'" if len(key) > 80 else "'")


def listing(keys: list[str], most: int = 12) -> str:
    if not keys:
        return "none (the sources hold no collection)"
    shown = ", ".join(show_key(k)[1:-1] for k in keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")
