"""The MiniLM embedder: the same vectors as sentence-transformers on torch, from a hash-checked export."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rag.models.files import ModelIntegrityError, model_dir
from rag.models.onnx_export import CACHE_ENV, int8_onnx_path, onnx_path
from rag.sources.loaders import load_folder
from tests.conftest import REPO, SAMPLES


def sample_texts() -> list[str]:
    """Every sample document whole (several run past 256 word pieces: truncation) and a few short lines."""
    docs = load_folder(SAMPLES / "corpus").documents
    return [f"{d.title}\n{d.text}" for d in docs] + ["offline cache", "a", "What holds telemetry? " * 3]


@pytest.mark.slow
def test_vectors_equal_sentence_transformers_on_the_sample_corpus(onnx_embedder):
    from sentence_transformers import SentenceTransformer

    texts = sample_texts()
    reference = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True).encode(
        texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    batched = onnx_embedder.encode(texts)  # padded batches of mixed lengths
    short = [i for i, t in enumerate(texts) if len(t) <= 2000][:10]  # queries are capped at 2,000 characters
    one_by_one = np.stack([onnx_embedder.encode_query(texts[i]) for i in short])
    assert (batched * reference).sum(axis=1).min() >= 0.9999
    assert (one_by_one * reference[short]).sum(axis=1).min() >= 0.9999
    assert np.allclose(onnx_embedder.encode_queries([texts[i] for i in short[:4]]), batched[short[:4]], atol=1e-5)


def test_truncation_keeps_256_word_pieces_like_sentence_transformers(onnx_embedder):
    long = "telemetry " * 400
    assert len(onnx_embedder.tokenizer.encode(long).ids) == 256
    a, b = onnx_embedder.encode([long, "telemetry " * 300])
    assert float(a @ b) > 0.9999


@pytest.mark.parametrize("made_by", [onnx_path, int8_onnx_path])  # the fp32 export, and its int8 quantisation
def test_a_tampered_export_is_refused_naming_the_file(tmp_path, monkeypatch, made_by):
    for made in {onnx_path(), made_by()}:
        shutil.copy(made, tmp_path)
        shutil.copy(made.with_name(made.name + ".sha256"), tmp_path)
    copy = tmp_path / made_by().name
    with copy.open("r+b") as f:
        f.seek(-8, 2)
        f.write(b"tampered")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    with pytest.raises(ModelIntegrityError) as err:
        made_by()
    assert str(copy) in str(err.value) and "recorded at export" in str(err.value)


def test_query_embedding_imports_neither_torch_nor_transformers_nor_onnx_runtime():
    code = ("import sys; from rag.models.embedders import Embedder; Embedder(threads=1).encode_query('offline cache');"
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'onnxruntime') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]"


def test_an_export_starts_only_from_weights_that_pass_their_sha256(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    shutil.copytree(model_dir(), folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").write_bytes(b"not the real weights")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(ModelIntegrityError, match="refusing"):
        onnx_path(folder)
    assert not list((tmp_path / "cache").glob("*.onnx"))


def test_load_embedder_keeps_one_instance_per_name_batch_size_and_threads():
    from rag.models.embedders import load_embedder

    first = load_embedder("minilm", threads=1)
    assert load_embedder("minilm", threads=1) is first
    assert load_embedder("minilm", batch_size=32, threads=1) is not first


def test_runs_cover_every_row_once_in_order_within_the_budget():
    from rag.models.embedders import runs

    widths = [256, 200, 130, 130, 90, 40, 12, 12, 12, 3]
    slices = list(runs(widths, 300))
    assert [i for s in slices for i in range(len(widths))[s]] == list(range(len(widths)))
    assert all(len(widths[s]) * widths[s][0] <= 300 or len(widths[s]) == 1 for s in slices)
    assert [len(widths[s]) for s in slices] == [1, 1, 2, 3, 3]
    assert list(runs([300, 280], 256)) == [slice(0, 1), slice(1, 2)]  # wider than the budget: alone


def test_documents_embed_alike_whatever_the_run_size(onnx_embedder, monkeypatch):
    texts = sample_texts()
    small = onnx_embedder.encode(texts)
    monkeypatch.setattr(onnx_embedder, "run_tokens", 64 * 256)  # one run per batch of 64, as before runs existed
    whole = onnx_embedder.encode(texts)
    monkeypatch.setattr(onnx_embedder, "run_tokens", 1)  # one text per run: no padding at all
    alone = onnx_embedder.encode(texts)
    assert np.allclose(small, whole, atol=1e-5) and np.allclose(small, alone, atol=1e-5)
