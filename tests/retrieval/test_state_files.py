"""A snapshot's read state is written once as files and mapped by every later worker: the same answers, no rebuild,
no half-written part ever read, one build when workers race, old snapshots' files removed, a folder per ANN setting."""
import mmap
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from conftest import SAMPLES
from hypothesis import given
from hypothesis import strategies as st

from pipelines.ingest_run import run_ingest
from rag.query.workspace import Workspace
from rag.retrieval import read_state
from rag.retrieval.callers import Caller
from rag.retrieval.read_state import WARM_PARTS
from rag.retrieval.segments import Segments
from rag.retrieval.state_files import KEPT_STATES, STATE_DIR, Arrays, StateFiles
from rag.retrieval.strings import Strings, column_of, concat_columns, strings_of, union_of
from rag.store.settings import IngestSettings

CALLERS = [Caller(frozenset({"support"})), Caller(frozenset({"partners"})),
           Caller(frozenset({"field-engineering", "security-team"}))]
QUESTIONS = ["How long does the offline cache hold telemetry?", "How are certificates rotated?"]


def mapped(array: np.ndarray | Segments) -> bool:
    """Whether the array's memory is a mapped file (each segment's, for segments)."""
    if isinstance(array, Segments):
        return all(map(mapped, array.arrays))
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, mmap.mmap)


def answers(reader: Workspace, method: str = "longrag") -> list:
    return [[(i.doc_id, i.doc_version, i.ranges, i.score, i.text) for i in reader.retrieve(method, c, q, 1500).items]
            for c in CALLERS for q in QUESTIONS]


def refuse(*_args, **_kwargs):
    raise AssertionError("a worker rebuilt a part whose files were written")


@pytest.mark.slow
def test_a_second_worker_maps_what_the_first_wrote_and_answers_alike(corpus, workspace, embedder, monkeypatch):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    first = Workspace(workspace, embedder=embedder)
    expected = {m: answers(first, m) for m in ("longrag", "longrag-extract", "longrag-units", "shortchunk")}
    first.snapshot().warm()
    written = {p.name for p in (workspace / STATE_DIR).glob("*/*") if p.is_dir()}
    assert written == set(WARM_PARTS) - {"member_table", "lookups"}  # the member table lies in the current part
    for name in ("current_arrays_of", "current_state", "lexical_index", "load_state", "code_rows", "unit_codes"):
        monkeypatch.setattr(read_state, name, refuse)
    second = Workspace(workspace, embedder=embedder)
    assert {m: answers(second, m) for m in expected} == expected
    snap = second.snapshot()
    assert mapped(snap.vectors.matrix) and mapped(snap.vectors.quantized.codes)
    assert mapped(snap.lexical.parts[0].counts.indices) and mapped(snap.member_table.acl_ids)
    assert snap.catalog._held is None  # the catalog's tables too are one file both workers open


@pytest.mark.slow
def test_a_publish_gets_files_of_its_own_and_readers_follow_it(corpus, workspace, embedder):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    reader = Workspace(workspace, embedder=embedder)
    answers(reader)
    (corpus / "operations" / "time-sync.md").unlink()
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    after = answers(reader)
    folder = workspace / STATE_DIR
    states = [p for p in folder.iterdir() if p.is_dir()]
    assert len(states) == 2                                  # the old snapshot's parts and the new one's
    assert len(list(folder.glob("catalog-*.duckdb"))) == 2  # and their catalog tables
    # a deletion adds no vector rows: the new snapshot's vectors are the old one's files, linked
    assert all(f.stat().st_nlink == 2 for p in states for f in (p / "vectors").glob("matrix.*.npy"))
    assert after == answers(Workspace(workspace, embedder=embedder))
    assert all(i[0] != "time-sync" for result in after for i in result)


def test_each_ann_setting_gets_a_folder_of_its_own_and_the_same_setting_the_same(tmp_path, embedder, monkeypatch):
    run_ingest(IngestSettings(workspace=str(tmp_path / "workspace"), sources=[str(SAMPLES / "corpus" / "security")]))

    def vectors_folder(setting: str):
        monkeypatch.setenv("RAG_ANN_MIN_ROWS", setting)
        snap = Workspace(tmp_path / "workspace", embedder=embedder).snapshot()  # a worker started with the setting
        snap.vectors  # written by the first worker of a setting, mapped by the next
        return snap._files.root / snap._files.key / "vectors"

    exact, forced = vectors_folder("2000000"), vectors_folder("0")
    assert exact != forced and vectors_folder("0") == forced and vectors_folder("2000000") == exact
    assert not list(exact.glob("ivf_*.npy")) and list(forced.glob("ivf_*.npy"))


