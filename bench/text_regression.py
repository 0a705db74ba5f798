"""English figures with rag.text.analysis (issue 13) against the splitting before it: do they move?

Issue 13 routed every method's text analysis through rag.text.analysis. Before it (78fd1de^) English text was split by
blingfire alone, words were the Unicode word pattern with our stems and stop words, BM25 tokens were bm25s's own,
and ELITE's offline expansion read every chunk. This bench runs today's retrieval twice on the report half of
each English dev set (rag.sources.benchmarks.half_of): once as it is, once with those pre-13 rules patched into the
modules that import rag.text.analysis's entry points (only here, never in the product). It prints completeness at each
budget for LongRAG and ELITE (offline policy) in both modes with the paired difference (bootstrap interval), and
an audit of every document and question: how many texts any entry point splits differently, and how many hold
a Han character at all. The LongRAG index and units are built once at ingest (the sub-chunker's sentences, title
mentions); the audit's `chunker_sentences` and `title_mention_keys` rows say on how many documents those differ.
Writes bench/results/text-regression[-TAG].json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import blingfire
import bm25s
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402
from rag.elite import elite_explore, explorer_for, pack_exploration  # noqa: E402
from rag.elite.counting import detect_count  # noqa: E402
from rag.elite.sentences import STORES  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci, paired_difference_ci  # noqa: E402
from rag.evaluation.prepared import prepare_workspace  # noqa: E402
from rag.retrieval import lexical  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates, pack_ranked  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, complete, load_questions, split_halves  # noqa: E402
from rag.text import analysis as text  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

NAMES = ("hotpotqa", "musique", "2wikimultihopqa")
CALLER = Caller(frozenset({"bench"}))
MODES = ("rag_text", "pre13")
_WORD = re.compile(r"[^\W_]+")


def pre13_sentence_spans(t: str) -> list[tuple[int, int]]:
    """blingfire's offsets with blank sentences dropped; the whole text when none is left (the old chunker)."""
    if not t.strip():
        return []
    return [(s, e) for s, e in blingfire.text_to_sentences_and_offsets(t)[1] if t[s:e].strip()] or [(0, len(t))]


def pre13_sentences(t: str) -> list[str]:
    return blingfire.text_to_sentences(t).split("\n") if t.strip() else []


def pre13_words(t: str, search: bool = False) -> list[str]:
    return _WORD.findall(t.lower())


def pre13_is_stop(w: str) -> bool:
    return w in text.STOP_WORDS


def pre13_content_terms(t: str) -> list[str]:
    return list(dict.fromkeys(text.stem(w) for w in pre13_words(t) if w not in text.STOP_WORDS))


def pre13_lexical_tokens(t: str) -> list[str]:
    return bm25s.tokenize([t], stopwords="en", show_progress=False, return_ids=False)[0]


def pre13_mention_keys(t: str) -> set[str]:
    return set(re.findall(r"\w+", t))


# Every module that imported an entry point of rag.text.analysis, and what that name meant before issue 13.
PRE13 = {
    "rag.elite.sentences": {"sentence_spans": pre13_sentence_spans, "words": pre13_words, "is_stop": pre13_is_stop,
                            "term": text.stem},
    "rag.elite.collect": {"content_terms": pre13_content_terms, "is_stop": pre13_is_stop, "term": text.stem,
                          "words": pre13_words, "mostly_han": lambda t: False},
    "rag.elite.policy": {"content_terms": pre13_content_terms, "sentences": pre13_sentences},
    "rag.retrieval.lexical": {"lexical_tokens": pre13_lexical_tokens},
    "rag.retrieval.longrag": {"content_terms": pre13_content_terms, "is_stop": pre13_is_stop, "sentences": pre13_sentences,
                    "term": text.stem, "words": pre13_words},
}


@contextmanager
def analysis(mode: str, snap):
    """Run the block with `mode`'s text analysis; every cache built from tokens is dropped on entry and exit."""
    def reset():
        STORES.clear()
        lexical._PARTS.clear()
        lexical._VOCAB = lexical.Vocabulary()
        snap.__dict__.pop("lexical", None)

    reset()
    patches = [mock.patch(f"{module}.{name}", fn) for module, names in PRE13.items() for name, fn in names.items()]
    try:
        for p in patches if mode == "pre13" else []:
            p.start()
        yield
    finally:
        mock.patch.stopall()
        reset()


