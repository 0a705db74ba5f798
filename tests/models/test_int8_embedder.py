"""`minilm-int8`: MiniLM with int8 weights, quantised locally from the verified fp32 graph, hash-checked, and a
vector space of its own that a workspace never mixes with MiniLM's (same dimension, so only the name can tell).
A tampered int8 graph is refused like the fp32 export (test_onnx_embedder.py)."""
import numpy as np
import pytest
from conftest import SAMPLES
from test_embedder_choice import publish
from test_onnx_embedder import sample_texts

from rag.models.embedders import load_embedder, workspace_embedder_name
from rag.models.onnx_export import int8_onnx_path, onnx_path
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex


@pytest.fixture(scope="module")
def int8():
    return load_embedder("minilm-int8", threads=1)


def test_int8_vectors_are_close_to_minilm_but_not_its_space(int8, onnx_embedder):
    texts = sample_texts()
    a, b = int8.encode(texts), onnx_embedder.encode(texts)
    assert (int8.name, int8.dimension, a.shape) == ("minilm-int8", 384, b.shape)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-4)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() >= 0.97 and cosine.max() < 0.9999  # per-channel int8: 0.99 typical; never the fp32 vector
    short = [t for t in texts if len(t) <= 2000][:3]  # queries are capped at 2,000 characters
    # Dynamic int8 scales each run's activations by the whole run, so a vector is exact only for the same run: these
    # 256-piece texts each fill a run of their own when embedded as documents, as each does as a query.
    assert np.allclose(np.stack([int8.encode_query(t) for t in short]), int8.encode(short), atol=1e-4)
    assert int8_onnx_path().stat().st_size < onnx_path().stat().st_size / 3   # int8 weights: a quarter of the bytes


def test_an_int8_workspace_queries_in_its_own_space_and_refuses_minilm_questions(tmp_path, int8, embedder):
    catalog, index = Catalog(tmp_path / "catalog.duckdb"), SubchunkIndex(tmp_path / "lancedb")
    first = publish(catalog, index, int8, SAMPLES / "corpus")
    assert (first.embedder, index.embedder, catalog.setting("embedder")) == ("minilm-int8",) * 3
    catalog.close()
    reader = Workspace(tmp_path)
    assert reader.embedder.name == "minilm-int8"   # the reader loads the space the index holds
    support = Caller(frozenset({"support"}))
    found = reader.retrieve("longrag", support, "Which error code means the gateway cache is full?", 2000)
    assert found.items[0].doc_id == "error-codes-reference"
    mixed = Workspace(tmp_path, embedder=embedder)
    with pytest.raises(ValueError, match="embedded with minilm cannot be compared with the index's minilm-int8"):
        mixed.retrieve("longrag", support, "Which error code means the gateway cache is full?", 2000)
    reader.close(), mixed.close()

    catalog = Catalog(tmp_path / "catalog.duckdb")
    back = publish(catalog, SubchunkIndex(tmp_path / "lancedb"), embedder, SAMPLES / "corpus")
    assert back.replaced_embedder == "minilm-int8" and back.embedded == back.subchunks and back.reused == 0
    assert workspace_embedder_name(catalog) == "minilm"
    catalog.close()
