"""CPU seconds of one in-process ingest run (`rag ingest`'s Dagster run) and how many times it opens its catalog for
writing: a first run of the sample corpus, then reruns with nothing changed and with one file edited.

    python bench/run_catalog_opens.py --repos /work/before-21 . --runs 5 --tag s36

Each checkout runs in a process of its own (its code first on the path, one thread), the same corpus and steps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402

CHILD = r"""
import json, os, shutil, sys, tempfile, time
from pathlib import Path
from rag.store import catalog as catalog_module
from rag.store.settings import IngestSettings
from pipelines.ingest_run import run_ingest

opens = []
real_init = catalog_module.Catalog.__init__


def counted(self, *args, **kw):
    real_init(self, *args, **kw)
    opens.extend([self.path] if not self.read_only else [])


catalog_module.Catalog.__init__ = counted
root = Path(tempfile.mkdtemp())
corpus = root / "corpus"
shutil.copytree(Path(sys.argv[1]) / "samples" / "corpus", corpus)
settings = IngestSettings(sources=[str(corpus)], workspace=str(root / "workspace"))
runs = []
for i in range(1 + 2 * int(sys.argv[2])):
    kind = "first" if i == 0 else ("unchanged" if i % 2 else "one file edited")
    if kind == "one file edited":
        (corpus / "operations" / "bench-edit.md").write_text(f"---\nid: bench-edit\nacl: [support]\n---\nEdit {i}.\n")
    opens.clear()
    cpu = time.process_time()
    run_ingest(settings)
    runs.append({"kind": kind, "cpu_s": time.process_time() - cpu, "writer_opens": len(opens)})
shutil.rmtree(root)
print(json.dumps(runs))
"""


def measure(code: Path, runs: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("DAGSTER_HOME", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(code), str(runs)], cwd=code, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, required=True, help="checkouts, run one after the other")
    p.add_argument("--runs", type=int, default=5, help="reruns of each kind (unchanged, one file edited)")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    results = []
    for repo in args.repos:
        runs = measure(repo.resolve(), args.runs)
        summary = {kind: {"cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs if r["kind"] == kind), 3),
                          "writer_opens": sorted({r["writer_opens"] for r in runs if r["kind"] == kind})}
                   for kind in ("first", "unchanged", "one file edited")}
        results.append({"repo": str(repo.resolve()), "summary": summary, "runs": runs,
                        "load_average_after": os.getloadavg()[0]})
        print(f"{repo.resolve()}: " + "; ".join(f"{k}: {v['cpu_s_median']} CPU s, {v['writer_opens']} writer opens"
                                                  for k, v in summary.items()), flush=True)
    out = write_results({"runs_per_kind": args.runs, "results": results}, "run-catalog-opens", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
