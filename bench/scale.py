"""Cost of each ingest operation against corpus size, with collections as partitions.

The three English benchmark corpora (15,934 documents) are replicated under new ids into collections of
`--collection-size` documents (every collection holds the same texts, the first ones of the pool) (`scale/c00`, `scale/c01`, …; JSONL files of 500 lines), and grown in stages to
each of `--sizes`. At each size, on collection c00:
- build: the new collections' partitions materialised one after the other (cumulative: a partition is built
  once, from scratch, whatever the stage; vectors of texts another partition already embedded are re-used);
- sensor tick: discovering the partitions and fingerprinting every file (what decides that nothing changed);
- no-change run: one partition materialised with nothing changed (the nightly sweep, per partition);
- edit: one document of c00 gets a new version; seconds until its partition's run has published it;
- delete: one document of c00 is removed; seconds until the queries of a warm reader in another process stop
  returning it, and until the run has finished.
Then a backfill: two fresh partitions of distinct texts, built serially in one process and in parallel in two
processes (one torch thread each), wall time side by side.
Prints a table, writes bench/results/scale.json and bench/results/scale.png.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import RESULTS, write_results  # noqa: E402
from pipelines.ingest_run import run_partitions  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402
from rag.sources.partitions import discover  # noqa: E402
from rag.sources.watch import fingerprint, snapshot  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]
LINES_PER_FILE = 500


WATCHER = """
import sys, time
from rag.retrieval.callers import Caller
from rag.query.workspace import Workspace
ws, question, doc_id = Workspace(sys.argv[1]), sys.argv[2], sys.argv[3]
ids = lambda: {i.doc_id for i in ws.retrieve("longrag", Caller(frozenset({"bench"})), question, 4000).items}
print("visible" if doc_id in ids() else "absent", flush=True)
sys.stdin.readline()
start = time.perf_counter()
while doc_id in ids():
    time.sleep(0.05)
