"""The MiniLM graph under each runtime, side by side in one run: ingest tokens per CPU second, query CPU ms, cosine
to torch's vectors, cold load and memory, and what share of a core's peak multiply-adds each reaches.

Runtimes: sentence-transformers on torch (the reference), ONNX Runtime (what `minilm-int8` runs on), and
OpenVINO compiling the same verified ONNX file in float32 and in bfloat16 (with float32 sums), plus the default
runtime with other run sizes (`--run-tokens`). Ingest: a benchmark's paragraphs (title and text, as ingest embeds
them) through `encode`, `--threads` runs side by side, the runtimes alternating round by round so load from other
jobs hits all alike; tokens are the word pieces the model reads. Queries: one thread, median CPU ms of one 16-piece
query and of a batch of two (a question's two graph runs). Cold: a fresh process imports the runtime and embeds one
query (CPU seconds, peak RSS). Writes bench/results/embed-runtimes[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: the GEMM peak below is one thread's
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.files import verified_model_dir  # noqa: E402
from rag.models.onnx_export import openvino_ir_paths  # noqa: E402
from rag.models.runtimes import ONNXRUNTIME, OPENVINO, OpenVinoGraph  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402

LAYER_WEIGHTS = 6 * (4 * 384 * 384 + 2 * 384 * 1536)  # six layers: Q, K, V, output, two FFN matrices
# A cold process: import the runtime, load the verified graph, embed one query; its CPU seconds and peak RSS.
# VmHWM, not ru_maxrss: Linux keeps the latter across exec, so it would report the forking parent's peak.
COLD = """import json, re, sys, time
from pathlib import Path
from rag.models.embedders import Embedder
start = time.process_time()
Embedder(threads=1, runtime=sys.argv[1]).encode_query("How long does the offline cache hold telemetry?")
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"cpu_s": time.process_time() - start, "peak_mb": peak / 1024}))"""


def embedders(threads: int, run_tokens: list[int]) -> dict[str, Embedder]:
    """Each runtime's embedder over the same verified graph (`onnx_path` checks its sha256)."""
    out = {"onnxruntime": Embedder(threads=threads, runtime=ONNXRUNTIME)}
    f32 = Embedder(threads=threads, runtime=OPENVINO)
    f32.graph = OpenVinoGraph(*openvino_ir_paths(), streams=threads, precision="f32")
    out |= {"openvino-f32": f32, "openvino-bf16": Embedder(threads=threads, runtime=OPENVINO)}
    for n in run_tokens:
        out[f"openvino-bf16 run_tokens={n}"] = e = Embedder(threads=threads, runtime=OPENVINO)
        e.run_tokens = n
    return out


def query_cpu_ms(embedder: Embedder, batch: int, repeats: int) -> float:
    """Median CPU ms of one graph run over `batch` 16-piece queries, on one thread."""
    queries = [" ".join(["report"] * 14)] * batch
    embedder.encode_queries(queries)   # a runtime plans a new shape on its first run
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        embedder.encode_queries(queries)
        seconds.append(time.process_time() - start)
    return round(1000 * float(np.median(seconds)), 2)


def cold(runtime: str) -> dict:
    out = subprocess.run([sys.executable, "-c", COLD, runtime], capture_output=True, text=True, check=True, cwd=REPO,
                         env=os.environ | {"PYTHONPATH": str(REPO)})
    return {k: round(v, 3) for k, v in json.loads(out.stdout).items()}


