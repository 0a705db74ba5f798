"""Hostile Office files are refused in one line, by kind, before any library parses them."""
import io
import zipfile

import docx
import pytest

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.containers import MAX_RATIO, OLE_MAGIC, check_office
from rag.sources.formats.docx import extract


def _docx() -> bytes:
    d = docx.Document()
    d.add_paragraph("Hello world")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _with_member(data: bytes, name: str, content: bytes) -> bytes:
    """The same zip with `name` replaced (or added) by `content`."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info, src.read(info))
        dst.writestr(name, content)
    return out.getvalue()


def _refusal(data: bytes) -> ExtractError:
    with pytest.raises(ExtractError) as error:
        extract(data, ExtractOptions())
    assert "\n" not in str(error.value)
    return error.value


def test_a_real_docx_passes():
    check_office(_docx(), "DOCX")
    assert extract(_docx(), ExtractOptions()).text == "Hello world"


def test_zip_bomb_member_is_refused():
    bomb = _with_member(_docx(), "word/media/zeros.bin", bytes(200 * 1024 * 1024))
    assert len(bomb) < 1024 * 1024  # 200 MB of zeros deflates to ~200 KB
    error = _refusal(bomb)
    assert error.kind == "zip bomb" and f"cap {MAX_RATIO}:1" in str(error)


def test_billion_laughs_is_refused_unexpanded():
    document = zipfile.ZipFile(io.BytesIO(_docx())).read("word/document.xml").decode()
    laughs = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              + "".join(f'<!ENTITY lol{i} "{("&lol%s;" % (i - 1 if i > 1 else "")) * 10}">' for i in range(1, 10))
              + "]>")
    error = _refusal(_with_member(_docx(), "word/document.xml", (laughs + document.split("?>", 1)[1]).encode()))
    assert error.kind == "unsafe xml" and "word/document.xml" in str(error)


def test_external_entity_is_refused():
    document = zipfile.ZipFile(io.BytesIO(_docx())).read("word/document.xml").decode()
    xxe = '<?xml version="1.0"?>\n<!doctype w [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    body = document.split("?>", 1)[1].replace("Hello world", "&x;")
    error = _refusal(_with_member(_docx(), "word/document.xml", (xxe + body).encode()))
    assert error.kind == "unsafe xml" and "root:" not in str(error)


def test_utf16_doctype_is_seen():
    error = _refusal(_with_member(_docx(), "word/extra.xml", '\ufeff<!DOCTYPE x []><x/>'.encode("utf-16-le")))
    assert error.kind == "unsafe xml"


def test_truncated_docx_is_corrupt():
    data = _docx()
    error = _refusal(data[: len(data) // 2])
    assert error.kind == "corrupt" and "zip" in str(error)


def test_crc_damage_is_corrupt():
    data = bytearray(_with_member(_docx(), "word/document.xml",
                                  zipfile.ZipFile(io.BytesIO(_docx())).read("word/document.xml")))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml")
    data[info.header_offset + 14] ^= 0xFF  # the local header's CRC-32
    data[_central_crc_offset(bytes(data), "word/document.xml")] ^= 0xFF
    assert _refusal(bytes(data)).kind == "corrupt"


def _central_crc_offset(data: bytes, name: str) -> int:
    return data.rindex(b"PK\x01\x02", 0, data.rindex(name.encode())) + 16


def test_encrypted_office_file():
    ole = OLE_MAGIC + bytes(504) + "EncryptionInfo".encode("utf-16-le") + bytes(1000)
    error = _refusal(ole)
    assert (error.kind, str(error)) == ("encrypted", "encrypted Office file (password protected)")


def test_legacy_doc_renamed_docx():
    ole = OLE_MAGIC + bytes(504) + "WordDocument".encode("utf-16-le") + bytes(1000)
    error = _refusal(ole)
    assert error.kind == "corrupt" and "not an Office Open XML DOCX" in str(error)


def test_not_a_zip():
    error = _refusal(b"just some text, not an office file")
    assert error.kind == "corrupt" and "not a zip" in str(error)


def test_zip_without_a_document_is_corrupt_in_one_line():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("hello.txt", "hi")
    assert _refusal(out.getvalue()).kind == "corrupt"


@pytest.mark.parametrize("reader", ["docx", "pptx", "xlsx"])
def test_every_office_reader_runs_the_guards(reader):
    import importlib
    read = importlib.import_module(f"rag.sources.formats.{reader}").extract
    bomb = _with_member(_docx(), "zeros.bin", bytes(20 * 1024 * 1024))
    laughs = _with_member(_docx(), "x.xml", b'<!DOCTYPE a [<!ENTITY a "aaaa">]><a>&a;</a>')
    encrypted = OLE_MAGIC + bytes(504) + "EncryptionInfo".encode("utf-16-le")
    cases = ((bomb, "zip bomb"), (laughs, "unsafe xml"), (encrypted, "encrypted"), (b"PK\x03\x04", "corrupt"))
    for data, kind in cases:
        with pytest.raises(ExtractError) as error:
            read(data, ExtractOptions())
        assert error.value.kind == kind, (kind, str(error.value))
