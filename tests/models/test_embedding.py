"""The real all-MiniLM-L6-v2 from the wheel: normalised vectors that put related texts together."""
import numpy as np

from rag.models.embedders import DIMENSION


def test_vectors_are_normalised_and_related_texts_are_closer(onnx_embedder):
    texts = ["The gateway cache holds telemetry while offline.",
             "While disconnected, the edge device buffers its sensor data.",
             "The cafeteria serves lunch at noon."]
    v = onnx_embedder.encode(texts)
    assert v.shape == (3, DIMENSION)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_encode_reports_progress_for_every_text_in_input_order(onnx_embedder):
    seen = []
    texts = [f"document number {i} about topic {i % 3}" for i in range(70)]
    v = onnx_embedder.encode(texts, progress=seen.append)
    assert sum(seen) == 70
    assert np.allclose(v[5], onnx_embedder.encode([texts[5]])[0], atol=1e-5)


def test_the_suites_memoised_embedder_returns_the_onnx_vectors_and_progress(embedder, onnx_embedder):
    """conftest's memo (each distinct text encoded once per worker) must not change a vector or the progress."""
    texts = [f"gateway {i % 7} keeps telemetry for {i} hours" for i in range(90)]
    first, seen = embedder.encode(texts[:50]), []
    again = embedder.encode(texts, progress=seen.append)
    assert sum(seen) == 90 and np.array_equal(again[:50], first)
    assert np.allclose(again, onnx_embedder.encode(texts), atol=1e-5)
