"""What the unit planning's scan for titles new to a workspace costs: k new titles against N stored texts.

A catalog of `--documents` documents with distinct texts (the in-repo slices of HotpotQA, MuSiQue and
2WikiMultihopQA, replicated with a copy number added to each title and text, as bench/storage.py's scale run does)
is synced and planned once, so every version's facts are stored; it is kept in `--dir` and re-used. Then, for each
k of `--titles`, k of its titles (the same ones for every code) are looked for in all stored texts through
`FactStore._mentions_of_new_titles`, the step a publish runs when titles are new, `--repeats` times; the least CPU
and wall seconds are kept. `RAG_BENCH_CODE=DIR` runs another checkout's code on the same catalog, for before/after;
`digest` is a hash of the (document, title) pairs found, equal for two codes that find the same mentions.
Writes bench/results/new-titles[-TAG].json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.results_file import commit, write_results  # noqa: E402  (this checkout's results folder, whatever code runs)

sys.path.insert(0, os.environ.get("RAG_BENCH_CODE", str(REPO)))
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.documents import Document  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.facts import FactStore  # noqa: E402
from rag.store.source_log import sync_documents  # noqa: E402

SLICES = ("hotpotqa", "musique", "2wikimultihopqa")
SOURCE = "/bench/new-titles"


def corpus(n: int) -> list[Document]:
    """n documents: the slices' documents, each copy after the first with its copy number in title and text."""
    pool = [json.loads(line) for name in SLICES
            for line in (REPO / "samples" / "benchmarks" / name / "docs.jsonl").read_text().splitlines() if line]
    docs = []
    for k in range(n):
        r, copy = pool[k % len(pool)], k // len(pool)
        title, text = (f"{r['title']} ({copy})", f"{r['text']} (Copy {copy}.)") if copy else (r["title"], r["text"])
        doc_id = f"r{copy}:{r['doc_id']}"
        docs.append(Document(doc_id=doc_id, title=title, text=text, version="1", acl=("all",), links=(),
                             collection="bench", source=SOURCE, source_path=f"{SOURCE}/{doc_id}.md"))
    return docs


def built(folder: Path, n: int, counter) -> tuple[Path, dict]:
    """The planned catalog of n documents in folder (built once), and what building it cost."""
    path, meta = folder / f"catalog-{n}.duckdb", folder / f"built-{n}.json"
    if not meta.exists():
        folder.mkdir(parents=True, exist_ok=True)
        wall, cpu = time.perf_counter(), time.process_time()
        catalog = Catalog(path, entry="bench new_titles")
        try:
            pid = catalog.begin_publish([SOURCE])
            sync_documents(catalog, pid, corpus(n), [], [SOURCE])
            FactStore(catalog, counter).plan_facts()
        finally:
            catalog.close()
        meta.write_text(json.dumps({"seconds": round(time.perf_counter() - wall, 1),
                                    "cpu_seconds": round(time.process_time() - cpu, 1)}))
    return path, json.loads(meta.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--documents", type=int, default=40_000, help="stored documents (distinct texts)")
    p.add_argument("--titles", default="1,100,1000,10000", help="numbers of new titles looked for, comma-separated")
    p.add_argument("--repeats", type=int, default=2, help="each size this many times; the least is kept")
    p.add_argument("--dir", type=Path, default=REPO / ".rag" / "bench" / "new-titles", help="where the catalog is kept")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    counter = default_counter()
    path, build = built(args.dir, args.documents, counter)
    catalog = Catalog(path, entry="bench new_titles")
    try:
        store = FactStore(catalog, counter)
        sizes = [int(k) for k in args.titles.split(",")]
        pool = [t for (t,) in catalog.rows("SELECT DISTINCT title FROM documents WHERE length(title) >= 8 "
                                           "ORDER BY hash(title), title LIMIT ?", [max(sizes)])]
        runs = {}
        for k in sizes:
            new, times = set(pool[:k]), []
            for _ in range(args.repeats):
                wall, cpu = time.perf_counter(), time.process_time()
                found = store._mentions_of_new_titles(new)
                times.append((time.process_time() - cpu, time.perf_counter() - wall))
            pairs = sorted(found)
            runs[k] = {"cpu_seconds": round(min(c for c, _ in times), 3), "seconds": round(min(w for _, w in times), 3),
                       "mentions": len(pairs), "digest": hashlib.sha256(repr(pairs).encode()).hexdigest()[:16]}
            print(f"{k} new titles: {runs[k]}", flush=True)
    finally:
        catalog.close()
    code = os.environ.get("RAG_BENCH_CODE", str(REPO))
    write_results({"command": "python bench/new_titles.py " + " ".join(sys.argv[1:]), "code": code,
                   "commit": commit(code),
                   "documents": args.documents, "catalog_build": build, "repeats": args.repeats,
                   "new_titles": runs, "load_average": os.getloadavg()}, "new-titles", args.tag)


if __name__ == "__main__":
    main()
