"""Shared fixtures, and how a test stays isolated when the suite runs in parallel (`make test`: pytest-xdist).

Each xdist worker is its own process, so process-wide state (the loaded embedder, the local llama.cpp server of
rag.answer.local_llm, torch's thread pool) is per worker. A test that wants to pass under `-n 2` follows four rules:

- Files: write only under `tmp_path` / `tmp_path_factory` (per worker, per test) or the `corpus` / `workspace`
  fixtures below; never under the repository (`.rag/`) or a fixed /tmp path.
- Ports: bind port 0 and ask the socket which port it got (`rag.answer.local_llm.free_port()`); never a fixed port.
- Dagster: `dg.instance_for_test(temp_dir=str(tmp_path))`. DAGSTER_HOME is unset for the whole run, so code that
  falls back to the default instance (pipelines.ingest_run) gets an ephemeral one per process, never a shared one.
- Benchmarks: `benchmark_dir(name)` (rag.sources.benchmarks), i.e. the slices in samples/benchmarks/ unless
  RAG_BENCHMARKS names another folder; nothing outside the repository.

Expensive things are shared at session scope, once per worker: `embedder`, `multilingual` and `published_sample`
(samples/corpus published into a catalog and index). Tests only read them; one that must change a shared catalog does
so inside `BEGIN` … `ROLLBACK` (see test_longrag.assert_only_readable_bytes). Tests that start the real local LLM
carry `@pytest.mark.xdist_group("local-llm")`, so `--dist loadgroup` runs them on one worker with one server.
A test that uses a module-scoped fixture is in its module's group (pytest_collection_modifyitems below), so that the
fixture is built once, on one worker; every other test is scheduled alone, wherever a worker is free. Groups with slow
tests are handed out first (`--no-loadscope-reorder` keeps this order), so that no worker starts a 3-minute test while
the other has nothing left to do.

Session fixtures are per worker; so is the embedder's memo (MemoEmbedder): each distinct text is encoded once per
worker. A document's vector is also written to the run's folder of shared vectors (tests/embedding_memo), which every
worker and every Python process a test starts reads first: a text is embedded once per run.
"""
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.pop("DAGSTER_HOME", None)
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # One thread per worker (and per child process it starts): two workers on two cores, not four threads.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("RAG_LLM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
EMBEDDING_MEMO = REPO / "tests" / "embedding_memo"
if "RAG_TEST_EMBEDDINGS" not in os.environ:   # the controller (or a lone pytest): its workers and children inherit it
    os.environ["RAG_TEST_EMBEDDINGS"] = tempfile.mkdtemp(prefix="rag-test-embeddings-")
    atexit.register(shutil.rmtree, os.environ["RAG_TEST_EMBEDDINGS"], ignore_errors=True)
if str(EMBEDDING_MEMO) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):   # its sitecustomize.py
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EMBEDDING_MEMO), os.environ.get("PYTHONPATH")]))

from rag.models import embedders  # noqa: E402  (after the offline settings above)
from rag.models.embedders import Embedder  # noqa: E402
from rag.text.analysis import check_question  # noqa: E402

SAMPLES = REPO / "samples"
# Tests mirror rag/'s layers in sub-folders and share helpers by module name (`from test_longrag import publish`),
# the name pytest's prepend import mode gives each test module: every folder is importable from every other.
sys.path += [str(d) for d in sorted(Path(__file__).parent.iterdir()) if d.is_dir() and d.name.isidentifier()]

from shared_vectors import SharedVectorsEmbedder  # noqa: E402  (tests/embedding_memo, on the path from here)


def _shares_module_fixtures(item: pytest.Item) -> bool:
    scopes = {d.scope for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs}
    return bool(scopes & {"module", "package", "class"})


