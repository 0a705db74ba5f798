"""A folder of PDF, Word and HTML files as a user ingests it: one document per file, the structure kept, each bad
file quarantined with its reason, the last good version of a file that stops parsing still served, and answers
that say on which page they were found."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pdf_samples
import pytest
from conftest import REPO

from rag.sources.formats import ExtractError
from rag.sources.formatted import read_bytes
from rag.sources.loaders import load_sources


def rag(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


def manual_docx(path: Path, interval: str = "60 seconds") -> None:
    import docx

    doc = docx.Document()
    doc.core_properties.title = "Gateway manual"
    doc.add_heading("Gateway manual", 1)
    doc.add_heading("Heartbeat", 2)
    doc.add_paragraph(f"A gateway publishes its heartbeat every {interval}.")
    table = doc.add_table(rows=3, cols=2)
    for i, row in enumerate([["Setting", "Value"], ["interval", interval], ["timeout", "180 seconds"]]):
        for j, value in enumerate(row):
            table.cell(i, j).text = value
    doc.save(path)


@pytest.fixture()
def folder(tmp_path):
    docs = tmp_path / "docs"
    (docs / "finance").mkdir(parents=True)
    (docs / "finance" / "report.pdf").write_bytes(pdf_samples.report())
    (docs / "finance" / "locked.pdf").write_bytes(pdf_samples.encrypted())
    (docs / "finance" / "scan.pdf").write_bytes(pdf_samples.scanned("the quick brown fox"))
    (docs / "finance" / "broken.pdf").write_bytes(pdf_samples.report()[:3000])
    manual_docx(docs / "manual.docx")
    (docs / "wiki.html").write_text("<html><head><title>Support rota</title><script>document.write('INJECTED')"
                                    "</script></head><body><h1>Support rota</h1><p>The rota changes weekly.</p>"
                                    "<ul><li>Alice</li><li>Bob</li></ul></body></html>")
    return docs


def test_each_file_is_one_document_with_its_structure_and_each_bad_file_one_reason(folder):
    loaded = load_sources([folder], default_acl=("staff",))
    docs = {d.doc_id: d for d in loaded.documents}
    assert set(docs) == {"finance/report", "manual", "wiki"}
    assert docs["manual"].title == "Gateway manual"
    assert "## Heartbeat" in docs["manual"].text and "| interval | 60 seconds |" in docs["manual"].text
    assert "- Alice" in docs["wiki"].text and "INJECTED" not in docs["wiki"].text
    assert "<!-- location: p.3 -->" in docs["finance/report"].text
    reasons = {Path(r.source_path).name: r.reason for r in loaded.rejected}
    assert reasons["locked.pdf"].startswith("encrypted")
    assert reasons["scan.pdf"].startswith("no text layer; OCR is not enabled")
    assert reasons["broken.pdf"].startswith("corrupt")
    assert all("\n" not in r for r in reasons.values())
    assert {r.doc_id for r in loaded.rejected} == {"finance/locked", "finance/scan", "finance/broken"}
    assert [w.reason for w in loaded.warnings] == ["scripts dropped (never run)"]
    assert loaded.formats[".pdf"].files == 4 and loaded.formats[".pdf"].pages >= 4
    assert loaded.formats[".docx"].files == loaded.formats[".html"].files == 1


def test_a_file_that_changes_while_it_is_read_is_refused(folder, monkeypatch):
    import rag.sources.formatted as formatted

    opened = formatted.open_no_follow

    def open_then_write(path):
        """The file is appended to by another process between the read and the check after it."""
        handle = opened(path)
        read = handle.read

        def read_then_append(n=-1):
            data = read(n)
            with open(path, "ab") as other_writer:
                other_writer.write(b"appended while read")
            return data
        handle.read = read_then_append
        return handle

    monkeypatch.setattr(formatted, "open_no_follow", open_then_write)
    with pytest.raises(ExtractError) as err:
        read_bytes(folder / "manual.docx")[0]
    assert err.value.kind == "changed while read"
    loaded = load_sources([folder / "manual.docx"], default_acl=("staff",))
    assert loaded.documents == [] and loaded.rejected[0].reason.startswith("changed while read")


@pytest.mark.slow
def test_rag_ingest_quarantines_with_reasons_keeps_the_last_good_version_and_cites_pages(folder, tmp_path):
    ws = str(tmp_path / "ws")
    first = rag("ingest", "--source", str(folder), "--workspace", ws, "--default-acl", "staff")
    assert first.returncode == 0, first.stderr
    assert "quarantined " in first.stdout and "encrypted PDF (password protected)" in first.stdout
    assert "Traceback" not in first.stdout + first.stderr

    hit = json.loads(rag("retrieve", "Which region sold 143 units?", "--workspace", ws, "--groups", "staff",
                         "--json").stdout)["items"][0]
    assert (hit["doc_id"], hit["location"]) == ("finance/report", "p.3")
    good = hit["doc_version"]   # a file without front matter is versioned by its modification time
    assert re.fullmatch(r"\d{4}\.\d\d\.\d\d\.\d{6}", good)

    manual_docx(folder / "manual.docx", interval="90 seconds")   # a new version that reads fine …
    (folder / "finance" / "report.pdf").write_bytes(pdf_samples.report()[:2500])   # … and one that no longer does
    second = rag("ingest", "--source", str(folder), "--workspace", ws, "--default-acl", "staff", "--json")
    counts = json.loads(second.stdout)
    assert counts["documents"] == 3
    [line] = [q for q in counts["quarantine_lines"] if "report.pdf" in q]
    assert "corrupt" in line and f"last good version, v{good}, is still served" in line

    asked = rag("ask", "Which region sold 143 units?", "--workspace", ws, "--groups", "staff", "--reader",
                "extractive")
    assert asked.returncode == 0, asked.stderr
    assert f"finance/report v{good} p.3" in asked.stdout
    manual = json.loads(rag("retrieve", "How often does a gateway publish its heartbeat?", "--workspace", ws,
                            "--groups", "staff", "--json").stdout)["items"]
    assert any("90 seconds" in i["text"] for i in manual if i["doc_id"] == "manual")


@pytest.mark.slow
def test_the_ui_shows_formats_read_refusals_by_kind_and_the_last_good_version_served(folder, tmp_path):
    import dagster as dg

    from assets.ingest import ingest_assets, ingest_checks
    from pipelines.workspace_resources import workspace_resources
    from rag.store.settings import IngestSettings

    def materialize():
        with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
            result = dg.materialize([*ingest_assets, *ingest_checks], instance=instance, resources=workspace_resources(
                IngestSettings(workspace=str(tmp_path / "ws"), sources=[str(folder)], default_acl=("staff",))))
        [event] = [e for e in result.get_asset_materialization_events()
                   if e.asset_key.path[-1] == "source_documents"]
        return {k: v.value for k, v in event.materialization.metadata.items()}

    meta = materialize()
    assert "| pdf | 4 |" in meta["formats_read"] and "| docx | 1 |" in meta["formats_read"]
    kinds = meta["quarantined_by_kind"]
    assert all(f"| {kind} | 1 |" in kinds for kind in ("encrypted", "no text layer", "corrupt"))
    assert "scripts dropped (never run)" in meta["quarantine"]
    assert meta["last_good_served"] == 0

    (folder / "finance" / "report.pdf").write_bytes(pdf_samples.report()[:2500])
    meta = materialize()
    assert meta["last_good_served"] == 1
    served = [line for line in meta["quarantine"].splitlines() if "finance/report.pdf |" in line]
    assert len(served) == 1 and " v" in served[0].rsplit("|", 2)[1] and "| pdf | 1 |" in meta["formats_read"]
