"""The XLSX and CSV readers on real files: one table per sheet, values as Excel shows them, caps and refusals."""
import datetime as dt
import io

import openpyxl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from table_cells import cells

from rag.sources.formats import ExtractError, ExtractOptions, xlsx
from rag.sources.formats.xlsx import extract, extract_csv


def _book(**sheets) -> bytes:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name.replace("_", " "))
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_sheets_tables_and_locations():
    data = _book(Budget=[[None, None, None], [None, "Item", "Cost"], [None, "Rent", 1200], [None, None, None],
                         [None, "Food", 310.5]],
                 Team_List=[["Name", "Role"], ["Ada", "Engineer"]], Empty=[])
    out = extract(data, ExtractOptions())
    assert [loc.label for loc in out.locations] == ["sheet Budget", "sheet Team List"]
    budget = out.text[out.locations[0].start:out.locations[1].start].strip()
    assert budget == "## Budget\n\n| Item | Cost |\n|---|---|\n| Rent | 1200 |\n| Food | 310.5 |"
    assert out.text[out.locations[1].start:] == "## Team List\n\n| Name | Role |\n|---|---|\n| Ada | Engineer |"
    assert out.pages == 3


def test_values_read_as_excel_shows_them():
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Date", "Stamp", "Share", "Price", "Count", "Flag", "Third"])
    sheet.append([dt.date(2023, 1, 1), dt.datetime(2023, 1, 2, 9, 30), 0.25, 1234.5, 1_000_000.0, True, 1 / 3])
    sheet["C2"].number_format = "0.0%"
    sheet["D2"].number_format = "#,##0.00"
    sheet["E2"].number_format = "#,##0"
    out = io.BytesIO()
    book.save(out)
    text = extract(out.getvalue(), ExtractOptions()).text
    assert text.splitlines()[-1] == ("| 2023-01-01 | 2023-01-02 09:30 | 25.0% | 1,234.50 | 1,000,000 | TRUE "
                                     "| 0.333333333333333 |")
    assert "44927" not in text


def test_row_cap_is_named_in_dropped(monkeypatch):
    monkeypatch.setattr(xlsx, "MAX_ROWS", 3)
    out = extract(_book(Big=[["h"], ["1"], ["2"], ["3"], ["4"]]), ExtractOptions())
    assert out.text.splitlines()[-1] == "| 2 |"
    assert out.dropped == ("sheet Big: rows after 3 not read",)


def test_workbook_without_values_is_empty():
    with pytest.raises(ExtractError) as error:
        extract(_book(A=[], B=[[None, ""]]), ExtractOptions())
    assert error.value.kind == "empty"


def test_csv_dialect_bom_and_quoting():
    data = "\ufeffname;note\nAda;\"semi; colon\"\nBob;\"two\nlines\"\n".encode()
    assert extract_csv(data, ExtractOptions()).text.splitlines() == [
        "| name | note |", "|---|---|", "| Ada | semi; colon |", "| Bob | two lines |"]
    tabs = extract_csv(b"a\tb\n1\t2\n", ExtractOptions()).text
    assert tabs.splitlines()[0] == "| a | b |"


def test_csv_not_utf8_is_refused_in_one_line():
    with pytest.raises(ExtractError) as error:
        extract_csv("name,city\nJosé,Málaga\n".encode("latin-1"), ExtractOptions())
    assert error.value.kind == "corrupt" and "not UTF-8" in str(error.value) and "\n" not in str(error.value)


def test_xlsx_refuses_a_csv_renamed():
    with pytest.raises(ExtractError) as error:
        extract(b"a,b\n1,2\n", ExtractOptions())
    assert error.value.kind == "corrupt"


_CELL = cells('",;')


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_CELL, min_size=3, max_size=3), min_size=1, max_size=5))
def test_any_csv_cells_keep_rows_columns_and_words(rows):
    import csv
    import re
    rows = [["h1", "h2", "h3"]] + rows
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    lines = extract_csv(out.getvalue().encode(), ExtractOptions()).text.splitlines()
    kept = [row for row in rows if any(c.strip() for c in row)]
    assert len(lines) == len(kept) + 1
    for line, row in zip([lines[0]] + lines[2:], kept):
        cells = re.split(r"(?<!\\)\|", line[1:-1])
        assert len(cells) == 3, line
        for text, markdown in zip(row, cells):
            for word in text.split():
                assert word.replace("\\", "\\\\").replace("|", "\\|") in markdown


def test_a_utf16_csv_with_its_byte_order_mark_is_read():
    data = "name\tcity\nAda\tLondon\n".encode("utf-16")
    assert "| Ada | London |" in extract_csv(data, ExtractOptions()).text
