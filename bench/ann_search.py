"""Dense search past RAM: the IVF of rag.retrieval.ivf against the exact pass, on synthetic rows at 110K, 1M and 3M.

The rows are a two-level Gaussian mixture in 384 dimensions (topics, 50 subtopics each, rows around a subtopic) at
unit length in float16, a fifth readable by each of five groups, grouped by ACL set as a snapshot's rows are. Each
size's read state (the `vectors` part: float16 and int8 rows, and the IVF's centroids, lists and list-ordered int8
codes) is written once with rag.retrieval.state_files, as a host's first worker writes it; each mode then runs in a
fresh process that maps those files, as every other worker does, and searches as a caller of one group (20% of the
rows) for the nearest 200 rows (LongRAG's overfetch) of queries drawn from the same mixture (rows not stored):
- exact: VectorState.search below RAG_ANN_MIN_ROWS (an int8 pass over the caller's rows, float16 where needed);
- ivf: the same call with RAG_ANN_MIN_ROWS=0
(with `--before`, both modes again with another checkout's code, on the same files).
Reports per mode p50/p95 ms per search (wall and CPU: the machine is shared), the time from mapping the files to the
first search's answer (the imports not counted), the IVF's recall of the exact top 50,
its build seconds (training, assigning, ordering), the files' bytes, and each search process's peak RSS, USS and
file-backed resident memory; then projects the IVF's p50 and a host's memory to 10M rows (the model is written with
the figures). Writes bench/results/ann-search[-TAG].json.

    python bench/ann_search.py --sizes 110000 1000000 --tag 1m
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

DIMENSION, GROUPS, TOP, LIMIT, BLOCK = 384, 5, 50, 200, 100_000
MEMORY = ("Rss", "Anonymous", "Private_Clean", "Private_Dirty")


def mixture(size: int, seed: int) -> np.ndarray:
    """The subtopic centres of a size's rows: size / 5,000 topics (at least 8), 50 subtopics each."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(max(8, size // 5000), DIMENSION)).astype(np.float32)
    return topics[np.arange(len(topics) * 50) // 50] + rng.normal(size=(len(topics) * 50, DIMENSION)).astype(
        np.float32) * 0.7


def draw(centres: np.ndarray, count: int, rng: np.random.Generator, noise: float) -> np.ndarray:
    rows = centres[rng.integers(0, len(centres), count)] + rng.normal(size=(count, DIMENSION)).astype(np.float32) * noise
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float16)


