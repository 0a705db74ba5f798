"""What one query embedding costs on this core: CPU ms per graph run by tokens and batch size, per embedder.

The read path's floor: a two-hop LongRAG question runs the graph once for the question and once for its later-hop
queries (a batch of `hop_seeds`), so its embedding costs at least the first row's figure at the question's length
plus the batch's at theirs. One thread (as `rag serve` runs), CPU seconds of the process (robust on a shared
machine). Writes bench/results/query-embedding[-TAG].json.
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
sys.path.insert(0, str(REPO))

from rag.models.embedders import load_embedder  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402


def cpu_ms(run, queries: list[str], repeats: int) -> float:
    run(queries)  # warm: ONNX Runtime plans a shape on its first run
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        run(queries)
        seconds.append(time.process_time() - start)
    return round(1000 * float(np.median(seconds)), 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="4,8,16,24,32,48,64", help="word pieces per query, [CLS] and [SEP] included")
    p.add_argument("--batches", default="1,2,3")
    p.add_argument("--embedders", default="minilm,minilm-int8")
    p.add_argument("--repeats", type=int, default=30)
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
    out = REPO / "bench" / "results" / f"query-embedding{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(figures, indent=1) + "\n")
    print(markdown_table(["embedder", "tokens", *(f"batch {b} CPU ms" for b in batches)], rows))


if __name__ == "__main__":
    main()
