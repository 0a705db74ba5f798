"""Sub-chunk search at 110K and 1M rows with a 20% ACL pre-filter: the in-memory matrix against LanceDB.

The rows are a workspace's real MiniLM vectors replicated (each copy with a little noise, unit length again)
into a LanceDB table per size with the normal schema, each row readable by one of five groups (for the LanceDB
modes, a float16 table with a label list on acl and IVF_HNSW_SQ on the vectors, as the index was before its vectors
became int8, which LanceDB cannot search with a float query). Queries are questions (the sample questions by default)
embedded with the workspace's embedder, searched as a caller of one group (20% of the rows). Interleaved per query:
- memory: `rag.retrieval.vectors` (float16 rows grouped by ACL set; an int8 pass over the caller's rows, then
  float16 scores for the rows it cannot rule out);
- lance-flat: LanceDB's exact search with the pre-filter (`bypass_vector_index`);
- lance-ann: LanceDB's ANN index with the pre-filter (what a query used at ≥ 50K rows before).
Reports p50/p95 ms, the top-50 overlap of each with the exact answer, build seconds and bytes. Writes
bench/results/vector-search[-TAG].json.

`--memory-only` times the serving path alone (no LanceDB index build or search), for a caller of one group and
one of all five; `--clock cpu` counts the process's CPU seconds, of the state build too (robust on a shared machine); `RAG_BENCH_CODE=DIR`
runs another checkout's code (the commit before a change, in a git worktree) on the same tables.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402
from rag.models.embedders import load_embedder  # noqa: E402
from rag.retrieval.vectors import load_state  # noqa: E402
from rag.sources.benchmarks import load_questions  # noqa: E402
from rag.store.index import TABLE, SubchunkIndex, schema  # noqa: E402
from rag.store.text_vectors import matrix, vector_array  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

GROUPS = 5
TOP = 50
CALLERS = {"one group (20% of rows)": frozenset({"group-0"}),
           "all five groups": frozenset(f"group-{i}" for i in range(GROUPS))}
clock = time.perf_counter


def replicate(base: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = base[np.arange(size) % len(base)] + rng.normal(0, 0.02, (size, base.shape[1])).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def build(uri: Path, vectors: np.ndarray, indexes: bool = True) -> tuple[SubchunkIndex, float]:
    index = SubchunkIndex(uri)
    if index.count() == len(vectors):
        return index, 0.0
    index.reset("minilm")
    if indexes:  # LanceDB searches float vectors held in the rows: the table as it was before int8 vectors apart
        float16 = pa.field("vector", pa.list_(pa.float16(), vectors.shape[1]))
        import lancedb  # the vector index and search below are LanceDB's, not the writer's Lance calls

        index.table = lancedb.connect(str(uri)).create_table(TABLE, schema=pa.schema([*schema(), float16]),
                                                             mode="overwrite")
    start = time.perf_counter()
    for lo in range(0, len(vectors), 100_000):
        n = min(100_000, len(vectors) - lo)
        ids = [f"u{i}" for i in range(lo, lo + n)]
        rows = {  # each row a unit of its own; the columns of either layout (RAG_BENCH_CODE), the table's kept
            "unit_key": [f"{i}@1" for i in ids], "unit_id": ids, "unit_version": [1] * n,
            "doc_id": ids, "doc_version": ["1"] * n, "part": [0] * n, "member_start": [0] * n, "member_end": [100] * n,
            "acl": [[f"group-{i % GROUPS}"] for i in range(lo, lo + n)], "collection": ["bench"] * n,
            "char_start": [0] * n, "char_end": [100] * n, "tokens": [25] * n, "text_hash": ids}
        rows = {k: v for k, v in rows.items() if k in index.table.schema.names}
        held = index.table if indexes else index.vectors
        stored = vector_array(vectors[lo:lo + n], held.schema.field("vector").type)
        if indexes:
            rows["vector"] = stored
        else:
            index.vectors.add(pa.table({"text_hash": ids, "vector": stored}, schema=index.vectors.schema))
        index.table.add(pa.table(rows, schema=index.table.schema))
    if indexes:
        from lancedb.index import IvfHnswSq, LabelList

        index.table.create_index("acl", config=LabelList(), name="acl_idx")
        index.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"), name="vector_idx")
    return index, time.perf_counter() - start


def lance(index: SubchunkIndex, q: np.ndarray, flat: bool) -> list[str]:
    query = (index.table.search(q).distance_type("cosine").where("array_has_any(acl, ['group-0'])", prefilter=True)
             .limit(200).select(["doc_id"]))
    if flat:
        query = query.bypass_vector_index()
    return query.to_arrow().column("doc_id").to_pylist()


def membership(index: SubchunkIndex):
    """What places the rows of a table built here (each row a unit of its own, `u<i>@1`); None for a checkout whose
    rows name their units (RAG_BENCH_CODE)."""
    try:
        from rag.store.row_units import Membership
    except ImportError:
        return None
    data = index.table.to_lance().to_table(columns=["doc_id", "acl"])
    return Membership.of([(f"{d}@1", 0, 1, d, "1", 0, 0, 100, acl, "bench")
                          for d, acl in zip(data.column("doc_id").to_pylist(), data.column("acl").to_pylist())])


def state_of(index: SubchunkIndex, members):
    return load_state(index) if members is None else load_state(index, membership=members)


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}


def scored(state, q: np.ndarray, groups: frozenset[str]) -> np.ndarray:
    """The nearest 200 rows the groups may read: as a query finds them (the int8 first pass, then float16 where it
    cannot rule a row out), or by one float16 pass in a checkout before it (before the ACL row ranges: every row)."""
    if hasattr(state, "search"):
        return state.search(state.query16(q), groups, 200)[1]
    try:
        scores = state.scores(q, groups)
    except TypeError:
        scores = state.scores(q)
    return state.nearest(scores, state.mask(groups), 200)


def measure_memory(index: SubchunkIndex, queries: np.ndarray) -> dict:
    """The serving path alone: state build, then each caller's search per query."""
    t = clock()  # the membership that places the rows is part of a snapshot's state build
    state = state_of(index, membership(index))
    load_s = clock() - t
    latency = {}
    for name, groups in CALLERS.items():
        scored(state, queries[0], groups)  # the caller's mask and row ranges, built once per group set
        seconds = []
        for q in queries:
            t = clock()
            scored(state, q, groups)
            seconds.append(clock() - t)
        latency[name] = percentiles(seconds)
    int8 = getattr(state, "int8", None)
    return {"rows": len(state), "state_build_s": round(load_s, 2), "matrix_bytes": int(state.matrix.nbytes),
            "matrix_dtype": str(state.matrix.dtype), "latency_ms": latency,
            "int8_bytes": int(int8.codes.nbytes + 3 * int8.scales.nbytes) if int8 is not None else 0}


