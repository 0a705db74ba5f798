"""What a partition's run reads of the other partitions, in CPU seconds: the ids two partitions publish
(source_documents) and the other partitions' link targets (long_units), each in a fresh process after its imports.

The workspace is the sample corpus as 4 collections (bench/production.py's layout), ingested once with --partitioned;
several checkouts are timed alternately on it (before, after, before, after, …):

    python bench/partition_reads.py --repos /work/before-21 . --rounds 5 --tag s33
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.production import sources  # noqa: E402

READ = """
import json, resource, sys
from assets.workspace_totals import published_elsewhere
from rag.query.workspace import shared_ids
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start = cpu()
shared, targets = shared_ids(sys.argv[1]), published_elsewhere(sys.argv[1], sys.argv[2])
print(json.dumps({"cpu_s": cpu() - start, "shared": len(shared), "targets": len(targets.ids),
                  "imported": [m for m in ("lance", "lancedb") if m in sys.modules]}))
"""


def read_once(repo: Path, ws: Path, key: str) -> dict:
    done = subprocess.run([sys.executable, "-c", READ, str(ws), key], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, default=[REPO])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="partition-reads-") as tmp:
        corpus, _ = sources(Path(tmp))
        ws = Path(tmp) / "ws"
        subprocess.run([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(corpus), "--workspace",
                        str(ws), "--partitioned", "--json"], cwd=REPO, check=True, capture_output=True)
        samples: dict[str, list[dict]] = {str(r.resolve()): [] for r in args.repos}
        for _ in range(args.rounds):
            for repo in args.repos:
                samples[str(repo.resolve())].append(read_once(repo.resolve(), ws, "corpus/operations"))
    result = {"rounds": args.rounds, "partitions": 4, "load_average": os.getloadavg(), "repos": {
        repo: {"cpu_s_median": round(statistics.median(s["cpu_s"] for s in runs), 3),
               "imported": runs[-1]["imported"], "shared": runs[-1]["shared"], "targets": runs[-1]["targets"],
               "cpu_s": [round(s["cpu_s"], 3) for s in runs]} for repo, runs in samples.items()}}
    for repo, r in result["repos"].items():
        print(f"{repo}: {r['cpu_s_median']} CPU s (median of {args.rounds}); imported {r['imported'] or 'no Lance'}; "
              f"{r['shared']} shared ids, {r['targets']} link targets elsewhere")
    out = REPO / "bench" / "results" / f"partition-reads{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
