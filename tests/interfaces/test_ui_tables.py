"""Every table the ingest assets put in their metadata fits the Dagster UI's metadata box at a 1,440 px screen
(about 900 px wide), so nobody scrolls sideways to find the column they need.

The rule, measured in characters of the UI's 13 px font (7.5 px each on average), each column padded by 24 px:
- a table has at most 6 columns, and the sum of its columns' widths plus padding is at most 900 px;
- a column of a `MetadataValue.table` never wraps: its width is its widest cell or its name;
- a Markdown table may wrap at spaces: a header counts as its longest word, and one column (the long text, such as
  a reason) may wrap at 40 characters; every other column, and every word of the wrapping one, counts whole.
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

BOX_PX, CHAR_PX, PAD_PX, MAX_COLUMNS, WRAP_CHARS = 900, 7.5, 24, 6, 40


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


def too_wide(header: list[str], rows: list[list[str]], wraps: bool) -> str | None:
    """Why this table does not fit the box (None when it fits), by the rule in the module's docstring."""
    if len(header) > MAX_COLUMNS:
        return f"{len(header)} columns (at most {MAX_COLUMNS})"
    columns = list(zip(header, *rows)) if rows else [(h,) for h in header]
    widths, wrapping = [], 0
    for name, *cells in columns:
        longest_word = max((len(w) for c in cells for w in c.split()), default=0)
        head = max((len(w) for w in name.split()), default=0) if wraps else len(name)
        widest = max((len(c) for c in cells), default=0)
        if wraps and widest > WRAP_CHARS and " " in " ".join(cells):
            wrapping += 1
            widest = max(WRAP_CHARS, longest_word)
        widths.append(max(head, widest))
    if wrapping > 1:
        return f"{wrapping} columns of long text (one may wrap)"
    px = sum(widths) * CHAR_PX + PAD_PX * len(widths)
    return f"{px:.0f} px wide (columns {dict(zip(header, widths))} characters)" if px > BOX_PX else None


def tables_in(metadata: dict) -> dict[str, tuple[list[str], list[list[str]], bool]]:
    """Every table of one materialisation's metadata: name → (header, rows, may wrap)."""
    found = {}
    for key, value in metadata.items():
        if isinstance(value, dg.TableMetadataValue):
            names = [c.name for c in value.schema.columns]
            found[key] = (names, [[str(r.data.get(n, "")) for n in names] for r in value.records], False)
        elif isinstance(value, dg.MarkdownMetadataValue):
            for i, (header, rows) in enumerate(markdown_tables(value.md_str or "")):
                found[f"{key}[{i}]"] = (header, rows, True)
    return found


def materialised(result) -> dict[str, dict]:
    return {"/".join(e.asset_key.path) + (f" {e.partition}" if e.partition else ""): e.materialization.metadata
            for e in result.get_asset_materialization_events()}


def test_the_rule_refuses_the_tables_that_did_not_fit():
    """The two tables a 1,600 px screen cut off, as they were: the rule must refuse both."""
    old_totals = ["partition", "documents_current", "cross_collection_links", "missing_links", "units", "subchunks",
                  "size_on_disk", "superseded", "deleted", "links_within", "last_published"]
    assert too_wide(old_totals, [["corpus/installation", "14", "6", "0", "9", "310", "1.4 MiB", "2", "0", "8",
                                  "2026-12-02 02:00:31"]], wraps=False)
    path = "/home/team/dagster/.rag/sources/incoming/2026/scans/board-minutes-signed.pdf"
    assert too_wide(["reason", "input", "doc id", "served instead"],
                    [["the PDF has no text layer (a scan); OCR is off", path, "board-minutes", ""]], wraps=True)
    assert too_wide(["a", "b"], [["x " * 30, "y " * 30]], wraps=True) == "2 columns of long text (one may wrap)"
    assert too_wide(["reason", "file"], [["no text layer " * 5, "scans/minutes.pdf"]], wraps=True) is None


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
    assert {"source_documents quarantine[0]", "workspace_totals by_partition",
            "workspace_totals links_and_history_by_partition", "subchunk_index storage_by_part",
            "long_units missing_links_by_document[0]"} <= set(tables)
    assert len(tables["source_documents quarantine[0]"][1]) >= 15   # the quarantine case has rows to measure
    wide = {name: why for name, (header, rows, wraps) in tables.items() if (why := too_wide(header, rows, wraps))}
    assert not wide, wide
