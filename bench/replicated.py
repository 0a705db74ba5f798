"""A workspace of about `--subchunks` sub-chunks made of copies of an embedded benchmark slice, for warm query
latency at 110K and 1M sub-chunks without embedding a large corpus.

How the copies differ (so neither BM25 nor the vectors see K identical documents):
- copy 0 is the slice itself (its ids, titles and vectors); copy k > 0 has ids `r<k>:<id>` and titles `<title> · k`;
- every copy's texts are the slice's, so BM25 scores a text's copies alike except for the title words;
- a copy's links are the slice's derived links (title mentions and shared titles) written as explicit links to
  the same copy's titles, so every copy groups into the slice's units and no unit spans copies;
- copy k's ACL is `group-<k % 5>`: a caller of one group reads a fifth of the copies;
- vectors are re-used, not re-embedded: a copy's sub-chunk text is mapped back to the slice's (title swapped back),
  whose stored vector copy 0 takes as is and copy k > 0 moves by Gaussian noise of norm `--noise` (seeded by k and
  the text), so the copies of one text score apart (cosine ≈ 1/sqrt(1 + noise²) with the slice's).
The copies are published through the product's own steps (publish_documents, publish_units, publish_index), in
stages of `--stage` copies to bound the writer's memory; each stage records the wall and CPU seconds of each step.
`RAG_BENCH_CODE=DIR` publishes with another checkout's code (e.g. the commit before a change), for before/after.
Writes bench/results/replicated[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.results_file import commit, write_results  # noqa: E402  (this checkout's results folder, whatever code runs)

sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
from rag.evaluation.prepared import open_prepared, prepare_workspace  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.documents import content_hash  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.store.text_vectors import matrix  # noqa: E402
from rag.units.linking import first_tokens_of, mentionable, mentioned_titles  # noqa: E402
from rag.units.subchunk_recipe import embedded_text  # noqa: E402

GROUPS = 5


def copy_title(title: str, k: int) -> str:
    return title if k == 0 else f"{title} · {k}"


def slice_links(docs: list[dict]) -> dict[str, list[str]]:
    """Per document, the titles it links to under derive_links (its title mentions, and its own title when other
    documents share it), as plan_units derives them."""
    titles = {d["title"] for d in docs if mentionable(d["title"])}
    first = first_tokens_of(titles)
    shared = {t for t in titles if sum(d["title"] == t for d in docs) > 1}
    return {d["doc_id"]: sorted(mentioned_titles(d["text"], titles, first) | ({d["title"]} & shared)) for d in docs}


def write_copy(folder: Path, docs: list[dict], links: dict[str, list[str]], k: int) -> None:
    with (folder / f"copy-{k:04d}.jsonl").open("w") as f:
        for d in docs:
            f.write(json.dumps({"doc_id": d["doc_id"] if k == 0 else f"r{k}:{d['doc_id']}",
                                "title": copy_title(d["title"], k), "text": d["text"], "acl": [f"group-{k % GROUPS}"],
                                "links": [copy_title(t, k) for t in links[d["doc_id"]]]}, ensure_ascii=False) + "\n")


class CopiedVectors:
    """`embed` for the copies: each text's vector is the slice's for the same sub-chunk, noised for copy k > 0."""

    def __init__(self, vectors: dict[str, np.ndarray], titles: dict[str, str], noise: float):
        self.vectors, self.noise = vectors, noise
        self.of_title = {copy_title(t, k): (t, k) for t in titles for k in range(titles[t])}

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), len(next(iter(self.vectors.values())))), dtype=np.float32)
        for i, text in enumerate(texts):
            title, _, chunk = text.partition("\n")
            slice_title, k = self.of_title[title]
            key = content_hash(embedded_text(slice_title, chunk, 0, len(chunk)))
            vector = self.vectors[key]  # a KeyError: not a slice text, so nothing to re-use (never embedded here)
            if k:
                noise = np.random.default_rng([k, int(key[:12], 16)]).standard_normal(len(vector))
                vector = vector / np.linalg.norm(vector) + noise * (self.noise / math.sqrt(len(vector)))
            out[i] = vector
        return out


def publish(workspace: Path, sources: Path, embed, counter, embedder_name: str) -> dict:
    settings = IngestSettings(sources=[str(sources)], derive_links=False)
    catalog = Catalog(workspace / "catalog.duckdb", entry="bench replicated")
    steps: dict[str, dict] = {}

    def timed(name: str, step, *args):
        wall, cpu = time.perf_counter(), time.process_time()
        out = step(*args)
        steps[name] = {"seconds": round(time.perf_counter() - wall, 1),
                       "cpu_seconds": round(time.process_time() - cpu, 1)}
        return out

    try:
        timed("documents", publish_documents, catalog, settings)
        timed("units", publish_units, catalog, counter, settings)
        report = timed("index", publish_index, catalog, SubchunkIndex(str(workspace / "lancedb")), embed, counter,
                       settings, embedder_name)
    finally:
        catalog.close()
    return {"subchunks": report.subchunks, "new_vectors": report.embedded, "steps": steps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique", help="the in-repo slice copied (samples/benchmarks/NAME)")
    p.add_argument("--subchunks", type=int, default=110_000,
                   help="copies are added until the workspace holds this many")
    p.add_argument("--embedder", choices=("minilm", "minilm-int8"), default="minilm")
    p.add_argument("--noise", type=float, default=0.3, help="norm of the Gaussian noise added to copy k > 0's vectors")
    p.add_argument("--stage", type=int, default=16, help="copies published per run")
    p.add_argument("--workspace", type=Path, help="default: .rag/bench/replicated-BENCHMARK-EMBEDDER-SUBCHUNKS")
    p.add_argument("--resume", action="store_true",
                   help="publish at the last stage even if its copies were written already (an interrupted run)")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    threadpool_limits(limits=1, user_api="blas")  # numpy is loaded: an environment variable set now is not read
    from rag.models.embedders import Embedder

    int8 = args.embedder == "minilm-int8"
    raw, counter = (Embedder(threads=1, int8=True) if int8 else Embedder(threads=1)), default_counter()
    folder = REPO / "samples" / "benchmarks" / args.benchmark
    # The slice's own workspace: .rag/bench/<name> may hold the full benchmark (a bench run with RAG_BENCHMARKS).
    slice_workspace = REPO / ".rag" / "bench" / "slices" / (args.benchmark + ("-minilm-int8" if int8 else ""))
    source = prepare_workspace(folder, slice_workspace, raw, counter)
    per_copy = source.subchunks
    stored = source.reader.snapshot().index.vectors.to_arrow()
    vectors = dict(zip(stored.column("text_hash").to_pylist(), matrix(stored.column("vector"), raw.dimension)))
    source.close()
    copies = math.ceil(args.subchunks / per_copy)
    docs = [json.loads(line) for line in (folder / "docs.jsonl").read_text().splitlines() if line]
    links = slice_links(docs)
    embed = CopiedVectors(vectors, {d["title"]: copies for d in docs}, args.noise)
    default = REPO / ".rag" / "bench" / f"replicated-{args.benchmark}-{args.embedder}-{args.subchunks}"
    workspace = args.workspace or default
    sources = workspace / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    start, stages = time.perf_counter(), []
    for lo in range(0, copies, args.stage):
        new = [k for k in range(lo, min(lo + args.stage, copies)) if not (sources / f"copy-{k:04d}.jsonl").exists()]
        if not new and not (args.resume and lo + args.stage >= copies):
            continue
        for k in new:
            write_copy(sources, docs, links, k)
        t, cpu = time.perf_counter(), time.process_time()
        stages.append({"copies": min(lo + args.stage, copies),
                       **publish(workspace, sources, embed, counter, raw.name),
                       "seconds": round(time.perf_counter() - t, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
                       "load_average": os.getloadavg()[0]})
        print(stages[-1], flush=True)
    built = open_prepared(args.benchmark, workspace, raw, counter)
    groups = [sum(1 for k in range(copies) if k % GROUPS == g) for g in range(GROUPS)]
    figures = {"command": "python bench/replicated.py " + " ".join(sys.argv[1:]), "workspace": str(workspace),
               "benchmark": args.benchmark, "embedder": args.embedder, "slice_subchunks": per_copy, "copies": copies,
               "subchunks": built.subchunks, "documents": built.documents, "units": built.units,
               "copies_per_group": {f"group-{g}": n for g, n in enumerate(groups)},
               "share_of_group_0": round(groups[0] / copies, 3), "noise": args.noise, "checks": built.checks,
               "stages": stages, "build_seconds": round(time.perf_counter() - start, 1),
               "code": os.environ.get("RAG_BENCH_CODE", str(REPO)),
               "commit": commit(os.environ.get("RAG_BENCH_CODE", str(REPO))),
               "load_average": os.getloadavg()}
    built.close()
    write_results(figures, "replicated", args.tag)
    print({k: v for k, v in figures.items() if k != "stages"})


if __name__ == "__main__":
    main()