print(round(time.perf_counter() - start, 2), flush=True)
"""


def pool(root: Path) -> list[dict]:
    docs = []
    for name in NAMES:
        docs += [json.loads(line) for line in (root / name / "docs.jsonl").read_text().splitlines() if line]
    return docs


def write_collection(folder: Path, docs: list[dict], prefix: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f, start in enumerate(range(0, len(docs), LINES_PER_FILE)):
        lines = [json.dumps({**d, "doc_id": f"{prefix}-{d['doc_id']}", "acl": ["bench"]}, ensure_ascii=False)
                 for d in docs[start:start + LINES_PER_FILE]]
        (folder / f"part-{f:03d}.jsonl").write_text("\n".join(lines) + "\n")


def collection_docs(all_docs: list[dict], size: int) -> list[dict]:
    """The same documents in every collection (under the collection's ids): each text is embedded once."""
    return [all_docs[i % len(all_docs)] for i in range(size)]


def ingest(ws: Path, src: Path, keys: list[str]) -> tuple[float, dict]:
    t = time.perf_counter()
    counts = run_partitions(IngestSettings(workspace=str(ws), sources=[str(src)], derive_links=True, wait_s=600), keys)
    return time.perf_counter() - t, counts


def rewrite_line(path: Path, index: int, change) -> dict:
    lines = path.read_text().splitlines()
    record = json.loads(lines[index])
    changed = change(record)
    if changed is None:
        del lines[index]
    else:
        lines[index] = json.dumps(changed, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n")
    return record


def operations(ws: Path, src: Path, round_: int) -> dict:
    part = src / "c00" / f"part-{round_:03d}.jsonl"
    t = time.perf_counter()
    specs = discover([str(src)], ws)
    prints = {s.key: fingerprint(snapshot(s.folder, s.selection)) for s in specs}
    tick_s = time.perf_counter() - t
    no_change_s, _ = ingest(ws, src, ["scale/c00"])

    stamp = f"{int(time.time())}"   # a newer version label on every run of the benchmark
    edited = rewrite_line(part, 1, lambda r: {**r, "version": stamp, "text": r["text"] + f" Revised at {stamp}."})
    edit_s, edit_counts = ingest(ws, src, ["scale/c00"])

    gone = rewrite_line(part, 2, lambda r: None)
    # The reader is a process of its own, as `rag serve` is: it follows the snapshot pointer between queries.
    reader = subprocess.Popen([sys.executable, "-c", WATCHER, str(ws), gone["title"] + " " + gone["text"][:200],
                               gone["doc_id"]], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    visible_before = reader.stdout.readline().strip() == "visible"
    reader.stdin.write("go\n")
    reader.stdin.flush()
    delete_s, delete_counts = ingest(ws, src, ["scale/c00"])
    try:
        out, _ = reader.communicate(timeout=120)
        hidden_s = float(out.strip())
    except subprocess.TimeoutExpired:
        reader.kill()
        hidden_s = None
    return {"partitions": len(prints), "sensor_tick_s": round(tick_s, 2), "no_change_run_s": round(no_change_s, 2),
            "edit_published_s": round(edit_s, 2), "edit_embedded": edit_counts["embedded"],
            "delete_visible_before": visible_before,
            "delete_invisible_s": hidden_s, "delete_published_s": round(delete_s, 2),
            "deleted": delete_counts["deleted"], "checks_passed": edit_counts["checks_passed"]
            and delete_counts["checks_passed"], "edited": edited["doc_id"], "deleted_doc": gone["doc_id"]}


def backfill(root: Path, all_docs: list[dict], size: int) -> dict:
    shutil.rmtree(root / "backfill", ignore_errors=True)
    src = root / "backfill" / "src"
    for j, name in enumerate(("b0", "b1")):
        write_collection(src / name, all_docs[j * size:(j + 1) * size], name)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def cli(ws: Path, *keys: str) -> subprocess.Popen:
        flags = [a for k in keys for a in ("--partition", k)]
        return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(src),
                                 "--workspace", str(ws), "--derive-links", "titles", *flags], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL)

    t = time.perf_counter()
    assert cli(root / "backfill" / "serial", "src/b0", "src/b1").wait() == 0
    serial_s = time.perf_counter() - t
    t = time.perf_counter()
    procs = [cli(root / "backfill" / "parallel", key) for key in ("src/b0", "src/b1")]
    assert all(p.wait() == 0 for p in procs)
    parallel_s = time.perf_counter() - t
    return {"documents_per_partition": size, "serial_s": round(serial_s, 1), "parallel_s": round(parallel_s, 1),
            "parallel_over_serial": round(parallel_s / serial_s, 3)}


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["documents"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, label in (("build_total_s", "full build (cumulative)"), ("sensor_tick_s", "sensor tick (no change)"),
                       ("no_change_run_s", "no-change run of one partition"), ("edit_published_s", "one-document edit"),
                       ("delete_invisible_s", "deletion invisible"), ("delete_published_s", "deletion republished")):
        ax.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("documents in the workspace")
    ax.set_ylabel("seconds")
    ax.set_title("Ingest cost against corpus size (collections of 10K as partitions)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)


def ops_again(root: Path) -> None:
    src, ws = root / "scale", root / "ws"
    size = sum(1 for folder in src.iterdir() for f in folder.glob("*.jsonl") for _ in f.open())
    first_s, _ = ingest(ws, src, ["scale/c00"])  # a catalog from before the change may need a migration run
    row = {"documents": size, "first_run_after_change_s": round(first_s, 2), **operations(ws, src, 0)}
    out = {"after_change": row, "command": "python bench/scale.py --ops-only"}
    write_results(out, "scale-ops")
    print(markdown_table(list(row), [list(row.values())]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    p.add_argument("--collection-size", type=int, default=10_000)
    p.add_argument("--backfill-docs", type=int, default=1_000)
    p.add_argument("--root", type=Path, default=REPO / ".rag" / "bench" / "scale",
                   help="where the corpus and workspaces live; an existing one is grown, not rebuilt")
    p.add_argument("--ops-only", action="store_true",
                   help="measure the operations again on the workspace as it is (after a code change), without "
                        "building; writes bench/results/scale-ops.json")
    add_benchmarks_option(p)
    args = p.parse_args()
    if args.ops_only:
        return ops_again(args.root)
    all_docs = pool(benchmarks_option(p, args))
    src, ws = args.root / "scale", args.root / "ws"
    rows, build_total = [], 0.0
    for round_, size in enumerate(args.sizes):
        have = {s.key for s in discover([str(src)], ws)} if src.exists() else set()
        new = []
        for j in range(size // args.collection_size):
            key = f"scale/c{j:02d}"
            if key not in have:
                write_collection(src / f"c{j:02d}", collection_docs(all_docs, args.collection_size), f"c{j:02d}")
                new.append(key)
        build_s, counts = ingest(ws, src, new) if new else (0.0, {"embedded": 0})
        build_total += build_s
        row = {"documents": size, "build_new_partitions_s": round(build_s, 1), "build_total_s": round(build_total, 1),
               "build_embedded": counts["embedded"], **operations(ws, src, round_)}
        rows.append(row)
        print(markdown_table(list(row), [list(row.values())]), flush=True)
    figures = {"sizes": rows, "backfill": backfill(args.root, all_docs, args.backfill_docs),
               "threads": "in-process runs: torch default (2); backfill: 1 torch thread per process",
               "command": "python bench/scale.py " + " ".join(sys.argv[1:])}
    write_results(figures, "scale")
    plot(rows, RESULTS / "scale.png")
    keys = list(rows[0])
    print(markdown_table(keys, [[r[k] for k in keys] for r in rows]))
    print(markdown_table(list(figures["backfill"]), [list(figures["backfill"].values())]))


if __name__ == "__main__":
    main()
