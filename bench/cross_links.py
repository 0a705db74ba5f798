"""Would links across partitions group documents if units could span partitions?

A unit only merges documents with the same ACL (rule 1's safe grouping) and the same collection. For each
explicit link that crosses collections in a corpus's current documents, this counts whether its two ends share an
ACL (so a cross-partition unit could hold both) and how many tokens such a pair would take. Prints and writes
bench/results/cross_links.json.

    python bench/cross_links.py [SOURCE ...]   # default: samples/corpus
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.documents import version_order  # noqa: E402
from rag.sources.loaders import load_sources  # noqa: E402
from rag.units.long_units import DEFAULT_CAP, render_member  # noqa: E402


def main(sources: list[str]) -> dict:
    newest = {}
    for d in load_sources([REPO / s for s in sources]).documents:
        if d.doc_id not in newest or version_order(d.version) > version_order(newest[d.doc_id].version):
            newest[d.doc_id] = d
    docs = sorted(newest.values(), key=lambda d: d.doc_id)
    by_key = {d.doc_id: d for d in docs} | {d.title: d for d in docs}
    counter = default_counter()
    tokens = dict(zip([d.doc_id for d in docs], counter.count(
        [render_member(d.title, d.doc_id, d.version, d.text) for d in docs])))
    cross = [(d, by_key[link]) for d in docs for link in d.links
             if link in by_key and by_key[link].collection != d.collection]
    same_acl = [(a, b) for a, b in cross if sorted(a.acl) == sorted(b.acl)]
    fits = [(a, b) for a, b in same_acl if tokens[a.doc_id] + tokens[b.doc_id] <= DEFAULT_CAP]
    result = {"sources": sources, "documents": len(docs), "explicit_links": sum(len(d.links) for d in docs),
              "cross_collection_links": len(cross), "same_acl": len(same_acl), "same_acl_within_cap": len(fits),
              "pairs_same_acl": sorted(f"{a.doc_id} ({a.collection}) -> {b.doc_id} ({b.collection})"
                                       for a, b in same_acl)}
    print(json.dumps(result, indent=1))
    write_results(result, "cross_links")
    return result


if __name__ == "__main__":
    main(sys.argv[1:] or ["samples/corpus"])
