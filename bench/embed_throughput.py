"""Ingest embedding throughput in tokens/s: sentence-transformers on torch (before) against the embedder (after), and
the `minilm-int8` embedder (int8 weights: a workspace's choice, a vector space of its own).

The same paragraphs (a benchmark's documents, title and text, as ingest embeds them) through both, batch 64,
the same thread count, alternating rounds so load from other jobs hits both alike. Tokens are the word pieces
each model reads (special tokens included, truncated at 256); tokens/s by the wall clock and per CPU second of this
process (all its threads: the figure that holds on a loaded machine). Also checks that the vectors agree (min cosine).
`RAG_BENCH_CODE=DIR` embeds with another checkout's embedder (torch is the same), for before/after;
bench/embed_runtimes.py compares the runtimes themselves in one run.
Writes bench/results/embed-throughput[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(0, str(REPO))
from bench.results_file import write_results  # noqa: E402  (this checkout's results folder, whatever CODE is)

sys.path.insert(0, str(CODE))

from rag.models.embedders import Embedder  # noqa: E402
from rag.models.files import verified_model_dir  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    p.add_argument("--texts", type=int, default=512)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    add_benchmarks_option(p)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    docs = [json.loads(line) for line, _ in zip((benchmarks_option(p, args) / args.benchmark / "docs.jsonl").open(), range(args.texts))]
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    after = Embedder(batch_size=64, threads=args.threads)
    int8 = Embedder(batch_size=64, threads=args.threads, int8=True)
    before = SentenceTransformer(str(verified_model_dir()), device="cpu", local_files_only=True)
    tokens = sum(len(e.ids) for e in after.tokenizer.encode_batch(texts))
    seconds: dict[str, list[float]] = {"before": [], "after": [], "int8": []}
    cpu: dict[str, list[float]] = {k: [] for k in seconds}

    def timed(name, call):
        t, c = time.perf_counter(), time.process_time()
        out = call()
        seconds[name].append(time.perf_counter() - t)
        cpu[name].append(time.process_time() - c)
        return out

    for _ in range(args.rounds):
        b = timed("before", lambda: before.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True))
        a = timed("after", lambda: after.encode(texts))
        c = timed("int8", lambda: int8.encode(texts))
    rate = {k: round(tokens / float(np.median(v))) for k, v in seconds.items()}
    per_cpu = {k: round(tokens / float(np.median(v))) for k, v in cpu.items()}
    figures = {"command": "python bench/embed_throughput.py " + " ".join(sys.argv[1:]), "texts": len(texts),
               "tokens": tokens, "threads": args.threads, "rounds": args.rounds, "load_average": os.getloadavg(),
               "seconds": {k: [round(x, 2) for x in v] for k, v in seconds.items()},
               "code": str(CODE), "tokens_per_s": rate, "tokens_per_cpu_s": per_cpu,
               "cpu_after_over_before": round(per_cpu["after"] / per_cpu["before"], 2),
               "after_over_before": round(rate["after"] / rate["before"], 2),
               "int8_over_before": round(rate["int8"] / rate["before"], 2),
               "min_cosine": round(float((a * b).sum(axis=1).min()), 6),
               "int8_cosine_to_fp32": {"min": round(float((a * c).sum(axis=1).min()), 4),
                                       "mean": round(float((a * c).sum(axis=1).mean()), 4)}}
    write_results(figures, "embed-throughput", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
