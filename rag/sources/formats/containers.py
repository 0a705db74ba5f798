"""Guards every Office Open XML reader runs before a library opens the file: zip bombs, unsafe XML, wrong containers.

DOCX, PPTX and XLSX are zip archives of XML parts. `check_office` refuses, in one line, an archive whose declared
sizes would inflate past the caps below, any XML part that declares a DOCTYPE or ENTITY (nothing is ever fetched
or expanded), a password-protected file (an OLE container holding an EncryptionInfo stream), a legacy binary
.doc/.xls/.ppt, and a file that is not a zip or is truncated or CRC-damaged. `library_errors` turns whatever a
parsing library raises into one `ExtractError("corrupt", ...)` line.
"""
from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

from rag.sources.formats import Extracted, ExtractError

# Real Office files stay far below these: a 300-slide deck with media is ~200 MB unpacked, and XML parts
# compress ~10-30:1 (a sheet of repeated values reaches ~60:1). A zeros-filled member compresses ~1000:1.
MAX_UNCOMPRESSED = 512 * 1024 * 1024  # the sum of every member's declared size
MAX_RATIO = 100  # uncompressed:compressed, for a member or the whole archive ...
RATIO_FLOOR = 1024 * 1024  # ... once it unpacks to more than this (tiny parts compress arbitrarily well)
MAX_MEMBERS = 20_000

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# The CFB directory names its streams in UTF-16LE; an encrypted OOXML file carries these two.
_ENCRYPTION_STREAM = "EncryptionInfo".encode("utf-16-le")
_UNSAFE_XML = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_XML_SUFFIXES = (".xml", ".rels", ".vml")


def check_office(data: bytes, kind: str) -> None:
    """Refuse `data` (a DOCX, PPTX or XLSX: `kind`) unless it is a sane, complete zip of safe XML."""
    if data.startswith(OLE_MAGIC):
        if _ENCRYPTION_STREAM in data:
            raise ExtractError("encrypted", "encrypted Office file (password protected)")
        raise ExtractError("corrupt", f"a legacy binary Office file (.doc/.xls/.ppt), not an Office Open XML {kind}")
    if not data.startswith(b"PK"):
        raise ExtractError("corrupt", f"not an Office Open XML {kind} (not a zip archive)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_sizes(archive.infolist(), len(data))
            for info in archive.infolist():
                if info.filename.lower().endswith(_XML_SUFFIXES):
                    _check_xml(info.filename, archive.read(info))
    except ExtractError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError, ValueError) as error:
        raise ExtractError("corrupt", f"damaged or truncated zip archive ({_one_line(error)})") from None


def _check_sizes(members: list[zipfile.ZipInfo], archive_size: int) -> None:
    if len(members) > MAX_MEMBERS:
        raise ExtractError("zip bomb", f"{len(members):,} archive members (cap {MAX_MEMBERS:,})")
    total = sum(info.file_size for info in members)
    if total > MAX_UNCOMPRESSED:
        raise ExtractError("zip bomb", f"unpacks to {total / 2**20:,.0f} MB (cap {MAX_UNCOMPRESSED // 2**20} MB)")
    for info in members:
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            ratio = info.file_size / max(info.compress_size, 1)
            raise ExtractError("zip bomb", f"member {info.filename} inflates {ratio:,.0f}:1 (cap {MAX_RATIO}:1)")
    if total > RATIO_FLOOR and total > MAX_RATIO * max(archive_size, 1):
        raise ExtractError("zip bomb", f"archive inflates {total / archive_size:,.0f}:1 (cap {MAX_RATIO}:1)")


def _check_xml(name: str, raw: bytes) -> None:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raw = raw.decode("utf-16", errors="replace").encode("utf-8")
    if _UNSAFE_XML.search(raw):
        raise ExtractError("unsafe xml", f"XML part {name} declares a DOCTYPE or ENTITY (refused, never expanded)")


@contextmanager
def library_errors(kind: str) -> Iterator[None]:
    """Whatever a parsing library raises inside becomes one `corrupt` line naming `kind`; refusals pass through."""
    try:
        yield
    except ExtractError:
        raise
    except Exception as error:  # noqa: BLE001 - a library's failure on a hostile file must not escape as a traceback
        raise ExtractError("corrupt", f"unreadable {kind}: {type(error).__name__}: {_one_line(error)}") from None


def require_text(extracted: Extracted) -> Extracted:
    """The extraction, unless it holds no text at all."""
    if not extracted.text.strip():
        raise ExtractError("empty", "no text in the file")
    return extracted


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:160] + ("…" if len(text) > 160 else "")
