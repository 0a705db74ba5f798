"""Chinese benchmarks (CMRC 2018, DRCD): source completeness at 1K/2K/4K for LongRAG (multilingual embedder),
ELITE (offline policy) and the BM25-over-jieba anchor, side by side on the same questions, and the cost of
segmentation at ingest and in ELITE's store build. Prints a table and writes bench/results/chinese-<name>.json.

Questions: a fixed hash split of each dev part, sha256(qid) even (`--half tune`) or odd (`--half report`, the
default); the first N of a half are a fair sample, the files being stored in a fixed pseudo-random order. Chosen
on the tune halves only: ELITE's offline expansion reading Latin script only (rag/elite/collect.py), segmenting
Traditional text through its Simplified form (rag/text/analysis.py) and LongRAG's channel weights for the multilingual
embedder (rag.retrieval.longrag.EMBEDDER_WEIGHTS). Budgets are MiniLM word pieces for every method. The anchor packs whole
documents in BM25 order (rag.retrieval.lexical, jieba words), as the issue's anchors were measured.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import blingfire  # noqa: E402
import jieba  # noqa: E402

from bench.results_file import write_results  # noqa: E402
from rag.elite import elite_explore, explorer_for, pack_exploration  # noqa: E402
from rag.elite.sentences import STORES, StoreCache  # noqa: E402
from rag.evaluation.bootstrap import paired_difference_ci  # noqa: E402
from rag.evaluation.prepared import BENCH_ACL, prepare_workspace  # noqa: E402
from rag.models.embedders import MultilingualEmbedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.methods import method as registered  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.lexical import lexical_index  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, complete, load_questions  # noqa: E402
from rag.text import analysis as text  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

CALLER = Caller(frozenset({BENCH_ACL}))
ANCHOR_DEPTH = 50


def segmentation_cost(catalog) -> dict:
    """Seconds to split and tokenise the current documents: rag.text.analysis (jieba) beside the English-only rules."""
    texts = [t for (t,) in catalog.rows("SELECT text FROM documents WHERE status = 'current'")]
    start = time.perf_counter()
    jieba.initialize()   # its dictionary loads once per process; timed apart from segmentation itself
    timings = {"jieba_dictionary_load": round(time.perf_counter() - start, 2)}
    for label, fn in (("sentences_rag_text", text.sentence_spans),
                      ("sentences_blingfire_only", lambda t: blingfire.text_to_sentences_and_offsets(t)[1]),
                      ("traditional_to_simplified_only", text.simplified),
                      ("words_rag_text_search_mode", lambda t: text.words(t, search=True)),
                      ("words_unicode_pattern_only", lambda t: re.findall(r"[^\W_]+", t.lower())),
                      ("bm25_tokens_rag_text", text.lexical_tokens)):
        start = time.perf_counter()
        for t in texts:
            fn(t)
        timings[label] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    store, _ = StoreCache().get(catalog)
    timings["elite_store_build"] = round(time.perf_counter() - start, 2)
    return timings | {"documents": len(texts), "characters": sum(map(len, texts)), "sentences": store.n_sentences,
                      "terms": len(store.vocab.stems)}


def document_sizes(catalog, counter) -> dict[str, int]:
    """MiniLM tokens of every current document as the anchor packs it (title and text)."""
    rows = catalog.rows("SELECT doc_id, title || '\n' || text FROM documents WHERE status = 'current'")
    return dict(zip([d for d, _ in rows], counter.count([t for _, t in rows]).tolist()))


def anchor(catalog, sizes: dict[str, int], question: str, budgets: list[int]) -> dict[int, set[str]]:
    """BM25 (jieba words) ranking, whole documents packed greedily into each budget."""
    ranked = list(lexical_index(catalog).search(question, ANCHOR_DEPTH))
    out = {}
    for b in budgets:
        used, kept = 0, set()
        for d in ranked:
            if used + sizes[d] <= b:
                used += sizes[d]
                kept.add(d)
        out[b] = kept
    return out


HALVES = {"tune": 0, "report": 1}   # sha256(qid) % 2


def half_of(questions: list, half: str, limit: int) -> list:
    """The first `limit` questions of the half: sha256(qid) even for the tune half, odd for the report half."""
    return [q for q in questions if int(hashlib.sha256(q.qid.encode()).hexdigest(), 16) % 2 == HALVES[half]][:limit]


def run(folder: Path, budgets: list[int], limit: int, workdir: Path, half: str = "report") -> dict:
    name = folder.name
    counter = default_counter()
    ingest_embedder = MultilingualEmbedder(threads=2)
    start = time.perf_counter()
    prepared = prepare_workspace(folder, workdir / name, ingest_embedder, counter)
    prepare_seconds = time.perf_counter() - start
    embedder = MultilingualEmbedder(threads=1)   # one thread per query (STACK.md)
    prepared.reader.use_embedder(embedder)
    catalog = prepared.reader.snapshot().catalog
    segmentation = segmentation_cost(catalog)
    sizes = document_sizes(catalog, counter)
    questions = half_of(load_questions(folder), half, limit)
    methods = ("longrag", "longrag_minilm_weights", "elite", "bm25_jieba_anchor")
    hits = {m: {b: [] for b in budgets} for m in methods}
    seconds = {m: [] for m in hits}
    for q in questions:
        gold = q.gold_doc_ids
        t = time.perf_counter()
        for b in budgets:
            result = prepared.reader.retrieve("longrag", CALLER, q.question, b)
            assert result.tokens <= b
            hits["longrag"][b].append(complete({i.doc_id for i in result.items}, gold))
        seconds["longrag"].append((time.perf_counter() - t) / len(budgets))
        t = time.perf_counter()
        for b in budgets:   # the weights tuned with MiniLM on English, for comparison
            result = registered("longrag").run(prepared.reader.snapshot(), Request(CALLER, q.question, b),
                                               Tools(embedder, counter, longrag=LongRAGConfig()))
            hits["longrag_minilm_weights"][b].append(complete({i.doc_id for i in result.items}, gold))
        seconds["longrag_minilm_weights"].append((time.perf_counter() - t) / len(budgets))
        t = time.perf_counter()
        found = elite_explore(catalog, CALLER, q.question, explorer_for(embedder=embedder, counter=counter))
        for b in budgets:
            result = pack_exploration(found, b)
            assert result.tokens <= b
            hits["elite"][b].append(complete({i.doc_id for i in result.items}, gold))
        seconds["elite"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for b, ids in anchor(catalog, sizes, q.question, budgets).items():
            hits["bm25_jieba_anchor"][b].append(complete(ids, gold))
        seconds["bm25_jieba_anchor"].append(time.perf_counter() - t)
    STORES.clear()
    prepared.close()
    parity = "odd sha256(qid) half (not tuned on)" if half == "report" else "even sha256(qid) half (the tune half)"
    return {"benchmark": name, "half": half, "questions": len(questions),
            "sample": f"first {len(questions)} of the dev part's {parity}",
            "embedder": embedder.name, "budgets": budgets,
            "completeness": {m: {str(b): round(float(np.mean(v)), 3) for b, v in per.items()} for m, per in hits.items()},
            "minus_anchor": {m: {str(b): paired_difference_ci(np.array(v, float),
                                                              np.array(hits["bm25_jieba_anchor"][b], float)).to_json()
                                 for b, v in per.items()} for m, per in hits.items() if m != "bm25_jieba_anchor"},
            "seconds_per_question_p50": {m: round(float(np.median(v)), 4) for m, v in seconds.items()},
            "ingest": {"prepare_seconds": round(prepare_seconds, 1), "documents": prepared.documents,
                       "units": prepared.units, "subchunks": prepared.subchunks},
            "segmentation_seconds": segmentation}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", help="cmrc2018, drcd (default: both)")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--limit", type=int, default=400, help="first N questions of the half (default 400)")
    p.add_argument("--half", choices=list(HALVES), default="report",
                   help="tune: sha256(qid) even, where choices are made; report (default): odd, never tuned on")
    p.add_argument("--segment-as-written", action="store_true",
                   help="segment Han text as written, without the Traditional → Simplified step (for comparison; "
                        "writes chinese-<name>[-tune]-as-written.json)")
    p.add_argument("--workdir", default=str(REPO / ".rag" / "bench-zh"), help="where the workspaces are kept")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.segment_as_written:
        text.simplified = lambda han: han   # rag.text.analysis's segment() and word_bounds() look it up at each call
    for name in args.benchmark or ["cmrc2018", "drcd"]:
        figures = run(root / name, budgets, args.limit, Path(args.workdir), args.half)
        figures["command"] = "python bench/chinese.py " + " ".join(sys.argv[1:])
        suffix = ("-tune" if args.half == "tune" else "") + ("-as-written" if args.segment_as_written else "")
        write_results(figures, f"chinese-{name}{suffix}")
        print(f"\n{name} ({args.half} half): {figures['questions']} questions, embedder {figures['embedder']}, "
              f"ingest {figures['ingest']}")
        print(markdown_table(["method"] + [f"C@{b}" for b in budgets] + ["s/question p50"],
                             [[m] + [c[str(b)] for b in budgets] + [figures["seconds_per_question_p50"][m]]
                              for m, c in figures["completeness"].items()]))
        print("minus the anchor, paired (95% bootstrap interval):")
        print(markdown_table(["method"] + [f"C@{b}" for b in budgets],
                             [[m] + [f"{d[str(b)]['mean']:+.3f} [{d[str(b)]['low']:+.3f}, {d[str(b)]['high']:+.3f}]"
                                     for b in budgets] for m, d in figures["minus_anchor"].items()]))
        print("segmentation seconds:", json.dumps(figures["segmentation_seconds"], ensure_ascii=False))


if __name__ == "__main__":
    main()
