"""Which reader reads which file suffix, and the one way a file of any of them becomes a document's text."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from rag.sources.formats import KINDS, Extracted, ExtractError, ExtractOptions
from rag.text.structure import marker

# suffix → (module of rag.sources.formats, its function); imported at the first file of that format.
READERS = {
    ".pdf": ("pdf", "extract"),
    ".docx": ("docx", "extract"),
    ".pptx": ("pptx", "extract"),
    ".xlsx": ("xlsx", "extract"),
    ".csv": ("xlsx", "extract_csv"),
    ".html": ("html", "extract"),
    ".htm": ("html", "extract"),
    ".eml": ("eml", "extract"),
}
MAX_BYTES = 256 * 2**20  # a larger PDF or deck is refused rather than held in memory whole


@dataclass(frozen=True)
class Read:
    """A file read: its Markdown text with location markers, and what the reader said about it."""

    text: str
    title: str | None
    pages: int
    locations: int
    dropped: tuple[str, ...]


def read(suffix: str, data: bytes, options: ExtractOptions) -> Read:
    """The file's text, marked where each page, slide or sheet begins (when there are two or more)."""
    module, function = READERS[suffix.lower()]
    reader = getattr(importlib.import_module(f"rag.sources.formats.{module}"), function)
    try:
        extracted = reader(data, options)
    except ExtractError:
        raise
    except Exception as err:  # noqa: BLE001 - a library's own failure on a damaged file is that file's problem
        raise ExtractError("corrupt", f"cannot read the file ({type(err).__name__}: {_line(err)})") from None
    text = marked(extracted)
    if not text.strip():
        raise ExtractError("empty", "no text in the file")
    return Read(text, extracted.title, extracted.pages, len(extracted.locations), extracted.dropped)


def marked(extracted: Extracted) -> str:
    """The text with a location marker line where each page, slide or sheet begins."""
    if len(extracted.locations) < 2:
        return extracted.text.strip()
    text, parts, previous = extracted.text, [], 0
    for loc in sorted(extracted.locations, key=lambda loc: loc.start):
        parts.append(text[previous:loc.start].rstrip("\n"))
        parts.append(marker(loc.label))
        previous = loc.start
    parts.append(text[previous:].lstrip("\n"))
    return "\n".join(p for p in parts if p).strip()


def reason(err: ExtractError) -> str:
    """The quarantine line: it opens with its kind, so the kinds can be counted from stored reasons."""
    message = str(err)
    return message if message.lower().startswith(err.kind) else f"{err.kind}: {message}"


def kind_of(reason_line: str) -> str:
    """The kind a stored quarantine reason is counted under ('other' for reasons that are not a reader's)."""
    lowered = reason_line.lower()
    return next((k for k in KINDS if lowered.startswith(k)), "other")


def _line(err: Exception) -> str:
    return " ".join(str(err).split())[:160]