def gemm_gflops(repeats: int = 20) -> float:
    """One thread's float32 GEMM rate at the FFN's shape (256 pieces × 384 → 1536): a reachable peak."""
    a = np.random.default_rng(0).standard_normal((256, 384), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((384, 1536), dtype=np.float32)
    a @ b
    start = time.process_time()
    for _ in range(repeats):
        a @ b
    return round(repeats * 2 * 256 * 384 * 1536 / (time.process_time() - start) / 1e9, 1)


def cpu_mhz() -> float:
    lines = [x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("cpu MHz")]
    return float(lines[0].split(":")[1]) if lines else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", type=int, default=256, help="the benchmark's first documents embedded each round")
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--repeats", type=int, default=30, help="query runs timed per runtime")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--run-tokens", default="128,512", help="also the default runtime with these run sizes")
    add_benchmarks_option(p)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    load = [os.getloadavg()]
    lines = (benchmarks_option(p, args) / args.benchmark / "docs.jsonl").open()
    texts = [f"{d['title']}\n{d['text']}" for d in (json.loads(line) for line, _ in zip(lines, range(args.texts)))]
    runtimes = embedders(args.threads, [int(n) for n in filter(None, args.run_tokens.split(","))])
    torch_model = SentenceTransformer(str(verified_model_dir()), device="cpu", local_files_only=True)
    encode = {"torch": lambda: torch_model.encode(texts, batch_size=64, normalize_embeddings=True,
                                                  convert_to_numpy=True)}
    encode |= {name: (lambda e=e: e.encode(texts)) for name, e in runtimes.items()}
    lengths = [len(e.ids) for e in runtimes["onnxruntime"].tokenizer.encode_batch(texts)]
    tokens = sum(lengths)
    cpu: dict[str, list[float]] = {k: [] for k in encode}
    wall: dict[str, list[float]] = {k: [] for k in encode}
    for call in encode.values():   # untimed: each runtime plans its first shapes, torch warms its pools
        call()
    vectors = {}
    for r in range(args.rounds):
        for name in (list(encode) if r % 2 == 0 else list(encode)[::-1]):   # alternate the order round by round
            t, c = time.perf_counter(), time.process_time()
            vectors[name] = encode[name]()
            wall[name].append(round(time.perf_counter() - t, 3))
            cpu[name].append(round(time.process_time() - c, 3))
        load.append(os.getloadavg())
    per_cpu = {k: round(tokens / float(np.median(v))) for k, v in cpu.items()}
    flop_per_token = 2 * LAYER_WEIGHTS + 6 * 4 * 384 * float(np.mean(lengths))  # weights + attention's two products
    figures = {
        "command": "python bench/embed_runtimes.py " + " ".join(sys.argv[1:]), "texts": len(texts), "tokens": tokens,
        "threads": args.threads, "rounds": args.rounds, "load_average": load,
        "cpu_seconds": cpu, "wall_seconds": wall, "tokens_per_cpu_s": per_cpu,
        "over_torch": {k: round(v / per_cpu["torch"], 2) for k, v in per_cpu.items()},
        "cosine_to_torch": {k: {"min": round(float((v * vectors["torch"]).sum(1).min()), 6),
                                "mean": round(float((v * vectors["torch"]).sum(1).mean()), 6)}
                            for k, v in vectors.items() if k != "torch"},
        "query_cpu_ms_16_pieces": {}, "cold": {},
        "arithmetic": {"mflop_per_token": round(flop_per_token / 1e6, 2), "cpu_mhz": cpu_mhz(),
                       "gflops_per_cpu_s": {k: round(v * flop_per_token / 1e9, 1) for k, v in per_cpu.items()},
                       "numpy_gemm_gflops_one_thread": gemm_gflops()}}
    for name in ("onnxruntime", "openvino-f32", "openvino-bf16"):
        one = Embedder(threads=1, runtime=ONNXRUNTIME if name == "onnxruntime" else OPENVINO)
        if name == "openvino-f32":
            one.graph = OpenVinoGraph(*openvino_ir_paths(), streams=1, precision="f32")
        figures["query_cpu_ms_16_pieces"][name] = {str(b): query_cpu_ms(one, b, args.repeats) for b in (1, 2)}
    for runtime in (ONNXRUNTIME, OPENVINO):
        figures["cold"][runtime] = cold(runtime)
    figures["load_average"].append(os.getloadavg())
    write_results(figures, "embed-runtimes", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
