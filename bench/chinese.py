"""Chinese benchmarks (CMRC 2018, DRCD): source completeness at 1K/2K/4K for LongRAG (multilingual embedder),
ELITE (offline policy) and the BM25-over-jieba anchor, side by side on the same questions, and the cost of
segmentation at ingest and in ELITE's store build. Prints a table and writes bench/results/chinese-<name>.json.

Questions: a fixed hash split of each dev part, sha256(qid) even (`--half tune`) or odd (`--half report`, the
default); the first N of a half are a fair sample, the files being stored in a fixed pseudo-random order. Chosen
on the tune halves only: ELITE's offline expansion reading Latin script only (rag/elite/collect.py), segmenting
Traditional text through its Simplified form (rag/text/analysis.py) and LongRAG's channel weights for the multilingual
embedder (rag.retrieval.longrag.EMBEDDER_WEIGHTS). Budgets are MiniLM word pieces for every method. The anchor packs whole
documents in BM25 order (rag.retrieval.lexical, jieba words), as the issue's anchors were measured.
`longrag-extract` (the small-budget method, chosen on English multi-hop benchmarks) runs beside `longrag` on the same
ranking; it is also compared with `longrag` paired, and for both the bench counts whether the context shows a gold
answer inside a gold document (`answer_shown`): an excerpt can name a document without the sentence that answers.
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

from bench.multihop import settings_of  # noqa: E402
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
from rag.retrieval.longrag import EMBEDDER_WEIGHTS, LongRAGConfig  # noqa: E402
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


def gold_texts(snap, questions: list) -> dict[str, str]:
    """doc_id → current text of every gold document of these questions (one version each in a benchmark)."""
    gold = {d for q in questions for d in q.gold_doc_ids}
    keys = sorted({(r.doc_id, r.doc_version) for r in snap.member_table.rows if r.doc_id in gold})
    return {doc_id: text for (doc_id, _), (_, text) in snap.texts(keys).items()}


def answer_shown(items, q, texts: dict[str, str]) -> float | None:
    """1.0 when a gold answer that is written in a gold document appears whole in that document's item text (Chinese
    has no spaces, so a plain substring, blanks removed); None when no answer is written in a gold document."""
    def squeeze(s: str) -> str:
        return "".join(s.split())
    answers = [squeeze(a) for a in (q.answer, *q.aliases) if squeeze(a)]
    written = [a for a in answers if any(a in squeeze(texts.get(d, "")) for d in q.gold_doc_ids)]
    if not written:
        return None
    context = squeeze(" ".join(i.text for i in items if i.doc_id in q.gold_doc_ids))
    return float(any(a in context for a in written))


def rate(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(float(np.mean(known)), 3) if known else None


def extract_minus_longrag(hits: dict, shown: dict, budgets: list[int]) -> dict:
    """longrag-extract minus longrag on the same questions: completeness, and answer shown where it is defined."""
    def paired(a: dict, b: dict) -> dict:
        return {str(n): paired_difference_ci(a[n], b[n]).to_json() for n in budgets}
    return {"extract_minus_longrag": paired(hits["longrag_extract"], hits["longrag"]),
            "answer_shown_extract_minus_longrag": paired(shown["longrag_extract"], shown["longrag"])}


HALVES = {"tune": 0, "report": 1}   # sha256(qid) % 2


def half_of(questions: list, half: str, limit: int) -> list:
    """The first `limit` questions of the half: sha256(qid) even for the tune half, odd for the report half."""
    return [q for q in questions if int(hashlib.sha256(q.qid.encode()).hexdigest(), 16) % 2 == HALVES[half]][:limit]


VARIANTS = ("longrag", "longrag_extract", "longrag_minilm_weights", "elite", "bm25_jieba_anchor")
SERVED = {"longrag": "longrag", "longrag_extract": "longrag-extract"}   # bench row → registered method


def run(folder: Path, budgets: list[int], limit: int, workdir: Path, half: str = "report",
        methods: tuple[str, ...] = VARIANTS) -> dict:
    name = folder.name
    counter = default_counter()
    ingest_embedder = MultilingualEmbedder(threads=2)
    start = time.perf_counter()
    prepared = prepare_workspace(folder, workdir / name, ingest_embedder, counter)
    prepare_seconds = time.perf_counter() - start
    embedder = MultilingualEmbedder(threads=1)   # one thread per query, as the read path runs it
    prepared.reader.use_embedder(embedder)
    catalog = prepared.reader.snapshot().catalog
    segmentation = segmentation_cost(catalog)
    sizes = document_sizes(catalog, counter)
    questions = half_of(load_questions(folder), half, limit)
    texts = gold_texts(prepared.reader.snapshot(), questions)
    methods = tuple(dict.fromkeys(methods + ("bm25_jieba_anchor",)))   # every row is paired with the anchor
    hits = {m: {b: [] for b in budgets} for m in methods}
    shown = {m: {b: [] for b in budgets} for m in SERVED if m in methods}
    seconds = {m: [] for m in hits}
    for q in questions:
        gold = q.gold_doc_ids
        for m in shown:
            t = time.perf_counter()
            for b in budgets:
                result = prepared.reader.retrieve(SERVED[m], CALLER, q.question, b)
                assert result.tokens <= b
                hits[m][b].append(complete({i.doc_id for i in result.items}, gold))
                shown[m][b].append(answer_shown(result.items, q, texts))
            seconds[m].append((time.perf_counter() - t) / len(budgets))
        if "longrag_minilm_weights" in methods:
            t = time.perf_counter()
            for b in budgets:   # the weights tuned with MiniLM on English, for comparison
                result = registered("longrag").run(prepared.reader.snapshot(), Request(CALLER, q.question, b),
                                                   Tools(embedder, counter, longrag=LongRAGConfig()))
                hits["longrag_minilm_weights"][b].append(complete({i.doc_id for i in result.items}, gold))
            seconds["longrag_minilm_weights"].append((time.perf_counter() - t) / len(budgets))
        if "elite" in methods:
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
            "answer_shown": {m: {str(b): rate(v) for b, v in per.items()} for m, per in shown.items()},
            "answer_shown_questions": sum(answer_shown([], q, texts) is not None for q in questions),
            **(extract_minus_longrag(hits, shown, budgets) if len(shown) == 2 else {}),
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
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"rows to run, comma-separated, of {', '.join(VARIANTS)} (default: all; the anchor always runs)")
    p.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                   help="a LongRAG setting over the multilingual embedder's own (e.g. question_titles=off), for a run "
                        "side by side with the default; give it a --tag")
    p.add_argument("--tag", default="", help="suffix of the results file (chinese-<name>[-tune][-<tag>].json)")
    p.add_argument("--workdir", default=str(REPO / ".rag" / "bench-zh"), help="where the workspaces are kept")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    budgets = [int(b) for b in args.budgets.split(",")]
    methods = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    if unknown := [m for m in methods if m not in VARIANTS]:
        p.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    EMBEDDER_WEIGHTS.setdefault(MultilingualEmbedder.name, {}).update(settings_of(args.setting, "--setting"))
    if args.segment_as_written:
        text.simplified = lambda han: han   # rag.text.analysis's segment() and word_bounds() look it up at each call
    for name in args.benchmark or ["cmrc2018", "drcd"]:
        figures = run(root / name, budgets, args.limit, Path(args.workdir), args.half, methods)
        figures["command"] = "python bench/chinese.py " + " ".join(sys.argv[1:])
        suffix = ("-tune" if args.half == "tune" else "") + ("-as-written" if args.segment_as_written else "")
        write_results(figures, f"chinese-{name}{suffix}", args.tag or None)
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
        if "extract_minus_longrag" not in figures:
            continue
        print("longrag-extract minus longrag, paired: completeness",
              "; ".join(f"C@{b} {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                        for b, d in figures["extract_minus_longrag"].items()))
        print(f"answer shown inside a gold document ({figures['answer_shown_questions']} questions):",
              json.dumps(figures["answer_shown"]), "extract minus longrag:",
              "; ".join(f"@{b} {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                        for b, d in figures["answer_shown_extract_minus_longrag"].items()))


if __name__ == "__main__":
    main()
