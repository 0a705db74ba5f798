"""The spreadsheet readers: each XLSX sheet, or a CSV file, as a `##` heading and one pipe table.

The first non-empty row is the table's header; empty rows and columns are trimmed. Values read as Excel shows
them: dates as ISO dates, percentages and fixed-decimal formats applied, whole numbers without ".0". XLSX is read
with cached formula values (a file never recalculated by Excel has none), one location per sheet; chart sheets and
images are not read. A sheet stops at MAX_ROWS rows, and `dropped` says so. CSV must be UTF-8 (a BOM is allowed);
its dialect is sniffed.
"""
from __future__ import annotations

import codecs
import csv
import datetime as dt
import io
import re

from rag.sources.formats import Extracted, ExtractError, ExtractOptions
from rag.sources.formats.containers import check_office, library_errors, require_text
from rag.sources.formats.markdown import Blocks, heading, table

MAX_ROWS = 100_000  # rows with content per sheet or CSV file; the rest is named in `dropped`
_SNIFF_BYTES = 64 * 1024
_DELIMITERS = ",;\t|"
_DECIMALS = re.compile(r"0\.(0+)")


def extract(data: bytes, options: ExtractOptions) -> Extracted:
    """Every worksheet as a heading and a table; title from the workbook's properties."""
    check_office(data, "XLSX")
    with library_errors("XLSX"):
        import openpyxl

        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            blocks, dropped = Blocks(), []
            for sheet in book.worksheets:
                sheet.reset_dimensions()  # trust the rows present, not a declared (possibly huge) range
                rows, capped = _sheet_rows(sheet)
                if capped:
                    dropped.append(f"sheet {sheet.title}: rows after {MAX_ROWS:,} not read")
                markdown = table(_trim(rows))
                if markdown:
                    blocks.begin(f"sheet {sheet.title}")
                    blocks.add(heading(2, sheet.title))
                    blocks.add(markdown)
            if book.chartsheets:
                dropped.append(f"{len(book.chartsheets)} chart sheets not read")
            title = (book.properties.title or "").strip() or None
            pages = len(book.worksheets)
        finally:
            book.close()
        return require_text(blocks.extracted(title=title, pages=pages, dropped=tuple(dropped)))


def extract_csv(data: bytes, options: ExtractOptions) -> Extracted:
    """The CSV file as one table, its dialect sniffed; refused unless it is UTF-8 (or UTF-16 with its byte-order mark,
    as Excel's "Unicode text" export writes it)."""
    encoding = "utf-16" if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        raise ExtractError("corrupt", f"CSV is not {encoding[:6].upper()} text (byte {error.start:,}); save it as "
                                      "UTF-8") from None
    if not text.strip():
        raise ExtractError("empty", "no text in the file")
    with library_errors("CSV"):
        rows, capped = _capped(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text)))
        blocks = Blocks()
        blocks.add(table(_trim(rows)))
        dropped = (f"rows after {MAX_ROWS:,} not read",) if capped else ()
        return require_text(blocks.extracted(dropped=dropped))


def _delimiter(text: str) -> str:
    """The sniffed delimiter if it splits the sample's rows evenly, else the first candidate that does.

    Quoting is RFC 4180's (double quotes): the Sniffer's quote guess is unreliable on short samples.
    """
    sample = text[:_SNIFF_BYTES]
    try:
        sniffed = [csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter]
    except csv.Error:
        sniffed = []
    for delimiter in sniffed + list(_DELIMITERS):
        rows = list(csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter))
        rows = [row for row in rows[:-1 if len(text) > len(sample) else None] if row]
        if rows and len({len(row) for row in rows}) == 1 and len(rows[0]) > 1:
            return delimiter
    return (sniffed or [","])[0]


def _sheet_rows(sheet) -> tuple[list[list[str]], bool]:
    return _capped([_cell_text(cell) for cell in row] for row in sheet.iter_rows())


def _capped(rows) -> tuple[list[list[str]], bool]:
    """The rows with any content, up to MAX_ROWS, and whether more followed."""
    kept: list[list[str]] = []
    for row in rows:
        if any(value.strip() for value in row):
            if len(kept) == MAX_ROWS:
                return kept, True
            kept.append(row)
    return kept, False


def _trim(rows: list[list[str]]) -> list[list[str]]:
    """Rows without the columns that are empty in every row."""
    width = max((len(row) for row in rows), default=0)
    used = [i for i in range(width) if any(i < len(row) and row[i].strip() for row in rows)]
    return [[row[i] if i < len(row) else "" for i in used] for row in rows]


def _cell_text(cell) -> str:
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    return _shown(value, getattr(cell, "number_format", None) or "General")


def _shown(value, number_format: str) -> str:
    """A cell value as Excel would show it, for the common formats."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.second else "minutes")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, (int, float)):
        return _number(value, number_format)
    return str(value)


def _number(value: float, number_format: str) -> str:
    decimals = _DECIMALS.search(number_format)
    places = len(decimals.group(1)) if decimals else None
    grouped = "#,##" in number_format
    if "%" in number_format:
        return f"{value * 100:.{places or 0}f}%"
    if places is not None:
        return f"{value:,.{places}f}" if grouped else f"{value:.{places}f}"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}" if grouped else str(value)
    return f"{value:.15g}"