def measure(index: SubchunkIndex, queries: np.ndarray) -> dict:
    t = time.perf_counter()
    state = state_of(index, membership(index))
    load_s = time.perf_counter() - t
    groups = frozenset({"group-0"})
    t = time.perf_counter()
    state.mask(groups)
    mask_s = time.perf_counter() - t
    seconds = {"memory": [], "lance-flat": [], "lance-ann": []}
    overlap = {"lance-flat": [], "lance-ann": []}
    for q in queries:
        t = time.perf_counter()
        rows = scored(state, q, groups)
        seconds["memory"].append(time.perf_counter() - t)
        exact = set(state.doc_ids[rows[:TOP]].tolist())
        for name, flat in (("lance-flat", True), ("lance-ann", False)):
            t = time.perf_counter()
            keys = lance(index, q, flat)
            seconds[name].append(time.perf_counter() - t)
            overlap[name].append(len(exact & set(keys[:TOP])) / TOP)
    return {"rows": len(state), "state_build_s": round(load_s, 2), "mask_build_ms": round(mask_s * 1000, 2),
            "matrix_bytes": int(state.matrix.nbytes),
            "latency_ms": {k: percentiles(v) for k, v in seconds.items()},
            f"top{TOP}_overlap_with_exact": {k: round(float(np.mean(v)), 4) for k, v in overlap.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[110_000, 1_000_000])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--source", type=Path, default=REPO / ".rag" / "demo",
                   help="a workspace whose vectors are replicated (default: the demo workspace, `rag demo`)")
    p.add_argument("--questions", type=Path, default=REPO / "samples" / "questions.jsonl",
                   help="questions.jsonl whose questions are the queries (default: the sample questions)")
    p.add_argument("--root", type=Path, default=REPO / ".rag" / "bench" / "vector-search")
    p.add_argument("--memory-only", action="store_true", help="time the in-memory serving path alone")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--tag", default="", help="suffix of the results file (e.g. before, after)")
    args = p.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    source = SubchunkIndex.reader(args.source / "lancedb", None)
    base = matrix(source.rows(["doc_id"])[1], source.dimension)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    embedder = load_embedder(threads=1)
    questions = [q.question for q in load_questions(args.questions)][: args.queries]
    queries = embedder.encode(questions)
    figures = {"command": "python bench/vector_search.py " + " ".join(sys.argv[1:]), "source_rows": len(base),
               "code": os.environ.get("RAG_BENCH_CODE", str(REPO)), "clock": args.clock,
               "caller": "one group of five (20% of rows)", "load_average": os.getloadavg(), "sizes": {}}
    out = results_path("vector-search", args.tag)
    for size in args.sizes:
        index, build_s = build(args.root / str(size), replicate(base, size), indexes=not args.memory_only)
        figures["sizes"][str(size)] = {"lance_build_s": round(build_s, 1),
                                       "indices": sorted(i.name for i in index.table.list_indices()),
                                       **(measure_memory if args.memory_only else measure)(index, queries)}
        write_json(out, figures)
        print(size, json.dumps(figures["sizes"][str(size)]), flush=True)
    if args.memory_only:
        print(markdown_table(["rows", *(f"{c} p50/p95 ms" for c in CALLERS), "matrix MB", "state build s"],
                             [[s, *(f"{f['latency_ms'][c]['p50']}/{f['latency_ms'][c]['p95']}" for c in CALLERS),
                               round(f["matrix_bytes"] / 1e6), f["state_build_s"]]
                              for s, f in figures["sizes"].items()]))
        return
    print(markdown_table(["rows", "memory p50/p95", "lance flat p50/p95", "lance ANN p50/p95", "ANN top-50 overlap",
                          "flat top-50 overlap", "matrix MB", "state build s"],
                         [[s, *(f"{f['latency_ms'][k]['p50']}/{f['latency_ms'][k]['p95']}"
                                for k in ("memory", "lance-flat", "lance-ann")),
                           f[f"top{TOP}_overlap_with_exact"]["lance-ann"], f[f"top{TOP}_overlap_with_exact"]["lance-flat"],
                           round(f["matrix_bytes"] / 1e6), f["state_build_s"]] for s, f in figures["sizes"].items()]))


if __name__ == "__main__":
    main()
