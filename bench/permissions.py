"""Permission leak count over many random reads (rule 1), for LongRAG, short-chunk and ELITE.

On the sample corpus, each trial draws a caller (1–3 groups), a question from corpus words, a budget and
a set of documents whose ACL is revoked in the catalog after indexing (inside a transaction rolled back
afterwards); a leak is any returned item whose document the caller may not read, or whose text is not
a slice of a readable document. Prints and writes bench/results/permissions.json. Must be 0.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.elite import EliteConfig, elite_retrieve, explorer_for  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.methods import Request, Tools, method  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.read_state import SharedCache, Snapshot  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.store.snapshot_files import read_pointer  # noqa: E402

METHODS = ("longrag", "shortchunk", "elite")

# Importance only reorders what ELITE already may read; one noisy copy of one chunk keeps 10,000 trials affordable.
FAST_ELITE = EliteConfig(importance_chunks=1, noise_samples=1)
GROUPS = ["field-engineering", "support", "partners", "security-team", "everyone", "nobody-else"]
WORDS = ["cache", "firmware", "certificate", "rotation", "log", "reconnect", "antenna", "grounding", "incident",
         "modbus", "error", "ssh", "boot", "commissioning", "partition", "eviction", "batch", "alarm", "token"]


def leaks(result, readable: dict[str, str]) -> int:
    bad = 0
    for item in result.items:
        text = readable.get(item.doc_id)
        bad += text is None or any(text[a:b] not in item.text for a, b in item.ranges)
    return bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--trials", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        catalog, index = Catalog(Path(tmp) / "catalog.duckdb"), SubchunkIndex(Path(tmp) / "lancedb")
        embedder, counter = Embedder(threads=1), default_counter()
        settings = IngestSettings(sources=[str(REPO / "samples" / "corpus")])
        publish_documents(catalog, settings)
        publish_units(catalog, counter, settings)
        publish_index(catalog, index, embedder.encode, counter, settings)
        doc_ids = [d.doc_id for d in catalog.current_documents()]
        counts = {"longrag": [0, 0], "shortchunk": [0, 0], "elite": [0, 0]}
        for trial in tqdm(range(args.trials), desc="trials", mininterval=10):
            groups = frozenset(rng.sample(GROUPS, rng.randint(1, 3)))
            question = " ".join(rng.sample(WORDS, rng.randint(1, 4)))
            budget, revoked = rng.randint(50, 9000), rng.sample(doc_ids, rng.randint(0, 3))
            name = METHODS[trial % 3]
            catalog.con.execute("BEGIN")
            try:
                catalog.con.execute("UPDATE documents SET acl = ['revoked'] WHERE list_contains(?, doc_id)", [revoked])
                readable = {d.doc_id: d.text for d in catalog.current_documents() if not groups.isdisjoint(d.acl)}
                # A snapshot over the writer's connection sees the revocation of the open transaction.
                snap = Snapshot(read_pointer(tmp), catalog, index, SharedCache())
                if name == "elite":
                    result = elite_retrieve(catalog, Caller(groups), question, budget,
                                            explorer_for(embedder=embedder, counter=counter, config=FAST_ELITE))
                else:
                    result = method(name).run(snap, Request(Caller(groups), question, budget), Tools(embedder, counter))
            finally:
                catalog.con.execute("ROLLBACK")
            counts[name][0] += 1
            counts[name][1] += leaks(result, readable) + (result.tokens > budget)
    figures = {m: {"trials": n, "leaks": k} for m, (n, k) in counts.items()}
    figures["command"] = f"python bench/permissions.py --trials {args.trials} --seed {args.seed}"
    write_results(figures, "permissions")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