def audit(folder: Path) -> dict:
    """Texts (documents' title and text, questions) on which an entry point's output differs from pre-13's."""
    docs = [json.loads(line) for line in (folder / "docs.jsonl").open()]
    questions = [q.question for q in load_questions(folder)]
    texts = [d["title"] + "\n" + d["text"] for d in docs]
    checks = {
        "chunker_sentences": (lambda t: text.sentence_spans(t), pre13_sentence_spans, [d["text"] for d in docs]),
        "sentences_printed": (text.sentences, pre13_sentences, texts + questions),
        "words": (lambda t: text.words(t, search=True), pre13_words, texts + questions),
        "content_terms": (text.content_terms, pre13_content_terms, texts + questions),
        "stop_words": (lambda t: [w for w in text.words(t, search=True) if text.is_stop(w)],
                       lambda t: [w for w in pre13_words(t) if pre13_is_stop(w)], texts + questions),
        "bm25_tokens": (text.lexical_tokens, pre13_lexical_tokens, texts + questions),
        "title_mention_keys": (text.mention_keys, pre13_mention_keys, texts),
    }
    out = {"documents": len(docs), "questions": len(questions),
           "texts_with_han": sum(text.has_han(t) for t in texts + questions),
           "counting_questions": sum(detect_count(q) is not None for q in questions), "differing_texts": {}}
    for check, (now, before, items) in checks.items():
        out["differing_texts"][check] = sum(now(t) != before(t) for t in items)
    return out


def measure(snap, embedder, counter, questions, budgets: list[int]) -> dict:
    """Per method and budget, each question's completeness (0/1)."""
    hits = {m: {b: [] for b in budgets} for m in ("longrag", "elite")}
    for q in questions:
        ranked = longrag_candidates(snap, Request(CALLER, q.question, 1), Tools(embedder, counter), LongRAGConfig())
        found = elite_explore(snap.catalog, CALLER, q.question, explorer_for(embedder=embedder, counter=counter))
        for b in budgets:
            for method, result in (("longrag", pack_ranked(snap, ranked, b)), ("elite", pack_exploration(found, b))):
                assert result.tokens <= b
                hits[method][b].append(float(complete({i.doc_id for i in result.items}, q.gold_doc_ids)))
    return hits


def run(folder: Path, budgets: list[int], limit: int | None, embedder, workdir: Path) -> dict:
    name = folder.name
    from rag.models.tokens import default_counter

    counter = default_counter()
    prepared = prepare_workspace(folder, workdir / name, embedder, counter)
    snap = prepared.reader.snapshot()
    questions = split_halves(name, load_questions(folder))["report"][:limit]
    raw = {}
    for mode in MODES:
        with analysis(mode, snap):
            raw[mode] = measure(snap, embedder, counter, questions, budgets)
    prepared.close()
    figures = {"questions": len(questions), "audit": audit(folder), "methods": {}}
    for method in ("longrag", "elite"):
        cells = {}
        for b in budgets:
            now, before = raw["rag_text"][method][b], raw["pre13"][method][b]
            cells[str(b)] = {"rag_text": bootstrap_ci(now).to_json(), "pre13": bootstrap_ci(before).to_json(),
                             "rag_text_minus_pre13": paired_difference_ci(now, before).to_json(),
                             "questions_that_differ": int(np.sum(np.array(now) != np.array(before)))}
        figures["methods"][method] = cells
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--limit", type=int, help="first N questions of each report half (default: all)")
    p.add_argument("--workdir", default=str(REPO / ".rag" / "bench"), help="where the workspaces are kept")
    p.add_argument("--tag", default="", help="suffix of the results file (text-regression[-TAG].json)")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder = Embedder(threads=1)
    budgets = [int(b) for b in args.budgets.split(",")]
    out = results_path("text-regression", args.tag)
    figures = {"command": "python bench/text_regression.py " + " ".join(sys.argv[1:]), "half": "report",
               "split": "rag.sources.benchmarks.half_of", "budgets": budgets, "policy": "offline", "benchmarks": {}}
    for name in args.benchmark or NAMES:
        result = figures["benchmarks"][name] = run(root / name, budgets, args.limit, embedder, Path(args.workdir))
        write_json(out, figures)
        print(f"\n{name}: {result['questions']} report-half questions; audit {json.dumps(result['audit'])}")
        rows = [[m, str(b), f"{c['rag_text']['mean']:.3f}", f"{c['pre13']['mean']:.3f}",
                 f"{c['rag_text_minus_pre13']['mean']:+.3f} [{c['rag_text_minus_pre13']['low']:+.3f}, "
                 f"{c['rag_text_minus_pre13']['high']:+.3f}]", c["questions_that_differ"]]
                for m, cells in result["methods"].items() for b, c in cells.items()]
        print(markdown_table(["method", "budget", "C rag.text.analysis", "C pre-13", "difference [95% CI]",
                              "questions that differ"], rows), flush=True)


if __name__ == "__main__":
    main()
