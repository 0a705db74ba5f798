"""What a small change costs a publish into one large partition, this checkout's code against `--before DIR`'s.

In a workspace made by bench/replicated.py: a one-document edit (one line of one copy, its text revised) and the
deletion of one copy's file. Each run times the documents and units steps (wall and CPU seconds, in a process of
its own) and commits the staged units as the index step would; the index step is not run. The workspace's catalog
and snapshots are set aside first and put back before every run and at the end, so every run starts from the same
published state and the workspace is left as it was. Runs go ABBA (after, before, before, after) per change.
Writes bench/results/publish-change[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.results_file import commit, write_results  # noqa: E402

KEPT = ("catalog.duckdb", "catalog.duckdb.wal", "snapshots")   # what the documents and units steps write


def run_steps(workspace: Path) -> dict:
    """The documents and units steps with RAG_BENCH_CODE's code (this process), timed; the units committed."""
    sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
    from rag.models.tokens import default_counter
    from rag.store.catalog import Catalog
    from rag.store.publish import publish_documents, publish_units
    from rag.store.settings import IngestSettings

    settings = IngestSettings(sources=[str(workspace / "sources")], derive_links=False)
    counter = default_counter()
    catalog = Catalog(workspace / "catalog.duckdb", entry="bench publish_change")
    out = {}
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        changes, _ = publish_documents(catalog, settings)
        out["documents"] = {"seconds": round(time.perf_counter() - wall, 2),
                            "cpu_seconds": round(time.process_time() - cpu, 2),
                            "new": len(changes.new), "updated_in_place": len(changes.updated_in_place),
                            "deleted": len(changes.deleted)}
        wall, cpu = time.perf_counter(), time.process_time()
        plan, units = publish_units(catalog, counter, settings)
        out["units"] = {"seconds": round(time.perf_counter() - wall, 2),
                        "cpu_seconds": round(time.process_time() - cpu, 2), "published": len(units.published),
                        "retired": len(units.retired), "unchanged": units.unchanged,
                        "components_replanned": plan.replanned}
        catalog.commit_units(catalog.running_publish(), 0, 0)
    finally:
        catalog.close()
    return out


def edit_one(sources: Path) -> Path:
    """A new version of the first document of copy 1, its text revised, in place; the file to put back."""
    path = sources / "copy-0001.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record.update(version="2", text=record["text"] + " This paragraph was revised.")
    path.write_text("\n".join([json.dumps(record, ensure_ascii=False), *lines[1:]]) + "\n")
    return path


def delete_one(sources: Path) -> Path:
    """Take copy 2's file out of the sources (every document of one copy deleted)."""
    path = sources / "copy-0002.jsonl"
    path.rename(path.with_suffix(".removed"))
    return path


CHANGES = {"one_edit": edit_one, "one_copy_deleted": delete_one}


def measure(workspace: Path, code: Path, change: str | None, aside: Path | None) -> dict:
    """One run of `change` (None: the sources as they are), with `code`, from the set-aside state (if any); the
    sources put back after."""
    if aside is not None:
        copy_state(aside, workspace)
    path = workspace / "sources" / ("copy-0001.jsonl" if change == "one_edit" else "copy-0002.jsonl")
    original = path.read_bytes()
    if change:
        CHANGES[change](workspace / "sources")
    time.sleep(2.1)   # past the window in which an unchanged stat is not trusted (rag.sources.scan.RACY_NS)
    try:
        done = subprocess.run([sys.executable, __file__, "--steps", str(workspace)], capture_output=True, text=True,
                              env={**os.environ, "RAG_BENCH_CODE": str(code), "OMP_NUM_THREADS": "1"}, check=True)
    finally:
        path.with_suffix(".removed").unlink(missing_ok=True)
        path.write_bytes(original)
    return {"code": str(code), **json.loads(done.stdout.splitlines()[-1]), "load_average": os.getloadavg()[0]}


def copy_state(source: Path, dest: Path, names: tuple[str, ...] = KEPT) -> None:
    """The files the documents and units steps write (or `names`), from one folder to another (replacing them)."""
    dest.mkdir(exist_ok=True)
    for name in names:
        target = dest / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        if (source / name).exists():
            (shutil.copytree if (source / name).is_dir() else shutil.copy2)(source / name, target)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, help="a workspace bench/replicated.py made")
    p.add_argument("--before", type=Path, help="another checkout (e.g. the commit before a change)")
    p.add_argument("--steps", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    if args.steps:
        print(json.dumps(run_steps(args.steps)))
        return
    if not (args.workspace and args.before):
        p.error("--workspace and --before are required")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # a stopped run still puts the workspace back
    workspace, order = args.workspace.resolve(), [REPO, args.before.resolve(), args.before.resolve(), REPO]
    (documents,), = _rows(workspace, "SELECT count(*) FROM documents WHERE status = 'current'")
    (units,), = _rows(workspace, "SELECT count(*) FROM units WHERE status = 'current'")
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(dir=workspace.parent) as tmp:
        original, aside, settled = Path(tmp) / "original", {}, {}
        copy_state(workspace, original)
        try:
            # Each code's runs start from a state its own code planned (what a store has after its first publish
            # with that code): publishes of an edit and of its undoing, from the workspace as it was, until one of
            # them has merged the snapshot's segments (more than MAX_SEGMENTS: a whole table rewritten, ~1 min at
            # 1M), so that no measured run pays the merge a store pays once in many publishes.
            for code in order[:2]:
                copy_state(original, workspace)
                settled[str(code)] = []
                while not settled[str(code)] or not merged(workspace) and len(settled[str(code)]) < 20:
                    settled[str(code)] += [measure(workspace, code, "one_edit", None),
                                           measure(workspace, code, None, None)]
                aside[code] = Path(tmp) / f"settled-{len(aside)}"
                copy_state(workspace, aside[code])
            for change in CHANGES:
                runs[change] = []
                for code in order:
                    runs[change].append(measure(workspace, code, change, aside[code]))
                    print(change, runs[change][-1], flush=True)
        finally:
            copy_state(original, workspace)
    write_results({"command": "python bench/publish_change.py " + " ".join(sys.argv[1:]), "documents": documents,
                   "units": units, "after": commit(str(REPO)), "before": commit(str(args.before)),
                   "order": "after, before, before, after", "settled": settled, "runs": runs}, "publish-change",
                  args.tag)
    for change, rs in runs.items():
        for r in rs:
            print(change, "after " if r["code"] == str(REPO) else "before", "documents", r["documents"]["cpu_seconds"],
                  "units", r["units"]["cpu_seconds"], "CPU s; units published", r["units"]["published"],
                  "retired", r["units"]["retired"])


def merged(workspace: Path) -> bool:
    """Whether the published snapshot's large tables each lie in few segments (merged not long ago)."""
    pointer = json.loads((workspace / "snapshots" / "CURRENT").read_text())
    tables = json.loads((workspace / "snapshots" / pointer["file"]).read_text())["tables"]
    return all(len(tables[t]) <= 8 for t in ("documents", "units", "unit_members"))


def _rows(workspace: Path, sql: str) -> list[tuple]:
    import duckdb
    with duckdb.connect(str(workspace / "catalog.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


if __name__ == "__main__":
    main()
