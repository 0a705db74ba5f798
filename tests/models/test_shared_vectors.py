"""The suite's shared vectors (tests/embedding_memo, tests/conftest.py): a vector read from them is the model's own for
that exact text, a damaged file is computed again, and a Python process a test starts shares them."""
import os
import subprocess
import sys

import numpy as np
from conftest import REPO
from shared_vectors import FOLDER_ENV, SharedVectorsEmbedder

TEXTS = ["Gateways rotate their certificates every year.", "Gateways rotate their certificates every year!",
         "The offline cache holds telemetry for 72 hours."]


def counting(embedder: SharedVectorsEmbedder) -> list[int]:
    """The texts that `embedder` computes with its model from now on (the rest it read)."""
    computed, run = [], embedder._run
    embedder._run = lambda pieces: computed.append(len(pieces)) or run(pieces)
    return computed


def test_a_shared_vector_is_the_models_own_for_that_exact_text(tmp_path, monkeypatch, onnx_embedder):
    monkeypatch.setenv(FOLDER_ENV, str(tmp_path))
    first, second = SharedVectorsEmbedder(threads=1), SharedVectorsEmbedder(threads=1)
    first.encode(TEXTS[:2])
    computed = counting(second)
    got = second.encode([TEXTS[2], TEXTS[0], TEXTS[1], TEXTS[0]])
    assert sum(computed) == 1   # only the text no process had embedded
    np.testing.assert_allclose(got, onnx_embedder.encode([TEXTS[2], TEXTS[0], TEXTS[1], TEXTS[0]]), atol=1e-6)
    assert second.shared.folder.parent == tmp_path and len(list(second.shared.folder.iterdir())) == 3


def test_a_damaged_shared_vector_is_computed_again(tmp_path, monkeypatch, onnx_embedder):
    monkeypatch.setenv(FOLDER_ENV, str(tmp_path))
    embedder = SharedVectorsEmbedder(threads=1)
    embedder.encode(TEXTS[:1])
    embedder.shared._path(TEXTS[0]).write_bytes(b"\0" * 10)   # as a process killed mid-write would leave it
    computed = counting(embedder)
    np.testing.assert_allclose(embedder.encode(TEXTS[:1]), onnx_embedder.encode(TEXTS[:1]), atol=1e-6)
    assert sum(computed) == 1


def test_a_process_a_test_starts_embeds_through_the_shared_vectors():
    probe = "from rag.models.embedders import load_embedder as l; print(type(l('minilm', threads=1)).__name__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=os.environ, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["SharedVectorsEmbedder"]
    assert os.path.isdir(os.environ[FOLDER_ENV])
