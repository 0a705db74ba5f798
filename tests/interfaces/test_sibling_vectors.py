"""Vectors re-used across partitions through real partition runs: a run opens only the indexes of the partitions
whose id record names the documents it embeds, so a moved document is embedded once and new documents open none."""
import json
import shutil
from pathlib import Path

import pytest

from pipelines.cli import main
from rag.sources.partitions import partition_lance_uri
from resources import VectorStoreResource


def doc(path: Path, doc_id: str, text: str, title: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {doc_id}\ntitle: {title or doc_id}\nacl: [staff]\n---\n{text}\n")


def ingest(capsys, src: Path, ws: Path, *partitions: str) -> dict:
    flags = [a for p in partitions for a in ("--partition", p)] or ["--partitioned"]
    assert main(["ingest", "--source", str(src), "--workspace", str(ws), "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)["partitions"]


def read(runs: dict, field: str) -> dict:
    return {key: run[field] for key, run in runs.items()}


@pytest.mark.slow
def test_a_moved_document_opens_only_the_partition_that_held_it_and_new_documents_open_none(tmp_path, capsys):
    src, ws = tmp_path / "src", tmp_path / "ws"
    doc(src / "eng" / "deploys.md", "deploys", "Deploys happen on Tuesdays after the change board.")
    doc(src / "hr" / "leave.md", "leave", "Annual leave is 30 days for every employee.")
    doc(src / "ops" / "pager.md", "pager", "The pager rotation changes every Monday at nine.")
    doc(src / "ops" / "backup.md", "backup", "Backups are restored in a drill every quarter.")
    doc(src / "eng" / "builds.md", "builds", "Release builds are signed by the build service.")
    assert read(ingest(capsys, src, ws), "sibling_indexes") == {"src/eng": 0, "src/hr": 0, "src/ops": 0}

    # A new partition beside three published ones, with documents no other partition publishes: no index opened.
    doc(src / "finance" / "budget.md", "budget", "The travel budget is approved by the finance lead each quarter.")
    new = ingest(capsys, src, ws, "src/finance")["src/finance"]
    assert (new["sibling_indexes"], new["embedded"]) == (0, new["subchunks"]) and new["embedded"] > 0

    # pager moves to finance, which runs while ops still publishes it; deploys moves to hr, which runs after eng
    # dropped it; a copy of pager's text under another id is embedded again.
    shutil.move(src / "ops" / "pager.md", src / "finance" / "pager.md")
    shutil.move(src / "eng" / "deploys.md", src / "hr" / "deploys.md")
    doc(src / "eng" / "rota.md", "rota", "The pager rotation changes every Monday at nine.", title="pager")
    runs = ingest(capsys, src, ws)
    assert list(runs) == ["src/eng", "src/finance", "src/hr", "src/ops"]
    assert read(runs, "sibling_indexes") == {"src/eng": 0, "src/finance": 1, "src/hr": 1, "src/ops": 0}
    assert read(runs, "embedded") == {"src/eng": 1, "src/finance": 0, "src/hr": 0, "src/ops": 0}   # the copy

    store = VectorStoreResource(uri=str(ws.resolve() / "lancedb"), workspace=str(ws.resolve()))
    lance = str(ws.resolve() / "lancedb")
    assert store.sibling_uris("src/hr", ["deploys", "leave"]) == [partition_lance_uri(lance, "src/eng")]
    assert store.sibling_uris("src/finance", ["pager"]) == [partition_lance_uri(lance, "src/ops")]
    assert store.sibling_uris("src/hr", ["budget"]) == [partition_lance_uri(lance, "src/finance")]
    assert store.sibling_uris("src/hr", ["leave", "never-published"]) == []
    assert store.sibling_uris(None, ["deploys"]) == []   # a whole workspace has no siblings
