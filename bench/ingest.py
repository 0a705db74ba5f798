"""Ingest benchmark: a whole benchmark corpus through the Dagster ingest assets, side by side with bare encoding.

Prints and writes (bench/results/ingest-<name>.json): documents/s, sub-chunks/s, wall time, the overhead
ratio (ingest wall ÷ `model.encode` of the same sub-chunk texts in the same process) and the storage
ratio (rag.store.storage: catalog + published read state + index bytes ÷ the titles and texts).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402
from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.publish import subchunk_rows  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.store.storage import measure  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402
from resources.embedder import EmbedderResource  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", help="a folder with docs.jsonl (default: musique/ under --benchmarks)")
    add_benchmarks_option(parser)
    parser.add_argument("--out", help="JSON file for the figures (default: bench/results/ingest-<name>.json)")
    args = parser.parse_args()
    bench = Path(args.benchmark) if args.benchmark else benchmarks_option(parser, args) / "musique"
    out = Path(args.out or results_path(f"ingest-{bench.name}"))

    t = time.perf_counter()
    model = EmbedderResource().embedder()  # the ingest below re-uses this process-wide instance
    model_load_s = time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        t = time.perf_counter()
        counts = run_ingest(IngestSettings(workspace=str(ws), sources=[str(bench / "docs.jsonl")],
                                            default_acl=("bench",), derive_links=True))
        ingest_s = time.perf_counter() - t

        catalog = Catalog(ws / "catalog.duckdb")
        _, texts = subchunk_rows(catalog.live_units(), catalog, default_counter(), IngestSettings())
        t = time.perf_counter()
        model.encode(texts)
        encode_s = time.perf_counter() - t
        stored = measure(ws / "catalog.duckdb", ws / "lancedb", catalog.raw_text_bytes())
        units = catalog.rows("SELECT count(*), avg(tokens), max(tokens) FROM units WHERE status = 'current'")[0]
        catalog.close()

    figures = {
        "benchmark": bench.name, "documents": counts["documents"], "units": units[0],
        "mean_unit_tokens": round(units[1], 1), "max_unit_tokens": units[2], "subchunks": counts["subchunks"],
        "embedded": counts["embedded"], "checks_passed": counts["checks_passed"],
        "ingest_wall_s": round(ingest_s, 2), "encode_only_s": round(encode_s, 2),
        "model_load_s": round(model_load_s, 2),
        "overhead_ratio": round(ingest_s / encode_s, 3),
        "overhead_ratio_with_model_load": round((ingest_s + model_load_s) / encode_s, 3),
        "documents_per_s": round(counts["documents"] / ingest_s, 1),
        "subchunks_per_s": round(counts["subchunks"] / ingest_s, 1),
        "raw_text_bytes": stored.raw_text_bytes, "catalog_bytes": stored.catalog_bytes,
        "read_state_bytes": stored.read_state_bytes, "index_bytes": stored.index_bytes,
        "storage_ratio": stored.ratio(),
        "command": f"python bench/ingest.py --benchmark {args.benchmark}",
    }
    write_json(out, figures)
    print(markdown_table(["figure", "value"], [[k, v] for k, v in figures.items()]))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
