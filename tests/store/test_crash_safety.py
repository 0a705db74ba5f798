"""A publishing process killed with SIGKILL at any point leaves a state the next run repairs."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO

from pipelines.cli import main
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex


def start_ingest(corpus, workspace) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(corpus),
                             "--workspace", str(workspace), "--json"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def bump(corpus, round_: int) -> None:
    """A new version with new text, so every run has units to re-embed and rows to retire."""
    doc = corpus / "operations" / "capacity-limits.md"
    text = doc.read_text()
    head, body = text.split("\n---\n", 1)
    head = "\n".join(f'version: "{3000 + round_}"' if line.startswith("version:") else line
                     for line in head.splitlines())
    doc.write_text(f"{head}\n---\n{body}\nRevision note {round_}: the spare-capacity threshold is {40 + round_} percent.\n")


@pytest.mark.slow
def test_runs_killed_at_random_points_are_repaired_by_the_next_run(corpus, workspace, capsys):
    rng = random.Random(7)
    # Every killed run is a process of its own; the first publish and each repairing run are the CLI's run in this
    # process (its vectors memoised), which knows of the killed one only what it left on disk.
    argv = ["ingest", "--source", str(corpus), "--workspace", str(workspace), "--json"]
    assert main(argv) == 0
    for round_ in range(4):   # two rounds that add a document, two that only re-version one
        bump(corpus, round_)
        if round_ % 2:
            (corpus / "security" / f"note-{round_}.md").write_text(
                f"---\nid: note-{round_}\ntitle: Note {round_}\nacl: [security-team]\n---\nShift note {round_}.\n")
        proc = start_ingest(corpus, workspace)
        time.sleep(rng.uniform(0.5, 9.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

        capsys.readouterr()
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["checks_passed"] is True

        catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
        for finding in (consistency.documents_in_exactly_one_unit(catalog),
                        consistency.index_matches_current_units(catalog, index),
                        consistency.no_stale_rows(catalog, index)):
            assert finding.passed, finding.examples
        [(version,)] = catalog.rows("SELECT version FROM documents WHERE doc_id = 'capacity-limits' "
                                    "AND status = 'current'")
        assert version == str(3000 + round_)
        assert catalog.rows("SELECT count(*) FROM units WHERE status = 'pending'") == [(0,)]
        catalog.close()
