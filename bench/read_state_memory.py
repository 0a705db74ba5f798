"""Where a snapshot's read state (what a serving process holds per published snapshot) keeps its memory, part by part.

Opens a built workspace (e.g. bench/replicated.py's at 110K sub-chunks), then builds the read state's parts in the
order a server warms them (rag.retrieval.read_state.WARM_PARTS), recording for each its CPU seconds, the process's
resident memory after it, and the peak reached while building it (VmHWM, reset before each part). Then it walks
every object each part holds and splits the bytes by field: numpy arrays by nbytes, Python objects (strings,
tuples, dicts, dataclass rows) by sys.getsizeof, each object counted once, under the first part that reaches it.
Last, what of the resident growth is free memory the allocators keep: RSS after Arrow's pool releases its unused
memory, then after glibc's malloc_trim. Arrays mapped from the read state's files (rag.retrieval.state_files) are
counted apart ("mapped MB": page cache every worker of the host shares); `--fresh` removes the workspace's
`read_state` folder first, so that the parts are built and written, not mapped. bench/read_state_workers.py measures
several workers side by side.
`RAG_BENCH_CODE=DIR` measures another checkout's code on the same workspace. Prints the tables and writes
bench/results/read-state-memory[-TAG].json.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import mmap
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(1, str(REPO))

from bench.results_file import commit, write_results  # noqa: E402
from rag.evaluation.prepared import open_prepared  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.retrieval.read_state import WARM_PARTS  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

MB = 1 << 20


def status_mb() -> dict:
    """This process's resident memory now and at its peak since the last reset (VmRSS, VmHWM), in MB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": int(status["VmRSS"].split()[0]) / 1024, "peak_mb": int(status["VmHWM"].split()[0]) / 1024}


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: writing 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


class Sizer:
    """Deep sizes of object graphs, each object counted once across every call (shared strings go to the first)."""

    def __init__(self):
        self.seen: set[int] = set()

    def size(self, root) -> tuple[int, int, int, int]:
        """(numpy bytes in memory, numpy bytes mapped from files, Python object bytes, Python objects) reachable from
        root and not counted before."""
        arrays = mapped = python = objects = 0
        stack = [root]
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or obj is None or isinstance(obj, (type, bool)):
                continue
            self.seen.add(id(obj))
            if isinstance(obj, np.ndarray):
                if is_mapped(obj):
                    mapped += obj.nbytes if not isinstance(obj.base, np.ndarray) or is_file(obj.base) else 0
                elif obj.base is None or not isinstance(obj.base, np.ndarray):
                    arrays += obj.nbytes
                if obj.dtype == object:
                    python += obj.size * 8
                    stack.extend(obj.ravel().tolist())
                continue
            python += sys.getsizeof(obj)
            objects += 1
            if isinstance(obj, dict):
                stack.extend(obj.keys())
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple, set, frozenset)):
                stack.extend(obj)
            elif hasattr(obj, "__dataclass_fields__"):  # its values lie inline (3.11): vars() would add a dict
                python += 8 * len(obj.__dataclass_fields__)
                stack.extend(getattr(obj, f, None) for f in obj.__dataclass_fields__)
            elif hasattr(obj, "__dict__") and not callable(obj):
                stack.append(vars(obj))
            elif hasattr(obj, "__slots__"):
                stack.extend(getattr(obj, s, None) for s in obj.__slots__)
        return arrays, mapped, python, objects


def is_mapped(array: np.ndarray) -> bool:
    """Whether the array's memory is a mapped file (a read-state part)."""
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, mmap.mmap)


def is_file(array: np.ndarray) -> bool:
    """Whether the array is the whole mapped file (np.load's memmap), not a slice of one."""
    return isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap)