def test_workers_racing_for_a_part_build_it_once(tmp_path):
    files, built, found = StateFiles(tmp_path, "k"), [], []

    def build() -> Arrays:
        built.append(1)
        time.sleep(0.3)  # long enough for the other thread to arrive while the part is being written
        return Arrays({"a": np.arange(10)}, {"n": 10})

    threads = [threading.Thread(target=lambda: found.append(files.part("p", build))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert [f.meta for f in found] == [{"n": 10}] * 2 and all(mapped(f["a"]) for f in found)
    assert np.array_equal(found[0]["a"], np.arange(10))


def test_a_half_written_part_is_never_read_but_built_again(tmp_path):
    files = StateFiles(tmp_path, "k")
    (tmp_path / "k" / "p").mkdir(parents=True)
    np.save(tmp_path / "k" / "p" / "a.npy", np.zeros(3))  # no meta.json: a part is whole only once renamed in
    (tmp_path / "k" / ".p.123.tmp").mkdir()                  # a writer that died midway
    assert files.part("p", lambda: Arrays({"a": np.ones(3)}, {}))["a"].tolist() == [1.0, 1.0, 1.0]


def test_only_the_newest_snapshots_files_are_kept(tmp_path):
    for k in range(KEPT_STATES + 2):
        StateFiles(tmp_path, f"k{k}").part("p", lambda: Arrays({"a": np.arange(3)}, {}))
        time.sleep(0.01)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"k{k}" for k in range(2, KEPT_STATES + 2)]


def test_a_segment_kept_from_a_mapped_snapshot_is_linked_not_written_again(tmp_path):
    last = StateFiles(tmp_path, "k0").part("p", lambda: Arrays({"rows": Segments([np.arange(4)])}, {}))
    for k in range(1, KEPT_STATES + 2):  # each snapshot keeps the last one's rows and adds a segment of its own
        time.sleep(0.01)
        last = StateFiles(tmp_path, f"k{k}").part("p", lambda: Arrays({"rows": last["rows"].appended(
            np.full(2, k))}, {}))
        assert mapped(last["rows"])
    assert np.asarray(last["rows"]).tolist() == [0, 1, 2, 3] + [k for k in range(1, KEPT_STATES + 2) for _ in "ab"]
    kept, new = (tmp_path / f"k{KEPT_STATES + 1}" / "p" / f"rows.{k}.npy" for k in (0, KEPT_STATES + 1))
    assert kept.stat().st_nlink == KEPT_STATES and new.stat().st_nlink == 1  # one file, however many snapshots
    assert not (tmp_path / "k0").exists()  # its folder pruned, its first segment still linked from the others


def test_without_a_writable_folder_the_built_part_is_served_from_memory(tmp_path):
    (tmp_path / "file").write_text("")
    found = StateFiles(tmp_path / "file", "k").part("p", lambda: Arrays({"a": np.arange(3)}, {}))
    assert found["a"].tolist() == [0, 1, 2] and not mapped(found["a"])


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12).filter(lambda s: not s.endswith("\0"))


@given(st.lists(texts, max_size=30), st.lists(texts, max_size=5))
def test_a_string_table_keeps_values_in_python_order_and_finds_each(values, others):
    column = strings_of(values)
    assert column.tolist() == values
    assert column.strings[:] == sorted(set(values))  # a code is the rank in Python's own order
    assert column.strings.codes(values).tolist() == column.codes.tolist()
    missing = [v for v in others if v not in set(values)]
    assert (column.strings.codes(missing) == -1).all()
    both = concat_columns([column, strings_of(others)])
    assert both.tolist() == values + others


@given(st.lists(st.lists(texts, max_size=20), min_size=1, max_size=3))
def test_the_union_of_string_tables_is_their_distinct_strings_sorted(lists):
    found = union_of([strings_of(values).strings.table for values in lists])
    assert found[:] == sorted({v for values in lists for v in values})


def test_a_string_wider_than_the_table_is_not_found_by_its_prefix():
    table = Strings(np.array([b"ab", b"cd"]))
    assert table.codes(["abc", "ab", "c"]).tolist() == [-1, 0, -1]


@given(st.lists(texts, max_size=30), st.integers(0, 30))
def test_a_string_table_of_arrow_columns_is_the_one_of_python_strings(values, cut):
    found = column_of(pa.chunked_array([pa.array(values[:cut], pa.string()), pa.array(values[cut:], pa.string())]))
    expected = strings_of(values)
    assert found.codes.dtype == expected.codes.dtype and found.codes.tolist() == expected.codes.tolist()
    assert found.strings.table.dtype == expected.strings.table.dtype
    assert found.strings.table.tolist() == expected.strings.table.tolist()
