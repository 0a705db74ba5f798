"""The e-mail reader on messages built with the stdlib: subject heading, header lines, body choice, attachments."""
from email.message import EmailMessage

import pytest

from rag.sources.formats import ExtractError, ExtractOptions
from rag.sources.formats.eml import extract


def _message(subject: str = "Quarterly figures — draft") -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Ada Lovelace <ada@example.org>"
    message["To"] = "board@example.org, Bob <bob@example.org>"
    message["Cc"] = "cfo@example.org"
    message["Date"] = "Mon, 02 Jan 2023 09:30:00 +0000"
    return message


def test_plain_body_preferred_with_headers_and_attachments_named():
    message = _message()
    message.set_content("Hello board,\n\nThe figures are attached.\nSee page 2.\n\n-- \nAda")
    message.add_alternative("<html><body><p>HTML VERSION</p></body></html>", subtype="html")
    message.add_attachment(b"%PDF-1.4 binary", maintype="application", subtype="pdf", filename="figures.pdf")
    out = extract(message.as_bytes(), ExtractOptions())
    assert out.text.split("\n\n") == [
        "# Quarterly figures — draft",
        "From: Ada Lovelace <ada@example.org>\nTo: board@example.org, Bob <bob@example.org>\n"
        "Cc: cfo@example.org\nDate: Mon, 02 Jan 2023 09:30:00 +0000",
        "Hello board,", "The figures are attached.\nSee page 2.", "--\nAda"]
    assert "HTML VERSION" not in out.text and "PDF-1.4" not in out.text
    assert out.title == "Quarterly figures — draft"
    assert out.dropped == ("attachment not read: figures.pdf",)


def test_html_only_body_goes_through_the_html_reader():
    message = _message("Encoded subject: café ☕")
    message.set_content("<h2>Agenda</h2><ul><li>Budget</li><li>Hiring</li></ul>"
                        "<script>document.write('SCRIPT TEXT')</script>", subtype="html")
    out = extract(message.as_bytes(), ExtractOptions())
    assert out.text.endswith("## Agenda\n\n- Budget\n- Hiring")
    assert out.text.startswith("# Encoded subject: café ☕\n\nFrom:")
    assert "SCRIPT TEXT" not in out.text and out.dropped == ("scripts dropped (never run)",)


def test_latin1_plain_body_is_decoded_by_its_charset():
    raw = ("Subject: =?iso-8859-1?q?R=E9sum=E9?=\nFrom: a@b.c\nContent-Type: text/plain; charset=iso-8859-1\n"
           "Content-Transfer-Encoding: 8bit\n\nCaf\xe9 cr\xe8me\n").encode("latin-1")
    out = extract(raw, ExtractOptions())
    assert out.title == "Résumé" and out.text.endswith("Café crème")


def test_bytes_that_are_not_a_message_are_refused():
    with pytest.raises(ExtractError) as error:
        extract(b"\x00\x01 just binary, no headers", ExtractOptions())
    assert error.value.kind == "corrupt"
