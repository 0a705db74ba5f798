"""Do the index's B-trees earn their bytes? CPU per look-up with and without them, by table size (issue 23).

A reader looks up the sub-chunk rows of a few documents (`SubchunkIndex.rows_of_docs`: rows by `doc_id`, then their
vectors by `text_hash`) when a unit's rows are not in its cache yet and for every as-of read. For each table size,
one table of synthetic rows (2 sub-chunks a document, each text its own int8 vector, appended in 20 parts with
each publish's upkeep after each) is built twice, with and without the B-trees, and each look-up of `--docs` random documents
is timed in CPU seconds of the process (Lance's threads included). Prints a table and writes
bench/results/index_lookup[-TAG].json.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_file import results_path, write_json  # noqa: E402
from rag.store.index import SubchunkIndex, SubchunkRow  # noqa: E402

FRAGMENTS = 20


def build(folder: Path, rows: int, indexed: bool) -> tuple[SubchunkIndex, list[str]]:
    """A table of `rows` rows (2 a document) appended in `FRAGMENTS` parts, with its B-trees or without."""
    index = SubchunkIndex(folder)
    docs = [f"bench:{i:08x}" for i in range(rows // 2)]
    rng = np.random.default_rng(0)
    for part in np.array_split(np.arange(len(docs)), FRAGMENTS):
        batch = [SubchunkRow(docs[d], "1", 0, 0, 400, ("bench",), "default", 200 * s, 200 * s + 199, 100,
                             f"{d:016x}{s:016x}") for d in part for s in range(2)]
        index.add(batch, rng.normal(size=(len(batch), 384)).astype(np.float32))
        index.ensure_indexes() if indexed else index.maintain()   # each publish's upkeep, as the writer does
    return index, docs


def lookups(index: SubchunkIndex, docs: list[str], k: int, repeat: int) -> dict:
    rnd = random.Random(1)
    cpu, found = 0.0, 0
    for _ in range(repeat):
        sample = rnd.sample(docs, k)
        start = time.process_time()
        table, _ = index.rows_of_docs(sample, [])
        cpu += time.process_time() - start
        found += table.num_rows
    return {"cpu_ms": round(1000 * cpu / repeat, 2), "rows": found // repeat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="15000,60000,240000", help="comma-separated table sizes")
    parser.add_argument("--docs", type=int, default=20, help="documents a look-up asks for")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--tag")
    args = parser.parse_args()
    out = {"docs": args.docs, "repeat": args.repeat, "fragments": FRAGMENTS, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            size = {}
            for indexed in (True, False):
                folder = Path(tmp) / f"{rows}-{indexed}"
                index, docs = build(folder, rows, indexed)
                size["with_btrees" if indexed else "without"] = {
                    **lookups(index, docs, args.docs, args.repeat),
                    "indices": sorted(i.name for i in index.table.list_indices())
                    + sorted(i.name for i in index.vectors.to_lance().describe_indices())}
            out["sizes"][str(rows)] = size
            print(f"{rows:>8} rows: with B-trees {size['with_btrees']['cpu_ms']} CPU ms a look-up of "
                  f"{args.docs} documents, without {size['without']['cpu_ms']}", flush=True)
    out["load_1m_at_end"] = round(os.getloadavg()[0], 1)   # the machine is shared: CPU time, not wall, is compared
    print(f"wrote {write_json(results_path('index_lookup', args.tag), out)}")


if __name__ == "__main__":
    main()
