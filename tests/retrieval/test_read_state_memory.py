"""A long-lived reader's memory levels off: what a snapshot's read state keeps of a replaced version goes with it."""
import gc
import tracemalloc
from pathlib import Path

import pytest

from pipelines.ingest_run import run_ingest
from rag.query.workspace import Workspace
from rag.store.settings import IngestSettings

EDITED = Path("operations") / "time-sync.md"
WORDS = ["gateway", "firmware", "modbus", "cache", "offline", "heartbeat", "tunnel", "rotation", "secure", "boot"]
READ_STATE = ("*/rag/retrieval/read_state.py", "*/rag/retrieval/lexical.py")


def revise(corpus: Path, round_: int) -> int:
    """A new version of one document: the same words as the last one, in another order; its length in characters."""
    path = corpus / EDITED
    head, body = path.read_text().split("\n---\n", 1)
    head = "\n".join(line for line in head.splitlines() if not line.startswith("version:"))
    body = body.split("\n\nRevision notes:")[0]
    # long: numpy's cache of small freed buffers, which tracemalloc still counts, comes and goes by a few KB a round
    notes = " ".join(WORDS[(i * (round_ + 1)) % len(WORDS)] for i in range(3000))
    path.write_text(f"{head}\nversion: \"2026.{round_}\"\n---\n{body}\n\nRevision notes: {notes}.\n")
    return len(body) + len(notes)


def held_by_read_state() -> int:
    """Bytes still allocated by a read-state build or read (texts, members, vectors, BM25 token ids and postings)."""
    gc.collect()
    traces = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, f, all_frames=True)
                                                        for f in READ_STATE])
    return sum(t.size for t in traces.traces)


@pytest.mark.slow
def test_a_reader_following_publishes_of_a_changed_document_holds_no_more_after_each(corpus, workspace, embedder):
    """Each publish replaces the document's text (same words, same length): the reader reads every current text and
    every current unit's rows, and its read state then holds what it held before, not one more version's text."""
    settings = IngestSettings(workspace=str(workspace), sources=[str(corpus)])
    run_ingest(settings)
    reader = Workspace(workspace, embedder=embedder)
    tracemalloc.start(10)
    try:
        held, size = [], 0
        for round_ in range(5):
            size = revise(corpus, round_)
            run_ingest(settings)
            snap = reader.snapshot()
            snap.warm()
            snap.texts([row for rows in snap.current.members.values() for row in rows])
            snap.unit_rows(list(snap.current.members))
            held.append(held_by_read_state())
    finally:
        tracemalloc.stop()
        reader.close()
    assert len(snap.current.versions) > 10
    # three more versions replaced after the second round: kept, their token ids alone would hold more than one text
    assert held[-1] - held[1] < size, held
