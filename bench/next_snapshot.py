"""What a serving worker pays for the next snapshot after a small publish, this checkout's code against `--before
DIR`'s, in one run.

In a workspace made by bench/replicated.py, a worker (a process of its own, the code under test first on its path)
opens the workspace as `rag serve` does and reads every part of the published state (mapped from the host's files,
or built once); one copy's file is then taken out of the sources (every document of it deleted) and a writer process
publishes the change (documents, units and index steps; no text is new, so nothing is embedded). The worker then
asks again and builds the new snapshot's read state, part by part (`WARM_PARTS`): wall and CPU seconds of each, and
the megabytes of files it wrote; then asks a few questions on the new snapshot (their latency, and the answers that
both codes must share). The workspace's catalog, snapshots and index are set aside first and put back
before every run and at the end. Runs go ABBA (after, before, before, after). Writes
bench/results/next-snapshot[-TAG].json.

    python bench/next_snapshot.py --workspace .rag/bench/replicated-musique-minilm-1000000 --before OTHER_CHECKOUT \\
        --tag 1m
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.publish_change import copy_state, delete_one  # noqa: E402
from bench.results_file import commit, write_results  # noqa: E402

KEPT = ("catalog.duckdb", "catalog.duckdb.wal", "snapshots", "lancedb")  # what a publish writes
QUESTION = "Which company produced the film that the director of the documentary worked on?"
QUESTIONS = (QUESTION, "Who was the spouse of the performer of the song?", "In which country was the founder born?",
             "When did the war that the general fought in end?", "What river flows through the capital city?")
ROUNDS = 3  # each question asked this many times on the new snapshot; the first round is not timed


def publish(workspace: Path) -> dict:
    """The writer: the three steps of a publish, timed (CPU seconds)."""
    from rag.models.tokens import default_counter
    from rag.store.catalog import Catalog
    from rag.store.index import SubchunkIndex
    from rag.store.publish import publish_documents, publish_index, publish_units
    from rag.store.settings import IngestSettings

    def nothing_to_embed(texts):
        raise AssertionError(f"{len(texts)} texts to embed: a deletion adds none")

    settings, counter = IngestSettings(sources=[str(workspace / "sources")], derive_links=False), default_counter()
    catalog, out = Catalog(workspace / "catalog.duckdb", entry="bench next_snapshot"), {}
    try:
        for name, step in (("documents", lambda: publish_documents(catalog, settings)),
                           ("units", lambda: publish_units(catalog, counter, settings)),
                           ("index", lambda: publish_index(catalog, SubchunkIndex(str(workspace / "lancedb")),
                                                           nothing_to_embed, counter, settings, "minilm"))):
            cpu = time.process_time()
            step()
            out[name] = round(time.process_time() - cpu, 2)
    finally:
        catalog.close()
    return out


def worker(workspace: Path) -> dict:
    """Read the published state, have the change published, then build the next snapshot's state part by part."""
    from rag.models.embedders import Embedder
    from rag.query.workspace import Workspace
    from rag.retrieval.callers import Caller
    from rag.retrieval.read_state import WARM_PARTS

    embedder = Embedder(threads=1)
    reader, caller = Workspace(workspace, embedder=embedder), Caller(frozenset({"group-0"}))
    reader.retrieve("longrag", caller, QUESTION, 2000)
    reader.snapshot().warm()
    path = delete_one(workspace / "sources")
    try:
        time.sleep(2.1)  # past the window in which an unchanged stat is not trusted (rag.sources.scan.RACY_NS)
        done = subprocess.run([sys.executable, __file__, "--publish", str(workspace)], capture_output=True, text=True,
                              check=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    finally:
        path.with_suffix(".removed").rename(path)
    before = set(files(workspace / "read_state"))
    wall, cpu = time.perf_counter(), time.process_time()
    snapshot, parts = reader.snapshot(), {}
    for part in WARM_PARTS:
        part_wall, part_cpu = time.perf_counter(), time.process_time()
        getattr(snapshot, part)
        parts[part] = {"seconds": round(time.perf_counter() - part_wall, 2),
                       "cpu_seconds": round(time.process_time() - part_cpu, 2)}
    answer = reader.retrieve("longrag", caller, QUESTION, 2000).items
    after = files(workspace / "read_state")
    answers, query_ms = [], []
    for round_ in range(ROUNDS):
        for question in QUESTIONS:
            start = time.perf_counter()
            found = reader.retrieve("longrag", caller, question, 2000).items
            query_ms += [(time.perf_counter() - start) * 1000] if round_ else []
            answers += [[[i.doc_id, i.doc_version, round(i.score, 6)] for i in found]] if not round_ else []
    written = [f for f in after if f not in before]
    return {"publish_cpu_seconds": json.loads(done.stdout.splitlines()[-1]),
            "next_snapshot": {"seconds": round(time.perf_counter() - wall, 2),
                              "cpu_seconds": round(time.process_time() - cpu, 2), "parts": parts,
                              "written_mb": round(sum(after[f] for f in written) / 2**20, 1)},
            "query_ms_on_it": {"p50": round(float(np.percentile(query_ms, 50)), 1),
                               "p90": round(float(np.percentile(query_ms, 90)), 1)},
            "answer": [[[i.doc_id, i.doc_version, round(i.score, 6)] for i in answer], *answers]}


def files(folder: Path) -> dict[tuple[int, int], int]:
    """Every file under the folder, by inode (a file linked into a new snapshot's folder is not written again), with
    its size."""
    return {(s.st_dev, s.st_ino): s.st_size for f in folder.rglob("*") if f.is_file() and (s := f.stat())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, help="a workspace bench/replicated.py made")
    p.add_argument("--before", type=Path, help="another checkout (e.g. the commit before a change)")
    p.add_argument("--publish", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a stopped run still puts the workspace back
    if args.publish or args.worker:
        sys.path.insert(0, os.environ["RAG_BENCH_CODE"])  # the code under test before this checkout's
        print(json.dumps(publish(args.publish) if args.publish else worker(args.worker)))
        return
    if not (args.workspace and args.before):
        p.error("--workspace and --before are required")
    workspace, runs = args.workspace.resolve(), []
    with tempfile.TemporaryDirectory(dir=workspace.parent) as tmp:
        aside = Path(tmp)
        copy_state(workspace, aside, KEPT)
        try:
            for code in (REPO, args.before.resolve(), args.before.resolve(), REPO):
                copy_state(aside, workspace, KEPT)
                done = subprocess.run([sys.executable, __file__, "--worker", str(workspace)], capture_output=True,
                                      text=True, cwd=code,
                                      env=os.environ | {"RAG_BENCH_CODE": str(code), "OMP_NUM_THREADS": "1"})
                if done.returncode:
                    sys.exit(f"the worker of {code} failed:\n{done.stderr[-3000:]}")
                found = json.loads(done.stdout.splitlines()[-1])
                runs.append({"code": "." if code == REPO else "OTHER_CHECKOUT", **found,
                             "load_average": os.getloadavg()[0]})
                print(runs[-1]["code"], runs[-1]["next_snapshot"], flush=True)
        finally:
            copy_state(aside, workspace, KEPT)
    answers = {json.dumps(r.pop("answer")) for r in runs}
    write_results({"command": "python bench/next_snapshot.py " + " ".join(sys.argv[1:]), "after": commit(str(REPO)),
                   "before": commit(str(args.before)), "order": "after, before, before, after",
                   "same_answers": len(answers) == 1, "runs": runs}, "next-snapshot", args.tag)


if __name__ == "__main__":
    main()
