"""Every table the ingest assets put in their metadata fits the Dagster UI's metadata box at a 1,440 px screen, so
nobody scrolls sideways to find the column they need.

The rule, with Dagster 1.13's sizes at 1,440 px (test_ui_browser.py measures the real page in Chromium):
- the metadata box is 784 px: a key column as wide as the longest key (8.4 px a character, 24 px padding), a
  timestamp column of at least 143 px, and the value column, padded by 24 px, with what is left;
- a `MetadataValue.table` and a Markdown value under 1,000 characters show inside the value column; a longer
  Markdown value opens in a dialog whose table may be 1,100 px wide;
- a table is the sum of its columns, each its widest cell (8.4 px a character) or header (7.2 px a character for a
  `MetadataValue.table`'s names, which do not wrap) plus 16 px; a Markdown table wraps at spaces: its headers count
  as their longest word, and one column of long text (a reason) may wrap at 40 characters.
"""
from __future__ import annotations

import re
import shutil

import dagster as dg
import pytest
from conftest import SAMPLES

from assets.ingest import ingest_assets, ingest_checks
from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings

BOX_PX, TIMESTAMP_PX, KEY_PAD_PX, VALUE_PAD_PX, DIALOG_PX = 784, 143, 24, 24, 1100
CELL_CHAR_PX, HEADER_CHAR_PX, COLUMN_PAD_PX, WRAP_CHARS, INLINE_MARKDOWN = 8.4, 7.2, 16, 40, 1000


def value_column_px(metadata: dict) -> float:
    """The width a table inside the value column may take, given the asset's longest metadata key."""
    key = max(len(k) for k in metadata) * CELL_CHAR_PX + KEY_PAD_PX
    return BOX_PX - key - TIMESTAMP_PX - VALUE_PAD_PX


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of each Markdown table in `text`."""
    tables, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif block:
            tables.append((block[0], [r for r in block[2:]]))
            block = []
    return tables


def too_wide(header: list[str], rows: list[list[str]], wraps: bool, room: float) -> str | None:
    """Why this table does not fit `room` px (None when it fits), by the rule in the module's docstring."""
    columns = list(zip(header, *rows)) if rows else [(h,) for h in header]
    widths, wrapping = [], 0
    for name, *cells in columns:
        head = max((len(w) for w in name.split()), default=0) * CELL_CHAR_PX if wraps else len(name) * HEADER_CHAR_PX
        widest = max((len(c) for c in cells), default=0)
        if wraps and widest > WRAP_CHARS and " " in " ".join(cells):
            wrapping += 1
            widest = max([WRAP_CHARS] + [len(w) for c in cells for w in c.split()])
        widths.append(round(max(head, widest * CELL_CHAR_PX)) + COLUMN_PAD_PX)
    if wrapping > 1:
        return f"{wrapping} columns of long text (one may wrap)"
    return f"{sum(widths)} px wide in {room:.0f} px (columns {dict(zip(header, widths))})" if sum(widths) > room \
        else None


def tables_in(metadata: dict) -> dict[str, tuple[list[str], list[list[str]], bool, float]]:
    """Every table of one materialisation's metadata: name → (header, rows, may wrap, room in px)."""
    found, inline = {}, value_column_px(metadata)
    for key, value in metadata.items():
        if isinstance(value, dg.TableMetadataValue):
            names = [c.name for c in value.schema.columns]
            found[key] = (names, [[str(r.data.get(n, "")) for n in names] for r in value.records], False, inline)
        elif isinstance(value, dg.MarkdownMetadataValue):
            room = inline if len(value.md_str or "") < INLINE_MARKDOWN else DIALOG_PX
            for i, (header, rows) in enumerate(markdown_tables(value.md_str or "")):
                found[f"{key}[{i}]"] = (header, rows, True, room)
    return found


def materialised(result) -> dict[str, dict]:
    return {"/".join(e.asset_key.path) + (f" {e.partition}" if e.partition else ""): e.materialization.metadata
            for e in result.get_asset_materialization_events()}


def test_the_rule_refuses_the_tables_that_did_not_fit():
    """Tables the UI cut off, as they were: the rule must refuse each, and pass a narrow one."""
    old_totals = ["partition", "documents_current", "cross_collection_links", "missing_links", "units", "subchunks",
                  "size_on_disk", "superseded", "deleted", "links_within", "last_published"]
    row = ["corpus/installation", "14", "6", "0", "9", "310", "1.4 MiB", "2", "0", "8", "2026-12-02 02:00:31"]
    assert too_wide(old_totals, [row], wraps=False, room=value_column_px({"links_and_history_by_partition": 1}))
    assert too_wide(old_totals[:6], [row[:6]], wraps=False, room=value_column_px({"cross_collection_links": 1}))
    path = "/home/team/dagster/.rag/sources/incoming/2026/scans/board-minutes-signed.pdf"
    assert too_wide(["reason", "input", "doc id", "served instead"],
                    [["the PDF has no text layer (a scan); OCR is off " * 3, path, "board-minutes", ""]],
                    wraps=True, room=DIALOG_PX)
    assert too_wide(["a", "b"], [["x " * 30, "y " * 30]], wraps=True, room=DIALOG_PX) == \
        "2 columns of long text (one may wrap)"
    assert too_wide(["reason", "file"], [["no text layer " * 5, "scans/minutes.pdf"]], wraps=True, room=DIALOG_PX) \
        is None
    assert value_column_px({"missing_links_by_document": 1}) == pytest.approx(784 - 234 - 143 - 24)


@pytest.mark.slow
def test_every_metadata_table_of_the_ingest_assets_fits_the_box(tmp_path, corpus):
    bad = shutil.copytree(SAMPLES / "bad", tmp_path / "incoming" / "quarantine-examples-from-a-deep-folder")
    (tmp_path / "home").mkdir()
    metadata = {}
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        settings = IngestSettings(workspace=tmp_path / "ws", sources=[corpus, bad], default_acl=["support"])
        result = dg.materialize([*ingest_assets, *ingest_checks], instance=instance,
                                resources=workspace_resources(settings))
        assert result.success
        metadata |= materialised(result)

        defs = build_definitions(workspace_resources(IngestSettings(workspace=tmp_path / "parts", sources=[corpus],
                                                                    partitioned=True)))
        keys = sorted(s for s in ("corpus/installation", "corpus/operations", "corpus/security"))
        instance.add_dynamic_partitions("collections", keys)
        for key in keys:
            metadata |= materialised(defs.resolve_job_def("ingest").execute_in_process(instance=instance,
                                                                                       partition_key=key))
        totals = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection={dg.AssetKey("workspace_totals")})
        metadata |= materialised(totals.execute_in_process(instance=instance))

    tables = {f"{asset} {name}": table for asset, meta in metadata.items() for name, table in tables_in(meta).items()}
    assert {"source_documents quarantine[0]", "workspace_totals by_partition", "workspace_totals links_by_partition",
            "workspace_totals storage_by_partition", "workspace_totals published_by_partition",
            "subchunk_index storage_by_part", "long_units missing_links_by_document[0]"} <= set(tables)
    assert len(tables["source_documents quarantine[0]"][1]) >= 15   # the quarantine case has rows to measure
    wide = {name: why for name, (header, rows, wraps, room) in tables.items()
            if (why := too_wide(header, rows, wraps, room))}
    assert not wide, wide
