"""The e-mail reader: a `#` subject heading, the From/To/Cc/Date lines, then the body as Markdown.

The text/plain body is preferred; an HTML-only message goes through the HTML reader (scripts dropped, never run).
Attachments are never opened: `dropped` names each one.
"""
from __future__ import annotations

import re

from rag.sources.formats import Extracted, ExtractError, ExtractOptions
from rag.sources.formats.containers import library_errors, require_text
from rag.sources.formats.html import from_text
from rag.sources.formats.markdown import Blocks, heading, inline

_HEADERS = ("From", "To", "Cc", "Date")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """The message as Markdown; its title is the Subject."""
    with library_errors("e-mail"):
        from email import policy
        from email.parser import BytesParser

        message = BytesParser(policy=policy.default).parsebytes(data)
        if not message.keys():
            raise ExtractError("corrupt", "not an e-mail message (no headers)")
        subject = inline(str(message.get("Subject", "")))
        blocks = Blocks()
        if subject:
            blocks.add(heading(1, subject))
        blocks.add("\n".join(f"{name}: {inline(str(message[name]))}" for name in _HEADERS if message[name]))
        body = message.get_body(preferencelist=("plain", "html"))
        dropped = [f"attachment not read: {name}" for name in _attachments(message, body)]
        if body is not None:
            dropped += _body(body, blocks)
        return require_text(blocks.extracted(title=subject or None, dropped=tuple(dropped)))


def _body(part, blocks: Blocks) -> list[str]:
    """Add the body part's blocks; return what its reader dropped."""
    text = _text(part)
    if part.get_content_subtype() == "html":
        if not text.strip():
            return []
        try:
            page = from_text(text)
        except ExtractError as error:
            if error.kind == "empty":
                return list(_dropped_scripts(text))
            raise
        blocks.add(page.text)
        return list(page.dropped)
    for paragraph in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n")):
        blocks.add("\n".join(line.rstrip() for line in paragraph.splitlines()))
    return []


def _dropped_scripts(text: str) -> tuple[str, ...]:
    return ("scripts dropped (never run)",) if "<script" in text.lower() else ()


def _text(part) -> str:
    """The part's text in its declared charset; an unknown charset is read as UTF-8 with replacements."""
    try:
        return part.get_content()
    except (LookupError, UnicodeError):
        return (part.get_payload(decode=True) or b"").decode("utf-8", errors="replace")


def _attachments(message, body) -> list[str]:
    names = []
    for part in message.walk():
        if part is body or part.is_multipart():
            continue
        if part.is_attachment() or part.get_filename() or part.get_content_maintype() not in ("text",):
            names.append(part.get_filename() or part.get_content_type())
        elif part.get_content_subtype() not in ("plain", "html"):
            names.append(part.get_content_type())
    return names
