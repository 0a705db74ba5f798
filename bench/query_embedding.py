"""What one query embedding costs on this core: CPU ms per graph run by tokens and batch size, per embedder.

The read path's floor: a two-hop LongRAG question runs the graph once for the question and once for its later-hop
queries (a batch of `hop_seeds`), so its embedding costs at least the first row's figure at the question's length
plus the batch's at theirs. One thread (as `rag serve` runs), CPU seconds of the process (robust on a shared
machine). `--levels` measures the minilm graph under other ONNX Runtime graph optimisation levels and `--threads`
under more intra-op threads (the embedder itself runs OpenVINO on one thread; `minilm-int8` ONNX Runtime at
ORT_ENABLE_ALL). It also times the floor of a graph run's fixed part: one pass over as many float32 bytes as the six layers' weights (a matrix-vector product,
one thread), which every run reads whatever its length. Writes bench/results/query-embedding[-TAG].json.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: the weights pass runs on one thread, as a query
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.models.embedders import load_embedder  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402


def median_cpu_ms(run, arguments) -> float:
    """Median CPU milliseconds of run(a) over the arguments."""
    seconds = []
    for a in arguments:
        start = time.process_time()
        run(a)
        seconds.append(time.process_time() - start)
    return round(1000 * float(np.median(seconds)), 2)


def cpu_ms(run, queries: list[str], repeats: int) -> float:
    run(queries)  # warm: ONNX Runtime plans a shape on its first run
    return median_cpu_ms(run, [queries] * repeats)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="4,8,16,24,32,48,64", help="word pieces per query, [CLS] and [SEP] included")
    p.add_argument("--batches", default="1,2,3")
    p.add_argument("--embedders", default="minilm,minilm-int8")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--levels", default="", help="also minilm at these graph optimisation levels: basic,extended,all")
    p.add_argument("--threads", default="", help="also minilm with these intra-op thread counts, e.g. 2")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    figures = {"command": "python bench/query_embedding.py " + " ".join(sys.argv[1:]), "clock": "cpu",
               "threads": 1, "load_average": os.getloadavg(), "cpu_ms": {}}
    rows = []
    for name in args.embedders.split(","):
        embedder = load_embedder(name, threads=1)
        figures["cpu_ms"][name] = {}
        for n in tokens:
            query = " ".join(["report"] * (n - 2))  # one word piece each, plus [CLS] and [SEP]
            assert len(embedder.tokenizer.encode(query).ids) == n
            cells = {b: cpu_ms(embedder.encode_queries, [query] * b, args.repeats) for b in batches}
            figures["cpu_ms"][name][str(n)] = {str(b): ms for b, ms in cells.items()}
            rows.append([name, n, *(cells[b] for b in batches)])
            print(name, n, cells, flush=True)
    for label, session in sessions(args.levels, args.threads):
        embedder = load_embedder("minilm", threads=1)
        own, embedder.graph = embedder.graph, lambda feeds, session=session: session.run(None, feeds)[0]
        figures["cpu_ms"][label] = {}
        for n in tokens:
            query = " ".join(["report"] * (n - 2))
            cells = {b: cpu_ms(embedder.encode_queries, [query] * b, args.repeats) for b in batches}
            figures["cpu_ms"][label][str(n)] = {str(b): ms for b, ms in cells.items()}
            rows.append([label, n, *(cells[b] for b in batches)])
            print(label, n, cells, flush=True)
        embedder.graph = own
    figures["weights_pass_cpu_ms"] = weights_pass_ms(args.repeats)
    write_results(figures, "query-embedding", args.tag)
    print(markdown_table(["embedder", "tokens", *(f"batch {b} CPU ms" for b in batches)], rows))
    print(f"one pass over the layers' {LAYER_WEIGHTS * 4 / 1e6:.1f} MB of float32 weights: "
          f"{figures['weights_pass_cpu_ms']} CPU ms")


LAYER_WEIGHTS = 6 * (4 * 384 * 384 + 2 * 384 * 1536)  # all-MiniLM-L6-v2's six layers: Q, K, V, output, two FFN


def weights_pass_ms(repeats: int) -> float:
    """Median CPU ms of a matrix-vector product over a float32 matrix of the layers' weight count (one thread)."""
    matrix = np.random.default_rng(0).standard_normal((LAYER_WEIGHTS // 384, 384), dtype=np.float32)
    vector = np.ones(384, dtype=np.float32)
    return cpu_ms(lambda v: matrix @ v, vector, repeats)


def sessions(levels: str, threads: str):
    """(label, ONNX Runtime session of the minilm graph) for each level and thread count asked for."""
    import onnxruntime as ort

    from rag.models.files import model_dir
    from rag.models.onnx_export import onnx_path

    named = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
             "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    asked = [(f"minilm level={name}", named[name], 1) for name in filter(None, levels.split(","))]
    asked += [(f"minilm threads={n}", named["all"], int(n)) for n in filter(None, threads.split(","))]
    for label, level, n in asked:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads, options.graph_optimization_level = n, 1, level
        yield label, ort.InferenceSession(str(onnx_path(model_dir())), options, providers=["CPUExecutionProvider"])


if __name__ == "__main__":
    main()
