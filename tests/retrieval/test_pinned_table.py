"""A reader reads its pinned table version (or an as-of read's) with Lance alone; LanceDB only for the rest."""
import subprocess
import sys

import pyarrow as pa
from conftest import REPO

from pipelines.ingest_run import run_ingest
from rag.store.index import TABLE, SubchunkIndex
from rag.store.lance_table import PinnedTable
from rag.store.settings import IngestSettings

_READ_NOW_THEN_AS_OF = """
import sys
from rag.retrieval.callers import Caller
from rag.query.workspace import Workspace
ws, support = Workspace(sys.argv[1]), Caller(frozenset({"support"}))
now = ws.retrieve("longrag", support, "How long does the offline cache hold telemetry?", 2000)
print("lancedb" in sys.modules, " ".join(sorted(i.doc_id for i in now.items)))
past = ws.retrieve("longrag", support, "How long does the offline cache hold telemetry?", 2000,
                   as_of=ws.resolve_as_of("publish:1"))
print("lancedb" in sys.modules, " ".join(sorted(i.doc_id for i in past.items)))
"""


def test_neither_a_current_nor_an_as_of_read_imports_lancedb(tmp_path, corpus):
    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    out = subprocess.run([sys.executable, "-c", _READ_NOW_THEN_AS_OF, str(ws)], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (now_imported, now_ids), (past_imported, past_ids) = (line.split(" ", 1) for line in out.stdout.splitlines())
    assert now_imported == "False" and past_imported == "False"  # both score the version's vectors in memory
    assert "edge-offline-cache" in now_ids.split() and "edge-offline-cache" in past_ids.split()


def test_a_pinned_table_keeps_its_version_while_a_writer_adds_rows(tmp_path, corpus):
    import lancedb  # here, not at module level: `import lancedb` costs each xdist worker that collects this ~2 CPU s

    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    index = SubchunkIndex(ws / "lancedb")
    version, rows = index.version, index.count()
    pinned = PinnedTable(str(ws / "lancedb"), TABLE, version)
    extra = index.table.to_lance().to_table(limit=3)
    index.table.add(extra.set_column(extra.schema.get_field_index("doc_version"), "doc_version",
                                     pa.array(["added"] * extra.num_rows)))
    assert index.table.count_rows() == rows + 3
    assert (pinned.version, pinned.count_rows(), pinned.to_lance().count_rows()) == (version, rows, rows)
    assert pinned.schema.metadata == lancedb.connect(str(ws / "lancedb")).open_table(TABLE).schema.metadata
    found = pinned.to_arrow()  # LanceDB's API, at the pinned version
    assert found.num_rows == rows and "added" not in found.column("doc_version").to_pylist()
