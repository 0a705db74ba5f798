"""The OpenVINO embedder (the default): torch's vectors from a hash-checked IR converted once from the verified graph."""
import shutil

import numpy as np
import pytest
from test_onnx_embedder import sample_texts

from rag.models.embedders import Embedder
from rag.models.files import ModelIntegrityError, sha256_of
from rag.models.onnx_export import CACHE_ENV, onnx_path, openvino_ir_paths
from rag.models.runtimes import ONNXRUNTIME, OPENVINO, openvino


def copy_with_record(path, folder):
    shutil.copy(path, folder)
    shutil.copy(path.with_name(path.name + ".sha256"), folder)


def test_the_default_embedder_runs_openvino_and_the_int8_one_onnx_runtime(onnx_embedder):
    assert onnx_embedder.runtime == OPENVINO
    assert Embedder(threads=1, int8=True).runtime == ONNXRUNTIME


def test_products_run_in_bfloat16_only_where_the_cpu_has_its_instructions(onnx_embedder):
    ov = openvino()
    has_bf16 = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    precision = onnx_embedder.graph.model.get_property("INFERENCE_PRECISION_HINT")
    assert precision == (ov.Type.bf16 if has_bf16 else ov.Type.f32)


def test_documents_run_side_by_side_give_the_vectors_of_one_thread(onnx_embedder):
    texts = sample_texts()
    two = Embedder(threads=2, batch_size=8)  # several runs of several widths at once, on two streams
    assert np.allclose(two.encode(texts), onnx_embedder.encode(texts), atol=1e-5)


def test_openvino_vectors_equal_onnx_runtime_float32_ones(onnx_embedder):
    texts = sample_texts()
    reference = Embedder(threads=1, runtime=ONNXRUNTIME).encode(texts)   # itself equal to torch's (cosine 1.0)
    assert (onnx_embedder.encode(texts) * reference).sum(axis=1).min() >= 0.9999


def test_the_ir_is_converted_once_from_the_verified_graph_and_recorded(tmp_path, monkeypatch):
    copy_with_record(onnx_path(), tmp_path)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    graph, weights = openvino_ir_paths()
    assert graph.parent == weights.parent == tmp_path
    for made in (graph, weights):
        assert made.with_name(made.name + ".sha256").read_text().strip() == sha256_of(made)
    assert weights.stat().st_size < onnx_path().stat().st_size * 0.6   # float16 weights: half the graph's bytes
    query = "How long does the offline cache hold telemetry?"
    vector = Embedder(threads=1).encode_query(query)
    assert float(vector @ Embedder(threads=1, runtime=ONNXRUNTIME).encode_query(query)) >= 0.9999
    assert openvino_ir_paths() == (graph, weights) and sorted(tmp_path.glob("*.xml")) == [graph]


@pytest.mark.parametrize("part", [0, 1], ids=["graph", "weights"])
def test_a_tampered_ir_file_is_refused_naming_it(tmp_path, monkeypatch, part):
    for made in (onnx_path(), *openvino_ir_paths()):
        copy_with_record(made, tmp_path)
    copy = tmp_path / openvino_ir_paths()[part].name
    with copy.open("r+b") as f:
        f.seek(-8, 2)
        f.write(b"tampered")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    with pytest.raises(ModelIntegrityError) as err:
        Embedder(threads=1)
    assert str(copy) in str(err.value) and "recorded at export" in str(err.value)


def test_no_ir_is_converted_from_a_graph_that_fails_its_sha256(tmp_path, monkeypatch):
    copy_with_record(onnx_path(), tmp_path)
    with (tmp_path / onnx_path().name).open("r+b") as f:
        f.seek(-8, 2)
        f.write(b"tampered")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    with pytest.raises(ModelIntegrityError):
        openvino_ir_paths()
    assert not list(tmp_path.glob("*.xml")) and not list(tmp_path.glob("*.bin"))


@pytest.mark.slow
def test_a_machine_with_an_empty_cache_exports_the_graph_then_converts_it_in_one_process(tmp_path):
    """A fresh machine's first embedder makes the ONNX graph inside the IR's conversion: it must not wait for itself."""
    import os
    import subprocess
    import sys

    code = ("from rag.models.embedders import Embedder; "
            "print(float(Embedder(threads=1).encode_query('offline cache') @ "
            "Embedder(threads=1, runtime='onnxruntime').encode_query('offline cache')))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, CACHE_ENV: str(tmp_path)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) >= 0.9999
    assert len(list(tmp_path.glob("*.onnx"))) == 1 and len(list(tmp_path.glob("*.xml"))) == 1


def test_embedding_sends_no_telemetry_and_forks_no_process():
    """`import openvino` alone would fork a process that posts a usage event; the embedder imports it without that."""
    import subprocess
    import sys

    code = ("import os, sys; forks = []; os.register_at_fork(before=lambda: forks.append(1)); "
            "from rag.models.embedders import Embedder; e = Embedder(threads=2); "
            "e.encode_query('offline cache'); e.encode(['a text', 'another text'] * 8); "
            "print(len(forks), sys.modules.get('openvino_telemetry', 'absent'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "None"], done.stdout
