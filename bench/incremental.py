"""Work proportional to the change: a run with no change and a one-document edit, full vs incremental.

The three benchmark corpora (HotpotQA, MuSiQue, 2WikiMultihopQA; the first N lines of each for the smaller
size) are published into a catalog with title-derived links. The workspace is then copied twice and the
same runs are timed on both copies side by side: "full" re-reads every file and re-plans every unit from
the texts (`IngestSettings.rescan`, what every run did before), "incremental" reads only changed files
and lines and re-plans only components whose signature changed. Timed: the documents and units steps
(what this change touches), each followed by committing the staged units as the index step does; the
index step itself (embedding only new sub-chunks) is not part of these figures.
Prints a table and writes bench/results/incremental.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.publish import publish_documents, publish_units  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]
SIZES = [4_000, None]   # None: every document of the three corpora (15,934)
STORED = ("doc_facts", "doc_parts", "doc_mentions", "mention_titles", "group_members",
          "component_groups",  # the groups' table before group_members (RAG_BENCH_CODE)
          "source_files", "source_records")


def copy_sources(root: Path, dest: Path, size: int | None) -> int:
    dest.mkdir()
    total = sum(len((root / n / "docs.jsonl").read_text().splitlines()) for n in NAMES)
    kept = 0
    for name in NAMES:
        lines = (root / name / "docs.jsonl").read_text().splitlines()
        if size:
            lines = lines[: round(len(lines) * size / total)]
        (dest / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        kept += len(lines)
    return kept


def step(workspace: Path, settings: IngestSettings) -> dict:
    """One documents + units run, the staged units committed; wall times and what each step did."""
    catalog = Catalog(workspace / "catalog.duckdb")
    try:
        t0 = time.perf_counter()
        changes, _ = publish_documents(catalog, settings)
        t1 = time.perf_counter()
        plan, units = publish_units(catalog, default_counter(), settings)
        t2 = time.perf_counter()
        catalog.commit_units(catalog.running_publish(), 0, 0)
    finally:
        catalog.close()
    return {"documents_s": round(t1 - t0, 3), "units_s": round(t2 - t1, 3), "total_s": round(t2 - t0, 3),
            "new_versions": len(changes.new), "lines_parsed": changes.reading["lines_parsed"],
            "documents_tokenised": plan.facts_computed, "components_replanned": plan.replanned,
            "units_published": len(units.published)}


def edit_one(src: Path) -> str:
    """Give one MuSiQue paragraph a new version with a revised text, in place (no other line moves)."""
    path = src / "musique.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[20])
    record.update(version="2", text=record["text"] + " This paragraph was revised in version 2.")
    lines[20] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    return f"{record['doc_id']} v2"


def _catalog_mb(workspace: Path, without: tuple[str, ...] = ()) -> float:
    """Size of the catalog file, optionally of a copy without the given tables (what the stored state costs)."""
    path = workspace / "catalog.duckdb"
    if without:
        copy = workspace.parent / "size-probe" / "catalog.duckdb"
        copy.parent.mkdir(exist_ok=True)
        catalog = Catalog(path)
        try:
            catalog.con.execute(f"ATTACH '{copy}' AS probe")
            for (table,) in catalog.rows("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"):
                if table not in without:
                    catalog.con.execute(f"CREATE TABLE probe.{table} AS SELECT * FROM {table}")
            catalog.con.execute("DETACH probe")
        finally:
            catalog.close()
        path = copy
    return round(path.stat().st_size / 2**20, 1)


def measure(root: Path, size: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "sources"
        documents = copy_sources(root, src, size)
        time.sleep(2.1)   # past the window in which an unchanged stat is not trusted (rag.sources.scan.RACY_NS)
        base = dict(sources=[str(src)], default_acl=("bench",), derive_links=True)
        build = step(Path(tmp) / "build", IngestSettings(**base))
        for mode in ("full", "incremental"):
            shutil.copytree(Path(tmp) / "build", Path(tmp) / mode)
        modes = {"full": IngestSettings(**base, rescan=True), "incremental": IngestSettings(**base)}
        out = {"documents": documents, "build": build, "catalog_mb": _catalog_mb(Path(tmp) / "build"),
               "catalog_mb_without_stored_facts": _catalog_mb(Path(tmp) / "build", without=STORED)}
        out["no_change"] = {m: step(Path(tmp) / m, s) for m, s in modes.items()}
        out["edited"] = edit_one(src)
        out["one_edit"] = {m: step(Path(tmp) / m, s) for m, s in modes.items()}
        for scenario in ("no_change", "one_edit"):
            full, inc = out[scenario]["full"], out[scenario]["incremental"]
            out[scenario]["ratio_total"] = round(inc["total_s"] / full["total_s"], 4)
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_benchmarks_option(p)
    root = benchmarks_option(p, p.parse_args())
    results = [measure(root, size) for size in SIZES]
    rows = []
    for r in results:
        for scenario in ("no_change", "one_edit"):
            for mode in ("full", "incremental"):
                m = r[scenario][mode]
                rows.append([r["documents"], scenario, mode, m["documents_s"], m["units_s"], m["total_s"],
                             m["lines_parsed"], m["documents_tokenised"], m["components_replanned"],
                             m["units_published"]])
    figures = {"sizes": results, "command": "python bench/incremental.py " + " ".join(sys.argv[1:]),
               "timed": "documents + units steps on a real catalog, staged units committed; index step excluded"}
    write_results(figures, "incremental")
    print(markdown_table(["documents", "run", "mode", "documents s", "units s", "total s", "lines parsed",
                          "tokenised", "components re-planned", "units published"], rows))
    for r in results:
        print(f"{r['documents']} documents: build {r['build']['total_s']} s, catalog {r['catalog_mb']} MB "
              f"({r['catalog_mb_without_stored_facts']} MB without the stored facts and file records); incremental/full "
              f"no change {r['no_change']['ratio_total']}, one edit {r['one_edit']['ratio_total']}")


if __name__ == "__main__":
    main()