def real_vectors(workspace: Path, questions: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """A workspace's stored sub-chunk vectors at unit length, and the questions embedded with MiniLM."""
    from rag.models.embedders import load_embedder
    from rag.sources.benchmarks import load_questions
    from rag.store.index import SubchunkIndex
    from rag.store.text_vectors import matrix

    source = SubchunkIndex.reader(workspace / "lancedb", None)
    base = matrix(source.rows(["doc_id"])[1], source.dimension)
    asked = [q.question for path in questions for q in load_questions(path)]
    return base / np.linalg.norm(base, axis=1, keepdims=True), load_embedder("minilm", threads=1).encode_queries(asked)


def write_state(size: int, folder: Path, seed: int, noise: float, real: tuple | None) -> dict:
    """The size's rows and queries (drawn around a mixture's subtopics, or around a real workspace's vectors and
    its questions), and its read state's `vectors` part written with the IVF (times of each step)."""
    from rag.retrieval import ivf
    from rag.retrieval.state_files import StateFiles
    from rag.retrieval.strings import strings_of
    from rag.retrieval.vectors import VectorState, vector_arrays

    folder.mkdir(parents=True, exist_ok=True)
    os.environ["RAG_ANN_MIN_ROWS"] = "0"  # the part is written with its IVF at every size
    centres = mixture(size, seed) if real is None else real[0]
    np.save(folder / "queries.npy", draw(centres, 400, np.random.default_rng([seed, 1]), noise).astype(np.float32)
            if real is None else real[1].astype(np.float32))
    files = StateFiles(folder / "state", "rows")
    if files.has("vectors"):
        return json.loads((folder / "build.json").read_text())
    matrix = np.lib.format.open_memmap(folder / "rows.npy", "w+", np.float16, (size, DIMENSION))
    for lo in range(0, size, BLOCK):
        matrix[lo:lo + BLOCK] = draw(centres, min(BLOCK, size - lo), np.random.default_rng([seed, 2, lo]), noise)
    ids, rows = np.arange(size), np.load(folder / "rows.npy", mmap_mode="r")
    state = VectorState(rows, strings_of([f"u{i}@1" for i in ids // 8]), strings_of([f"d{i}" for i in ids // 8]),
                        (ids % 8).astype(np.int32), np.zeros(size, np.int32), np.full(size, 100, np.int32),
                        (ids * GROUPS // size).astype(np.int32), [frozenset({f"group-{g}"}) for g in range(GROUPS)])
    seconds = {}
    for step, run in (("int8", lambda: state.quantized), ("ivf", lambda: ivf.ready(state)),
                      ("write", lambda: files.part("vectors", lambda: vector_arrays(state)))):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        seconds[step] = {"wall_s": round(time.perf_counter() - wall, 1), "cpu_s": round(time.process_time() - cpu, 1)}
    part = folder / "state" / "rows" / "vectors"
    sizes = {p.stem: p.stat().st_size for p in part.glob("*.npy")}
    built = {"build": seconds, "lists": int(len(state.ann.centroids)), "trained_rows": int(state.ann.trained),
             "ivf_bytes": sum(v for k, v in sizes.items() if k.startswith("ivf_")),
             "exact_bytes": sum(v for k, v in sizes.items() if not k.startswith("ivf_")),
             "bytes": {k: v for k, v in sorted(sizes.items())}}
    (folder / "build.json").write_text(json.dumps(built))
    return built


def child(folder: Path, mode: str) -> None:
    """One worker's searches (run with RAG_ANN_MIN_ROWS set by the parent): it maps the files and reports."""
    from rag.retrieval.state_files import StateFiles
    from rag.retrieval.vectors import vector_state

    began, began_cpu = time.perf_counter(), time.process_time()
    state = vector_state(StateFiles(folder / "state", "rows").part("vectors", refuse))
    queries, groups, mapped = np.load(folder / "queries.npy"), frozenset({"group-0"}), memory_mb()
    state.search(state.query16(queries[0]), groups, LIMIT)  # the caller's mask and row ranges, built once
    first = {"wall_s": round(time.perf_counter() - began, 2), "cpu_s": round(time.process_time() - began_cpu, 2)}
    seconds, cpu, found = [], [], []
    for q in queries[1:]:
        wall, used = time.perf_counter(), time.process_time()
        near = state.search(state.query16(q), groups, LIMIT)[1]
        seconds.append(time.perf_counter() - wall)
        cpu.append(time.process_time() - used)
        found.append(near[:TOP])
    np.save(folder / f"top-{mode}.npy", np.array(found))
    print(json.dumps({"wall_ms": percentiles(seconds), "cpu_ms": percentiles(cpu), "memory_mb": memory_mb(),
                      "memory_mapped_mb": mapped, "first_search": first}))


def refuse():
    raise RuntimeError("the search process found no written read state")


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}


def memory_mb() -> dict:
    """This process's smaps_rollup (MB): USS = Private_Clean + Private_Dirty (a file page no other process maps is
    private too); file-backed = Rss − Anonymous (the pages of the files and libraries it touched); peak RSS."""
    found = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        if name in MEMORY:
            found[name] = int(value.split()[0]) / 1024
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"rss": round(found["Rss"], 1), "uss": round(found["Private_Clean"] + found["Private_Dirty"], 1),
            "anonymous": round(found["Anonymous"], 1),
            "file_backed": round(found["Rss"] - found["Anonymous"], 1),
            "peak_rss": round(int(status["VmHWM"].split()[0]) / 1024, 1)}


def search_process(folder: Path, mode: str, code: Path = REPO) -> dict:
    """One mode's searches in a fresh process running the bench (and rag/) of the checkout `code`."""
    env = {**os.environ, "RAG_ANN_MIN_ROWS": "0" if mode == "ivf" else str(10**12), "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, str(code / "bench" / "ann_search.py"), "--child", mode, "--root",
                          str(folder)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def recall(folder: Path) -> float:
    exact, ivf = np.load(folder / "top-exact.npy"), np.load(folder / "top-ivf.npy")
    return round(float(np.mean([len(set(a) & set(b)) / TOP for a, b in zip(exact.tolist(), ivf.tolist())])), 4)


def projection(sizes: dict, target: int = 10_000_000) -> dict:
    """The IVF's p50 at `target` rows: a + b·√rows (a probe visits NPROBE lists of ~√rows / 2 rows each; a search
    keeps scores for the rows it scored only), fitted on the sizes measured; files and resident memory grow with
    the rows."""
    from rag.retrieval import ivf

    rows = np.array([int(s) for s in sizes], dtype=np.float64)
    cpu = np.array([f["ivf"]["cpu_ms"]["p50"] for f in sizes.values()])
    fit = np.polyfit(np.sqrt(rows), cpu, 1) if len(rows) > 1 else np.array([0.0, cpu[0]])
    largest = str(int(rows.max()))
    per_row = {k: sizes[largest][k] / rows.max() for k in ("ivf_bytes", "exact_bytes")}
    codes = DIMENSION + 4 + 8  # a row's list-ordered int8 codes, scale and place in the order: what a probe reads
    bytes_of = sizes[largest]["bytes"]
    others = (sizes[largest]["exact_bytes"] - bytes_of["matrix"] - bytes_of["int8_codes"]) / rows.max()
    # build: k-means on the sample, then every row against every centroid, at the rate the largest size's build ran
    flops = {int(n): (min(int(n), ivf.SAMPLE_ROWS, ivf.SAMPLE_PER_LIST * ivf.list_count(int(n))) * ivf.ITERATIONS
                      + int(n)) * ivf.list_count(int(n)) * 2 * DIMENSION for n in [rows.max(), target]}
    rate = flops[int(rows.max())] / sizes[largest]["build"]["ivf"]["cpu_s"]
    return {"rows": target, "model": "p50 CPU ms = a + b·√rows; a host "
                                     "keeps the IVF's codes, scales and order resident (the probes read them) and "
                                     "reads the float16 rows of the rows rescored and of the units ranked; a first "
                                     "build's CPU seconds = its multiply-adds at the largest size's rate (a next "
                                     "snapshot's costs its new rows only)",
            "ivf_build_cpu_s": round(flops[target] / rate), "gflops_per_cpu_s": round(rate / 1e9, 1),
            "other_per_row_arrays_gb": round(others * target / 1e9, 2),
            "lists": ivf.list_count(target), "rows_per_probe": round(ivf.NPROBE * target / ivf.list_count(target)),
            "ivf_p50_cpu_ms": round(float(np.polyval(fit, np.sqrt(target))), 1),
            "fit": [round(float(v), 5) for v in fit],
            "files_gb": round((per_row["ivf_bytes"] + per_row["exact_bytes"]) * target / 1e9, 1),
            "ivf_resident_gb": round(codes * target / 1e9, 1),
            "float16_rows_gb": round(2 * DIMENSION * target / 1e9, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[110_000, 1_000_000])
    p.add_argument("--root", type=Path, default=REPO / ".rag" / "bench" / "ann-search")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--noise", type=float, default=0.5, help="a row's spread around its subtopic (per dimension; the "
                   "subtopics lie 0.7 from their topic), or around a --source vector: nearest neighbours less distinct")
    p.add_argument("--source", type=Path, help="a workspace whose vectors are replicated with --noise instead")
    p.add_argument("--questions", type=Path, nargs="+", default=[], help="questions.jsonl files: with --source, the "
                   "queries (embedded with MiniLM)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu", help="which time the table shows")
    p.add_argument("--before", type=Path, help="another checkout: both modes run its code on the same files too")
    p.add_argument("--tag", default="")
    p.add_argument("--child", choices=("exact", "ivf"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args.root, args.child)
    figures = {"command": "python bench/ann_search.py " + " ".join(sys.argv[1:]), "clock": args.clock,
               "caller": "one group of five (20% of rows)", "limit": LIMIT, "noise": args.noise, "load_average": os.getloadavg(),
               "sizes": {}}
    real = real_vectors(args.source, args.questions) if args.source else None
    if real is not None:
        figures.update(source=str(args.source.name), source_rows=len(real[0]), queries=len(real[1]))
    for size in args.sizes:
        folder = args.root / f"{size}-{args.noise:g}-{args.seed}{'-' + args.source.name if args.source else ''}"
        found = {"rows": size, **write_state(size, folder, args.seed, args.noise, real)}
        for mode in ("exact", "ivf"):
            found[mode] = search_process(folder, mode)
        if args.before:
            for mode in ("exact", "ivf"):
                found[f"{mode}_before"] = search_process(folder, mode, args.before)
        found["recall_at_50"] = recall(folder)
        figures["sizes"][str(size)] = found
        print(size, json.dumps(found), flush=True)
    figures["projection"] = projection(figures["sizes"])
    write_json(results_path("ann-search", args.tag or None), figures)
    key = "cpu_ms" if args.clock == "cpu" else "wall_ms"
    print(markdown_table(["rows", "exact p50/p95 ms", "IVF p50/p95 ms", "recall@50", "IVF build s (cpu)",
                          "files MB (exact + IVF)", "IVF process anon / file-backed MB (after mapping)"],
                         [[s, f"{f['exact'][key]['p50']}/{f['exact'][key]['p95']}",
                           f"{f['ivf'][key]['p50']}/{f['ivf'][key]['p95']}", f["recall_at_50"],
                           f["build"]["ivf"]["cpu_s"], f"{f['exact_bytes'] // 10**6} + {f['ivf_bytes'] // 10**6}",
                           f"{f['ivf']['memory_mb']['anonymous']} / {f['ivf']['memory_mb']['file_backed']} "
                           f"({f['ivf']['memory_mapped_mb']['anonymous']} / {f['ivf']['memory_mapped_mb']['file_backed']})"]
                          for s, f in figures["sizes"].items()]))
    print(json.dumps(figures["projection"]))


if __name__ == "__main__":
    main()
