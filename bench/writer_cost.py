"""CPU seconds of one writer process: its imports plus one publish (documents, units, index) of the sample corpus,
then a second process re-publishing after one document changed. Embedding is bench/storage.py's stand-in (a vector
drawn from each text's hash), the same in every checkout, so the figures are the writer's own cost.

Several checkouts are timed alternately (before, after, before, after, …), each on a workspace of its own:

    python bench/writer_cost.py --repos /work/before-21 . --rounds 5 --tag s34
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402

PUBLISH = """
import json, resource, sys
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
from bench.storage import fake_embed
from rag.models.tokens import default_counter
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import IngestSettings, publish_documents, publish_index, publish_units
imported = cpu()
ws, corpus = sys.argv[1], sys.argv[2]
catalog, settings = Catalog(ws + "/catalog.duckdb"), IngestSettings(sources=[corpus])
publish_documents(catalog, settings)
publish_units(catalog, default_counter(), settings)
report = publish_index(catalog, SubchunkIndex(ws + "/lancedb"), fake_embed, default_counter(), settings)
catalog.close()
print(json.dumps({"imports_cpu_s": imported, "publish_cpu_s": cpu() - imported, "total_cpu_s": cpu(),
                  "lance_version": report.lance_version, "subchunks": report.subchunks,
                  "lancedb_imported": "lancedb" in sys.modules}))
"""


def publish_once(repo: Path, ws: Path, corpus: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PUBLISH, str(ws), str(corpus)], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    if done.returncode:
        raise SystemExit(f"{repo}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, default=[REPO])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    repos = [r.resolve() for r in args.repos]
    samples: dict[str, dict[str, list[dict]]] = {str(r): {"first": [], "change": []} for r in repos}
    with tempfile.TemporaryDirectory(prefix="writer-cost-") as tmp:
        for k in range(args.rounds):
            for i, repo in enumerate(repos):
                corpus, ws = Path(tmp) / f"corpus{i}-{k}", Path(tmp) / f"ws{i}-{k}"
                shutil.copytree(REPO / "samples" / "corpus", corpus)
                ws.mkdir()
                samples[str(repo)]["first"].append(publish_once(repo, ws, corpus))
                changed = next(iter(sorted(corpus.rglob("*.md"))))
                changed.write_text(re.sub(r"^version: .*$", 'version: "2099"', changed.read_text(), count=1,
                                          flags=re.M) + "\nOne more sentence for the bench.\n")
                samples[str(repo)]["change"].append(publish_once(repo, ws, corpus))
    result = {"rounds": args.rounds, "load_average": os.getloadavg(), "repos": {
        repo: {run: {m: round(statistics.median(s[m] for s in runs), 3)
                     for m in ("imports_cpu_s", "publish_cpu_s", "total_cpu_s")}
               | {"lancedb_imported": runs[-1]["lancedb_imported"], "lance_version": runs[-1]["lance_version"],
                  "subchunks": runs[-1]["subchunks"]}
               for run, runs in by_run.items()} for repo, by_run in samples.items()}}
    for repo, r in result["repos"].items():
        for run, f in r.items():
            print(f"{repo} {run:6s}: {f['total_cpu_s']} CPU s (imports {f['imports_cpu_s']}, publish "
                  f"{f['publish_cpu_s']}; median of {args.rounds}); LanceDB imported: {f['lancedb_imported']}; "
                  f"{f['subchunks']} sub-chunks, table version {f['lance_version']}")
    out = write_results(result, "writer-cost", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
