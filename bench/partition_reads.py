"""What a partition's run reads of the other partitions, at several partition counts: CPU seconds, bytes read
and partition catalogs loaded by the shared-id check (`shared_ids`, what source_documents' metadata and the CLI
report call), by the run's document publish (which updates the id record, after issue 21) and by the
cross-collection link targets (`published_elsewhere`, long_units), each timed in a fresh process after its imports.

Each workspace holds N partitions of `--docs` small documents (documents only: neither check reads units or an
index); one run changes one document of the first partition. Several checkouts are timed alternately on a
workspace each built with their own code:

    python bench/partition_reads.py --repos /work/before-21 . --partitions 4 16 64 --rounds 3 --tag s34
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

from bench.results_file import write_results  # noqa: E402

BUILD = """
import sys
from pathlib import Path
from rag.sources.partitions import claim_store, resolve, store
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings
src, ws = sys.argv[1], Path(sys.argv[2])
for key in sys.argv[3:]:
    s = store(ws, key)
    claim_store(s)
    cat = Catalog(s.catalog_path)
    publish_documents(cat, IngestSettings(sources=[src]).for_partition(resolve([src], key, ws)))
    cat.close()
"""

RUN = """
import json, resource, sys
from pathlib import Path
from assets.workspace_totals import published_elsewhere
from rag.query.workspace import shared_ids
from rag.sources.partitions import resolve, store
from rag.store import union_catalog
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings
src, ws, key, text, target = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], Path(sys.argv[5])
loads, load = [], union_catalog.load_read_state
union_catalog.load_read_state = lambda *a, **k: (loads.append(1), load(*a, **k))[1]
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
def read_bytes():
    return int(next(l for l in open("/proc/self/io") if l.startswith("rchar")).split()[1])
def timed(step):
    del loads[:]
    cpu0, bytes0 = cpu(), read_bytes()
    out = step()
    return out, {"cpu_s": cpu() - cpu0, "bytes_read": read_bytes() - bytes0, "catalogs_loaded": len(loads)}
target.write_text(text)
def publish():
    cat = Catalog(store(ws, key).catalog_path)
    try:
        return publish_documents(cat, IngestSettings(sources=[src]).for_partition(resolve([src], key, ws)))[0]
    finally:
        cat.close()
changes, publish_cost = timed(publish)
shared, check_cost = timed(lambda: shared_ids(ws))
targets, links_cost = timed(lambda: published_elsewhere(str(ws), key))
print(json.dumps({"publish": publish_cost, "shared_check": check_cost, "link_targets": links_cost,
                  "changed": len(changes.new), "shared": len(shared), "targets": len(targets.ids)}))
"""

DOC = "---\nid: {id}\ntitle: {title}\nacl: [staff]\n---\n{text}\n"


def corpus(root: Path, partitions: int, docs: int) -> tuple[Path, list[str]]:
    """`partitions` collections of `docs` documents each; one id is published by the first two (a shared id)."""
    src = root / "src"
    for p in range(partitions):
        folder = src / f"c{p:03d}"
        folder.mkdir(parents=True)
        for d in range(docs):
            doc_id = "shared-policy" if d == 0 and p < 2 else f"c{p:03d}-d{d:03d}"
            body = " ".join(f"Collection {p} document {d} sentence {s} about topic {(p * docs + d) % 97}."
                            for s in range(12))
            (folder / f"d{d:03d}.md").write_text(DOC.format(id=doc_id, title=f"{doc_id} title", text=body))
    return src, [f"src/c{p:03d}" for p in range(partitions)]


def run(repo: Path, args: list[str], script: str) -> str:
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    if done.returncode:
        raise SystemExit(f"{repo}: {done.stderr.strip().splitlines()[-1]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def measure(repos: list[Path], partitions: int, docs: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="partition-reads-") as tmp:
        src, keys = corpus(Path(tmp), partitions, docs)
        for i, repo in enumerate(repos):
            run(repo, [str(src), str(Path(tmp) / f"ws{i}"), *keys], BUILD)
        samples: dict[str, list[dict]] = {str(r): [] for r in repos}
        target = src / "c000" / "d001.md"
        for k in range(rounds):
            text = f"---\nid: c000-d001\ntitle: c000-d001 title\nacl: [staff]\nversion: '{k + 2}'\n---\nRevised {k}.\n"
            for i, repo in enumerate(repos):
                samples[str(repo)].append(json.loads(run(repo, [str(src), str(Path(tmp) / f"ws{i}"), keys[0],
                                                                text, str(target)], RUN)))
    return {repo: summary(runs) for repo, runs in samples.items()}


def summary(runs: list[dict]) -> dict:
    steps = ("publish", "shared_check", "link_targets")
    out = {step: {m: round(statistics.median(r[step][m] for r in runs), 4) if m == "cpu_s" else
                  int(statistics.median(r[step][m] for r in runs)) for m in ("cpu_s", "bytes_read", "catalogs_loaded")}
           for step in steps}
    return out | {"changed": runs[-1]["changed"], "shared": runs[-1]["shared"], "targets": runs[-1]["targets"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", nargs="+", type=Path, default=[REPO])
    p.add_argument("--partitions", nargs="+", type=int, default=[4, 16, 64])
    p.add_argument("--docs", type=int, default=40, help="documents per partition")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    repos = [r.resolve() for r in args.repos]
    result = {"rounds": args.rounds, "docs_per_partition": args.docs, "load_average": os.getloadavg(),
              "by_partitions": {}}
    for n in args.partitions:
        result["by_partitions"][n] = figures = measure(repos, n, args.docs, args.rounds)
        for repo, f in figures.items():
            print(f"{n:3d} partitions  {repo}: " + "; ".join(
                f"{step} {f[step]['cpu_s']} CPU s, {f[step]['bytes_read'] / 1e6:.2f} MB read, "
                f"{f[step]['catalogs_loaded']} catalogs" for step in ("publish", "shared_check", "link_targets"))
                  + f" ({f['shared']} shared ids, {f['changed']} changed)")
    out = write_results(result, "partition-reads", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