def _group(item: pytest.Item) -> str:
    marks = {m.args[0] if m.args else m.kwargs.get("name", "default") for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(map(str, marks))) or item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if not item.get_closest_marker("xdist_group") and _shares_module_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    yield   # pytest's own ordering and deselection, then xdist's
    group = {item: _group(item) for item in items}
    heavy = {group[item] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: group[item] not in heavy)   # stable: groups with slow tests are handed out first
    if getattr(config.option, "loadgroup", False):   # an xdist worker of `--dist loadgroup`
        _name_groups_in_node_ids(items)


def _name_groups_in_node_ids(items: list[pytest.Item]) -> None:
    """What xdist's loadgroup does itself before pytest 9.2: the controller reads a test's group from `nodeid@group`.

    pytest 9.2 derives `nodeid` from a structured id, so xdist 3.8's edit of `_nodeid` is lost and every test is
    scheduled alone (pytest-dev/pytest-xdist#1386, open): no two tests would share a worker's module fixtures or its
    llama.cpp server. Remove once xdist writes the group again (then every nodeid already ends in `@group`; an
    `@` inside a parameter's brackets is not a group, as xdist reads it).
    """
    from _pytest.nodeid import NodeId

    for item in items:
        if item.get_closest_marker("xdist_group") and item.nodeid.rfind("@") <= item.nodeid.rfind("]"):
            item._id = NodeId.parse(f"{item.nodeid}@{_group(item)}")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the sample corpus that a test may edit, delete from and re-version."""
    dest = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", dest)
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


class MemoEmbedder(SharedVectorsEmbedder):
    """The real ONNX MiniLM that encodes each distinct text once per worker: the suite publishes the same corpora
    dozens of times, and a text's vector does not change. One memo for every instance (threads, batch sizes) in the
    worker. Queries too: the permission properties ask ~1,000 questions drawn from a few words, and later hops ask
    the same bridge queries again; each question is still checked (its length) on every call. A document text the
    worker has not seen is read from the run's shared vectors if another process embedded it, else embedded and
    shared."""

    _memo: dict[str, np.ndarray] = {}
    _queries: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:  # the run's shared files, then the model (SharedVectorsEmbedder)
            self._memo.update(zip(missing, super().encode(missing)))
        for start in range(0, len(texts), self.batch_size):
            if progress:
                progress(min(self.batch_size, len(texts) - start))
        return np.array([self._memo[t] for t in texts], dtype=np.float32).reshape(len(texts), self.dimension)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        texts = [check_question(t) for t in texts]
        missing = [t for t in dict.fromkeys(texts) if t not in self._queries]
        if missing:
            self._queries.update(zip(missing, super().encode_queries(missing)))
        return np.array([self._queries[t] for t in texts], dtype=np.float32).reshape(len(texts), self.dimension)


def _load_memo_embedder(name: str, batch_size: int, threads: int | None):
    if name == "minilm":
        return MemoEmbedder(batch_size=batch_size, threads=threads)
    return _load_real_embedder(name, batch_size, threads)


# Every in-process load (run_ingest, Workspace, ELITE, the CLI's main, the Dagster resource) gets the memo too; once,
# though a test module may import this file again as `tests.conftest`.
if embedders._load_embedder.__name__ != _load_memo_embedder.__name__:
    _load_real_embedder, embedders._load_embedder = embedders._load_embedder, _load_memo_embedder


@pytest.fixture(scope="session")
def embedder():
    """The worker's one MiniLM at one thread, the instance Workspace and ELITE load too (its vectors memoised)."""
    return embedders.load_embedder("minilm", threads=1)


@pytest.fixture(scope="session")
def onnx_embedder():
    """A MiniLM without the memo, for the tests of the embedder itself (batching, padding, truncation)."""
    return Embedder(threads=1)


@pytest.fixture(scope="session")
def multilingual():
    from rag.models.embedders import MultilingualEmbedder

    return MultilingualEmbedder(threads=1)


@pytest.fixture(scope="session")
def published_sample(tmp_path_factory, embedder):
    """(catalog, index) of samples/corpus published once per worker; read-only (changes inside BEGIN … ROLLBACK)."""
    from test_longrag import publish

    return publish(tmp_path_factory.mktemp("sample"), [SAMPLES / "corpus"], embedder)
