"""The runtimes that run the verified MiniLM graph: OpenVINO (the default) and ONNX Runtime (the int8 graph).

ONNX Runtime reads the hash-checked ONNX file (`onnx_export.onnx_path`), OpenVINO its hash-checked IR converted from
that file (`onnx_export.openvino_ir_paths`). A runtime is a callable from the graph's three int64 inputs to its
pooled vectors.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np

OPENVINO = "openvino"
ONNXRUNTIME = "onnxruntime"
# bfloat16 matrix products with float32 sums: twice a core's float32 multiply-adds (avx512_bf16), cosine ≥ 0.9999 to
# torch's float32 vectors (min 0.99997, bench/embed_runtimes.py). Only where the CPU has bfloat16 instructions:
# elsewhere OpenVINO would emulate them, slower than float32.
OPENVINO_PRECISION = "bf16"

Feeds = dict[str, np.ndarray]


def openvino():
    """The openvino module, without its telemetry: `import openvino` otherwise forks a process that sends a usage
    event to Google Analytics unless a consent file in the user's home says no, and this project makes no network
    call but the LLM's. With the telemetry package unimportable, OpenVINO falls back to its own no-op stub."""
    sys.modules.setdefault("openvino_telemetry", None)
    import openvino as ov

    return ov


class OnnxRuntimeGraph:
    """The graph in an ONNX Runtime session on one intra-op thread (documents run side by side instead)."""

    def __init__(self, graph: Path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        # Splitting one small run's operators over two threads cost more CPU than it saved (bench/embed_throughput.py).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def __call__(self, feeds: Feeds) -> np.ndarray:
        return self.session.run(None, feeds)[0]


class OpenVinoGraph:
    """The graph compiled by OpenVINO for this CPU: `streams` runs side by side, one thread each, unpinned."""

    def __init__(self, graph: Path, weights: Path, streams: int = 1, precision: str | None = None):
        ov = openvino()
        core = ov.Core()
        if precision is None:
            precision = OPENVINO_PRECISION if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"
        # One thread a stream, as ONNX Runtime runs; unpinned, since other processes share these cores.
        config = {"INFERENCE_NUM_THREADS": streams, "NUM_STREAMS": streams, "ENABLE_CPU_PINNING": False,
                  "INFERENCE_PRECISION_HINT": precision}
        self.model = core.compile_model(core.read_model(str(graph), str(weights)), "CPU", config)
        self._requests = threading.local()   # a request runs one inference at a time: one per calling thread
        # The binding sets itself up (numpy's API, its result types) at a process's first inference; two threads
        # making theirs at once deadlocked there (one waits for the GIL inside a call-once, the other holds the GIL
        # at a static's guard), so the first runs here, on one thread.
        self({port.any_name: np.zeros((1, 1), dtype=port.get_element_type().to_dtype()) for port in self.model.inputs})

    def __call__(self, feeds: Feeds) -> np.ndarray:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self._requests.request = self.model.create_infer_request()
        # Inputs lent, not copied into the request's own tensors: resizing those from two threads at once hung.
        return request.infer(feeds, share_inputs=True).to_tuple()[0].copy()   # its output buffer is reused
