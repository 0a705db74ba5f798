"""BM25 as of a past time (rag.retrieval.lexical_past) on a benchmark's real texts: what a past state costs to build
by how much changed since it, beside rebuilding an index of the texts of then; what a query costs on it beside a
current one; and that it scores exactly as that rebuilt index does, for every question.

The benchmark's documents (`--copies C` times, ids suffixed, to reach a serving corpus's size) are the current texts.
For each change size K, K documents had another text then (their first two thirds), K/10 are new since (absent
then) and K/10 were deleted since (present then, a copy of another text). CPU seconds (time.process_time), the
least of `--repeats`, each tokenising the texts of then afresh; the catalog's query for what changed (once per past
state) is not in these figures. Writes bench/results/as-of-lexical[-TAG].json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.retrieval.lexical import LexicalIndex, Vocabulary, index_of_parts, postings  # noqa: E402
from rag.retrieval.lexical_past import past_view  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

DEPTH = 100  # LongRAGConfig.lexical_depth


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def corpus(folder: Path, copies: int) -> dict[str, str]:
    """doc_id → title and text as BM25 indexes them (Catalog.texts_by_hash), `copies` times."""
    docs = [json.loads(line) for line in (folder / "docs.jsonl").read_text().splitlines() if line.strip()]
    return {f"{d['doc_id']}#{c}": f"{d.get('title') or ''}\n{d['text']}" for c in range(copies) for d in docs}


def index_of(texts: dict[str, str], vocab: Vocabulary, known: LexicalIndex | None = None) -> LexicalIndex:
    """One partition of these texts, the token ids of the texts `known` holds taken from it."""
    by_hash = {content_hash(t): t for t in texts.values()}
    pairs = sorted((d, content_hash(t)) for d, t in texts.items())
    tokenised = known.parts[0].texts if known else None
    return index_of_parts([postings("", pairs, lambda hs: {h: by_hash[h] for h in hs}, vocab, tokenised)], vocab, None)


def past(now: dict[str, str], k: int) -> dict[str, str]:
    """The texts then: k changed (their first two thirds), k/10 new since left out, k/10 deleted since added."""
    ids = sorted(now)
    step = max(len(ids) // max(k + k // 10, 1), 1)
    picked = ids[::step][: k + k // 10]
    changed, new = picked[:k], picked[k:]
    then = {d: t for d, t in now.items() if d not in set(new)}
    then.update({d: now[d][: 2 * len(now[d]) // 3] for d in changed})
    then.update({f"gone-{i}": now[ids[-1 - i]] for i in range(k // 10)})
    return then


def cpu(fn, repeats: int):
    """(least CPU seconds over the repeats, the last result)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def arrays_mb(index: LexicalIndex) -> float:
    """Megabytes of the postings arrays this index holds beyond the current index's parts."""
    parts = list(index.parts)
    return sum(p.counts.indptr.nbytes + p.counts.indices.nbytes + p.counts.data.nbytes + p.lengths.nbytes
               for p in parts) / 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="musique")
    add_benchmarks_option(p)
    p.add_argument("--copies", type=int, default=1, help="copies of the documents (80K documents: 16 of MuSiQue's)")
    p.add_argument("--changes", default="0,10,100,1000,10000", help="change sizes K, comma-separated")
    p.add_argument("--limit", type=int, default=100, help="report-half questions asked")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    folder = benchmarks_option(p, args) / args.benchmark
    questions = [q.question for q in split_halves(args.benchmark, load_questions(folder / "questions.jsonl"))
                 ["report"][: args.limit]]
    now = corpus(folder, args.copies)
    vocab = Vocabulary()
    first = index_of(now, vocab)  # every current text tokenised once, as the serving index has them
    current_s, current = cpu(lambda: index_of(now, vocab, first), args.repeats)
    current_query = [cpu(lambda q=q: current.search(q, DEPTH), args.repeats)[0] for q in questions]
    rows = []
    for k in [int(x) for x in args.changes.split(",")]:
        then = past(now, k)
        newer = [(d, content_hash(t)) for d, t in sorted(now.items()) if then.get(d) != t]
        older = [(d, content_hash(t), ("bench",)) for d, t in sorted(then.items()) if now.get(d) != t]
        by_hash = {content_hash(t): t for t in then.values()}
        # each repeat tokenises the texts of then again, as the first build does; the current texts' token ids are kept
        view_s, view = cpu(lambda: past_view(current, newer, older, lambda hs: {h: by_hash[h] for h in hs}), args.repeats)
        rebuild_s, rebuilt = cpu(lambda: index_of(then, vocab, current), args.repeats)
        view_query = [cpu(lambda q=q: view.search(q, DEPTH), args.repeats)[0] for q in questions]
        differing = sum(view.search(q, DEPTH) != rebuilt.search(q, DEPTH) for q in questions)
        rows.append({"changed": k, "new_since": k // 10, "deleted_since": k // 10, "view_build_ms": view_s * 1000,
                     "rebuild_ms": rebuild_s * 1000, "view_query_p50_ms": float(np.median(view_query)) * 1000,
                     "current_query_p50_ms": float(np.median(current_query)) * 1000,
                     "view_extra_mb": arrays_mb(view) - arrays_mb(current) if view is not current else 0.0,
                     "rebuilt_mb": arrays_mb(rebuilt), "questions_differing_from_rebuilt": differing})
    figures = {"command": "python bench/as_of_lexical.py " + " ".join(sys.argv[1:]), "benchmark": args.benchmark,
               "documents": len(now), "questions": len(questions), "repeats": args.repeats,
               "clock": "cpu (time.process_time)", "current_build_ms": round(current_s * 1000, 1),
               "load_average": os.getloadavg(),
               "by_change": [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows]}
    write_results(figures, "as-of-lexical", args.tag)
    print(f"{len(now)} documents, {len(questions)} questions, current index built in {current_s * 1000:.0f} CPU ms")
    print(markdown_table(["changed", "view build ms", "rebuild ms", "view query p50 ms", "current query p50 ms",
                          "view extra MB", "rebuilt MB", "differing"],
                         [[r["changed"], round(r["view_build_ms"], 1), round(r["rebuild_ms"], 1),
                           round(r["view_query_p50_ms"], 2), round(r["current_query_p50_ms"], 2),
                           round(r["view_extra_mb"], 2), round(r["rebuilt_mb"], 1),
                           r["questions_differing_from_rebuilt"]] for r in rows]))
    print("load average", figures["load_average"])


if __name__ == "__main__":
    main()