def fields(part: str, value) -> dict:
    """A part's fields worth splitting: dataclass fields and the attributes its properties keep."""
    if part == "lexical":
        out = {"vocab": getattr(value.vocab, "ids", value.vocab)}
        for i, p in enumerate(value.parts):
            out |= {f"parts[{i}].texts (token ids per text)": p.texts,
                    f"parts[{i}].doc_ids": p.doc_ids, f"parts[{i}].counts.indptr": p.counts.indptr,
                    f"parts[{i}].counts.indices": p.counts.indices, f"parts[{i}].counts.data": p.counts.data,
                    f"parts[{i}].lengths": p.lengths}
        return out
    if isinstance(value, np.ndarray):
        return {"": value}
    names = list(getattr(value, "__dataclass_fields__", {})) or list(vars(value))
    names += [n for n in vars(value) if n not in names]
    return {n: getattr(value, n) for n in names}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, required=True, help="a built workspace (bench/replicated.py's)")
    p.add_argument("--benchmark", default="musique", help="the benchmark the workspace was copied from")
    p.add_argument("--tag", default="")
    p.add_argument("--fresh", action="store_true", help="remove the workspace's read-state files first")
    args = p.parse_args()
    if args.fresh:
        shutil.rmtree(args.workspace / "read_state", ignore_errors=True)
    threadpool_limits(limits=1, user_api="blas")  # numpy is loaded: an environment variable set now is not read
    from rag.models.embedders import Embedder

    prepared = open_prepared(args.benchmark, args.workspace, Embedder(threads=1), default_counter())
    snap = prepared.reader.snapshot()
    gc.collect()
    opened = status_mb()
    build = {}
    for part in WARM_PARTS:
        reset_peak()
        before, cpu = status_mb(), time.process_time()
        snap.build(part)
        if part == "vectors":
            snap.vectors.quantized  # the int8 copy a first search builds
            snap.vectors.rows_of_unit
        gc.collect()
        after = status_mb()
        build[part] = {"cpu_seconds": round(time.process_time() - cpu, 2),
                       "rss_added_mb": round(after["rss_mb"] - before["rss_mb"], 1),
                       "peak_above_start_mb": round(after["peak_mb"] - before["rss_mb"], 1)}
    built = status_mb()
    # what of the build's growth is free memory the allocators keep: glibc's heap (malloc_trim) and Arrow's pool
    arrow = {"allocated_mb": round(pa.total_allocated_bytes() / MB, 1), "backend": pa.default_memory_pool().backend_name}
    pa.default_memory_pool().release_unused()
    arrow_released = status_mb()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = status_mb()
    sizer, rows = Sizer(), []
    values = {part: getattr(snap, part) for part in WARM_PARTS}
    values["shared cache (texts, unit rows)"] = {"texts": snap._shared.texts, "units": snap._shared.units}
    for part, value in values.items():
        for name, field in (fields(part, value) if part in WARM_PARTS else value).items():
            arrays, mapped, python, objects = sizer.size(field)
            if arrays + mapped + python:
                rows.append({"part": part, "field": name, "numpy_mb": round(arrays / MB, 1),
                             "mapped_mb": round(mapped / MB, 1), "python_mb": round(python / MB, 1),
                             "python_objects": objects})
    subchunks = snap.index.count()
    totals = {part: round(sum(r["numpy_mb"] + r["python_mb"] for r in rows if r["part"] == part), 1)
              for part in values}
    mapped = {part: round(sum(r["mapped_mb"] for r in rows if r["part"] == part), 1) for part in values}
    figures = {"command": "python bench/read_state_memory.py " + " ".join(sys.argv[1:]),
               "code": os.environ.get("RAG_BENCH_CODE", str(REPO)),
               "commit": commit(os.environ.get("RAG_BENCH_CODE", str(REPO))), "subchunks": subchunks,
               "documents": len(snap.current.versions), "members": len(snap.member_table.rows),
               "units": len(snap.current.members), "load_average": os.getloadavg(),
               "memory_mb": {"opened": opened, "built": built, "arrow_pool": arrow,
                             "after_arrow_release_unused": arrow_released, "after_malloc_trim": trimmed,
                             "read_state_rss_mb": round(built["rss_mb"] - opened["rss_mb"], 1)},
               "build": build, "fields": rows, "part_totals_mb": totals, "part_mapped_mb": mapped,
               "bytes_per_subchunk": round(sum(totals.values()) * MB / max(subchunks, 1))}
    write_results(figures, "read-state-memory", args.tag)
    print(markdown_table(["part", "CPU s", "RSS added MB", "peak above start MB", "held MB (walked)", "mapped MB"],
                         [[k, v["cpu_seconds"], v["rss_added_mb"], v["peak_above_start_mb"], totals.get(k, ""),
                           mapped.get(k, "")] for k, v in build.items()]))
    print(markdown_table(["part", "field", "numpy MB", "mapped MB", "Python MB", "Python objects"],
                         [list(r.values()) for r in sorted(rows, key=lambda r: -(r["numpy_mb"] + r["python_mb"]))]))
    print(f"{subchunks} sub-chunks, {figures['documents']} documents, {figures['members']} members; "
          f"RSS opened {opened['rss_mb']:.0f} MB, built {built['rss_mb']:.0f} MB, after Arrow's release "
          f"{arrow_released['rss_mb']:.0f} MB ({arrow}), after malloc_trim {trimmed['rss_mb']:.0f} MB; walked "
          f"{sum(totals.values()):.0f} MB = {figures['bytes_per_subchunk']} bytes per sub-chunk; load {os.getloadavg()}")
    prepared.close()


if __name__ == "__main__":
    main()
