"""What a serving worker pays to build its read state after a publish, stage by stage (CPU and wall seconds).

Builds (once, under .rag/bench/read-state-rebuild) the serve-load workspace (HotpotQA's docs.jsonl, one group per
document), warms a reader as a worker does, then re-publishes with a real ingest, once per `--changes` count
(documents given a new version), and times the new snapshot's read state in the same process (what a running
worker pays, re-using what it holds) against the first, cold build. An ingest publishes twice (documents, then
the index), so a worker serving through it builds twice; this times the second. `RAG_BENCH_CODE=DIR` times another
checkout's read side on the same workspace. `--benchmarks DIR` takes a larger HotpotQA (its own workspace, named by
its size). Writes bench/results/read-state-rebuild[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("RAG_BENCH_CODE", str(REPO)))
sys.path.insert(0, str(REPO))
from bench.results_file import write_results  # noqa: E402  (this checkout's results folder, whatever CODE is)

sys.path.insert(0, str(CODE))

from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

READ_SIDE = Path(sys.modules["rag"].__file__).parent.parent  # the checkout whose rag/ runs: CODE's
from bench.serve_load import corpus  # noqa: E402  (its own rag imports: READ_SIDE's, already loaded)

STAGES = ("open", "current", "member_table", "vectors", "code_rows", "unit_codes", "lexical")


def timed_build(ws: Workspace) -> dict[str, dict[str, float]]:
    """Open the newest snapshot and build each part of its read state, with the CPU and wall seconds of each."""
    out, snap = {}, None
    for stage in STAGES:
        c, w = time.process_time(), time.perf_counter()
        if stage == "open":
            snap = ws.snapshot()
        else:
            getattr(snap, stage)
        out[stage] = {"cpu_s": round(time.process_time() - c, 4), "wall_s": round(time.perf_counter() - w, 4)}
    out["total"] = {k: round(sum(v[k] for v in out.values()), 4) for k in ("cpu_s", "wall_s")}
    return out


def revise(src: Path, n: int, seed: int) -> int:
    """Give `n` random documents of the source their next version, with one more sentence."""
    rng, lines = random.Random(seed), src.read_text().splitlines()
    chosen = set(rng.sample(range(len(lines)), n))
    out = []
    for i, line in enumerate(lines):
        doc = json.loads(line)
        if i in chosen:
            doc = doc | {"version": str(int(doc["version"]) + 1), "text": doc["text"] + " It was revised again."}
        out.append(json.dumps(doc))
    src.write_text("\n".join(out) + "\n")
    return len(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmarks_option(p)
    p.add_argument("--changes", type=int, nargs="+", default=[1, 50], help="documents revised per re-publish")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    docs = benchmarks_option(p, args) / "hotpotqa"
    size = sum(1 for _ in (docs / "docs.jsonl").open())
    # the in-repo slice's workspace keeps its name; a larger corpus (--benchmarks) gets one of its own
    root = REPO / ".rag" / "bench" / ("read-state-rebuild" + ("" if size == 500 else f"-{size}"))
    src, _ = corpus(docs, root, args.seed)
    settings = IngestSettings(workspace=str(root / "workspace"), sources=[str(src)], derive_links=True)
    run_ingest(settings)
    ws = Workspace(root / "workspace")
    first = timed_build(ws)
    runs = []
    for k, n in enumerate(args.changes):
        documents = revise(src, n, args.seed + 10 + k)
        run_ingest(settings)
        running = timed_build(ws)   # a running worker: its cache holds the previous snapshot's state
        runs.append({"changed_documents": n, "documents": documents, "running_worker": running})
        print(f"{n} of {documents} documents revised: a running worker {running['total']['cpu_s']:.3f} CPU s "
              f"({running['total']['wall_s']:.3f} s wall); by stage (CPU s): "
              + ", ".join(f"{s} {running[s]['cpu_s']:.3f}" for s in STAGES), flush=True)
    figures = {"first_build": first, "republishes": runs, "code": str(READ_SIDE), "load_average": os.getloadavg(),
               "command": "python bench/read_state_rebuild.py " + " ".join(sys.argv[1:])}
    write_results(figures, "read-state-rebuild", args.tag)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
