"""bench/formats.py's scores: each is the share of the reference's items the extraction keeps, as its docstring
defines them, and the generated corpus's references score 1 against themselves."""
import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.formats import summarise
from bench.formats_corpus import make_spec, markdown, render
from bench.formats_score import headings, score, table_cells, words

REFERENCE = """# Annual Report

Revenue grew by 12 percent.

## Sales by Region

- north east
1. south west

| Region | Units |
|---|---|
| North a\\|b | 1200 |
| South | 950 |
"""


def test_words_drop_the_markup_and_keep_the_reading_order():
    assert words(REFERENCE) == ["annual", "report", "revenue", "grew", "by", "12", "percent", "sales", "by",
                                "region", "north", "east", "1", "south", "west", "region", "units", "north", "a", "b",
                                "1200", "south", "950"]
    assert words("**hel**lo *big* world") == ["hello", "big", "world"]
    assert words("a line broken before\n1805. the year") == ["a", "line", "broken", "before", "1805", "the", "year"]
    assert headings(REFERENCE) == [(1, "annual report"), (2, "sales by region")]
    assert table_cells(REFERENCE) == ["region", "units", "north a|b", "1200", "south", "950"]


def test_the_reference_against_itself_scores_one_everywhere():
    assert score(REFERENCE, REFERENCE) == {"words": 1.0, "pairs": 1.0, "cells": 1.0, "cells_in_text": 1.0,
                                           "headings": 1.0, "headings_level": 1.0, "extra": 0.0}


def test_a_lost_sentence_costs_its_words_and_the_pairs_that_touch_it():
    s = score(REFERENCE, REFERENCE.replace("Revenue grew by 12 percent.\n", ""))
    assert s["words"] == pytest.approx(18 / 23)   # 5 of 23 words lost
    assert s["pairs"] == pytest.approx(16 / 22)   # 6 of 22 pairs: 4 inside, 2 across its edges
    assert s["cells"] == 1.0 and s["headings"] == 1.0


def test_words_are_a_multiset():
    assert score("by by by x", "by x")["words"] == pytest.approx(2 / 4)
    assert score("by x", "by by by x")["extra"] == pytest.approx(2 / 4)


def test_shuffled_order_keeps_the_words_but_not_the_pairs():
    s = score("alpha beta gamma delta", "delta gamma beta alpha")
    assert s["words"] == 1.0 and s["pairs"] == 0.0


def test_a_table_flattened_to_text_keeps_its_cells_in_the_text_only():
    flat = "# Annual Report\n\nRegion Units North a|b 1200 South 950"
    s = score("| Region | Units |\n|---|---|\n| North a\\|b | 1200 |\n| South | 950 |", flat)
    assert s["cells"] == 0.0 and s["cells_in_text"] == 1.0
    assert score("| Region | Units |\n|---|---|\n| Big North | 9 |", "Region Units North Big 9")["cells_in_text"] == 0.75


def test_a_heading_counts_only_as_a_heading_line_and_its_level_is_scored_apart():
    assert score("## Sales by Region\n\ntext", "Sales by Region\n\ntext")["headings"] == 0.0
    s = score("## Sales by Region\n\ntext", "# Sales by region\n\ntext")
    assert s["headings"] == 1.0 and s["headings_level"] == 0.0


def test_a_score_with_nothing_to_find_is_none_and_an_empty_extraction_scores_zero():
    s = score("just words", "")
    assert s["cells"] is None and s["headings"] is None and s["extra"] is None
    assert s["words"] == 0.0 and s["pairs"] == 0.0


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 29), st.integers(0, 3))
def test_every_generated_reference_scores_one_against_itself(i, seed):
    ref = markdown(make_spec(i, seed).blocks)
    s = score(ref, ref)
    assert s["words"] == s["pairs"] == s["cells"] == s["headings"] == s["headings_level"] == 1.0


def test_the_csv_reference_is_what_the_file_holds():
    data, ref = render(make_spec(3), "csv")
    rows = list(csv.reader(io.StringIO(data.decode())))
    assert table_cells(ref) == [" ".join(c.split()).casefold() for row in rows for c in row if c.strip()]


def _row(fmt, pages, **methods):
    return {"format": fmt, "source": "generated", "pages": pages,
            **{m: {"error": None, "cpu_s": s, "words": w, "words_out": 9} for m, (s, w) in methods.items()}}


def test_speed_is_pages_per_cpu_second_over_the_files_every_method_read():
    rows = [_row("pdf", 4, ours=(0.5, 1.0), anchor=(1.0, 0.5)), _row("pdf", 6, ours=(0.5, 1.0), anchor=(1.0, 0.7))]
    rows.append({**_row("pdf", 10, ours=(0.2, 1.0)),
                 "anchor": {"error": "broken", "cpu_s": None, "words": 0.0, "words_out": 0}})
    rows.append({**_row("pdf", None, anchor=(0.1, 0.5)),
                 "ours": {"error": "refused (encrypted): encrypted PDF", "cpu_s": None, "words_out": 0}})
    rows.append({**_row("pdf", 2, ours=(0.1, None), anchor=(0.1, None)), "source": "real"})
    rows[-1]["anchor"]["words_out"] = 0
    summary = summarise(rows, ["ours", "anchor"], ["pdf"])
    s = summary["pdf"]
    assert s["pages"] == 10 and s["timed_files"] == 2
    assert s["methods"]["ours"]["speed"] == 10.0 and s["methods"]["anchor"]["speed"] == 5.0
    assert s["methods"]["anchor"]["words"] == pytest.approx(1.7 / 4)
    assert {k: s["methods"]["anchor"][k] for k in ("failed", "refused", "empty")} == {"failed": 1, "refused": 0,
                                                                                       "empty": 0}
    assert {k: s["methods"]["ours"][k] for k in ("failed", "refused", "empty")} == {"failed": 0, "refused": 1,
                                                                                     "empty": 0}
    real = summary["pdf real"]
    assert real["pages"] == 2 and real["methods"]["anchor"]["empty"] == 1 and real["methods"]["ours"]["speed"] == 20.0


@pytest.mark.parametrize("i", range(6))
def test_every_reference_word_is_on_the_generated_pdfs_pages(i):
    """The reference is what the PDF holds: no word is cut inside a narrow cell or lost off a page."""
    import pypdfium2

    data, ref = render(make_spec(i), "pdf")
    doc = pypdfium2.PdfDocument(data)
    text = "\n".join(page.get_textpage().get_text_range() for page in doc)
    assert score(ref, text)["words"] == 1.0
    assert f"Page {len(doc)}" in text
