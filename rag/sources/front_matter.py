"""Front matter, strictly: a block that opens a file parses as a mapping, or the file is refused.

python-frontmatter finds and splits the block (YAML `---`, JSON `{ }`, TOML `+++`); its `parse` silently
drops a block that is not a mapping or is never closed, so the checks around it are ours.
"""
from __future__ import annotations

import json
import re
import tomllib
import unicodedata
from typing import Any

import yaml
from frontmatter.default_handlers import BaseHandler, JSONHandler, YAMLHandler

from rag.sources.documents import InputError

# A first line that starts like a delimiter but is not one ("--- acl: x", "+++ toml") is refused, not read as text.
_DELIMITER_LIKE = re.compile(r"(---|\+\+\+|\{)")


class Unquoted(str):
    """A YAML number, boolean or date kept as the text written (010 stays '010', 1.10 stays '1.10')."""


class _StrictYAML(yaml.SafeLoader):
    """Numbers, booleans and dates stay the text written (as Unquoted); duplicate keys are errors."""

    def construct_mapping(self, node, deep=False):
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = repr(self.construct_object(key_node, deep=True))
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


for _tag in ("int", "float", "bool", "timestamp"):
    _StrictYAML.add_constructor(f"tag:yaml.org,2002:{_tag}", lambda loader, node: Unquoted(node.value))


class _YAML(YAMLHandler):
    def load(self, fm: str, **kwargs: Any) -> Any:
        return yaml.load(fm, Loader=_StrictYAML)  # noqa: S506 - a SafeLoader subclass


class _JSON(JSONHandler):
    def load(self, fm: str, **kwargs: Any) -> Any:
        return json.loads(fm, object_pairs_hook=unique_pairs)


class _TOML(BaseHandler):
    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)

    def load(self, fm: str, **kwargs: Any) -> Any:
        return tomllib.loads(fm)  # duplicate keys are an error in TOML itself


HANDLERS = {"YAML": _YAML(), "JSON": _JSON(), "TOML": _TOML()}
CLOSERS = {"YAML": "---", "JSON": "}", "TOML": "+++"}


def split_front_matter(raw: str) -> tuple[dict[str, Any] | None, str]:
    """(metadata, body); metadata is None when the file opens with no front matter at all."""
    text = _strip_invisible_start(raw)
    kind = next((k for k, h in HANDLERS.items() if h.detect(text)), None)
    if kind is None:
        first = text.split("\n", 1)[0].strip()
        if _DELIMITER_LIKE.match(first):
            raise InputError(f"first line '{first[:40]}' looks like a front matter delimiter but is not one")
        return None, text
    try:
        block, body = HANDLERS[kind].split(text)
    except ValueError:
        raise InputError(f"unclosed front matter: no closing '{CLOSERS[kind]}' line") from None
    try:
        meta = HANDLERS[kind].load(block)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""  # the block starts on the delimiter line
        problem = getattr(err, "problem", None) or type(err).__name__
        raise InputError(f"malformed front matter{where}: {problem}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"malformed {kind} front matter: {_one_line(err)}") from None
    except InputError as err:
        raise InputError(f"malformed {kind} front matter: {err}") from None
    except RecursionError:
        raise InputError("malformed front matter: nested too deeply") from None
    except ValueError as err:  # e.g. an integer too long to convert
        raise InputError(f"malformed {kind} front matter: {_one_line(err)}") from None
    if meta is None and not block.strip():
        meta = {}
    if not isinstance(meta, dict):
        raise InputError(f"front matter is a {type(meta).__name__}, not a mapping of 'key: value' lines")
    return meta, body


def load_yaml(text: str) -> Any:
    """YAML read strictly (scalars as written, duplicate keys refused); a one-line InputError if it does not parse."""
    try:
        return yaml.load(text, Loader=_StrictYAML)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"malformed YAML{where}: {getattr(err, 'problem', None) or type(err).__name__}") from None
    except RecursionError:
        raise InputError("malformed YAML: nested too deeply") from None


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"duplicate key '{key}'")
        out[key] = value
    return out


def _strip_invisible_start(raw: str) -> str:
    """Drop what precedes the first visible character (BOMs, zero-width spaces, blank lines)."""
    for i, ch in enumerate(raw):
        if unicodedata.category(ch)[0] not in "ZC":
            return raw[i:]
    return ""


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())[:200]
