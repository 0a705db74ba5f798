"""CPU seconds of one `rag ingest` process of the sample corpus, as a test starts it, without the tests' shared
vectors, with an empty folder of them (the process embeds and shares every text) and with the folder it filled
(every text is read): what a process that a test starts saves once another process has embedded its texts.

    python bench/shared_vectors.py --rounds 2 --tag s39
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402

FOLDER_ENV = "RAG_TEST_EMBEDDINGS"   # tests/embedding_memo/shared_vectors.py


def ingest_cpu(workspace: Path, shared: Path | None) -> float:
    """CPU seconds of one `rag ingest` process (its own and its children's) into a new workspace."""
    env = {k: v for k, v in os.environ.items() if k != FOLDER_ENV} | {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if shared:
        env |= {FOLDER_ENV: str(shared), "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "embedding_memo"),
                                                                        str(REPO)])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(REPO / "samples" / "corpus"),
                    "--workspace", str(workspace), "--json"], cwd=REPO, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    runs = []
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="shared-vectors-") as tmp:
            root = Path(tmp)
            run = {"round": round_, "without_cpu_s": ingest_cpu(root / "a", None),
                   "empty_folder_cpu_s": ingest_cpu(root / "b", root / "vectors"),
                   "filled_folder_cpu_s": ingest_cpu(root / "c", root / "vectors"),
                   "texts_shared": sum(1 for f in (root / "vectors").rglob("*") if f.is_file()),
                   "load_average_after": os.getloadavg()[0]}
        runs.append(run)
        print(run, flush=True)
    out = write_results({"runs": runs}, "shared-vectors", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
