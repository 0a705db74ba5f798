"""Where the supporting-fact sentences a context leaves out are: per variant, at one budget, on one half of a
benchmark with sentence facts (HotpotQA, 2WikiMultihopQA).

Each supporting sentence is `shown` (verbatim in its own document's context, as rag.evaluation.metrics.sentence_recall
counts it), or its document is `absent` from the context, or the document is there and the sentence is not: then
`lead` (the paragraph's first sentence), else `shares` (it shares a content term with the question) or `shares none`.
Variants are bench/multihop.py's. Prints a table and writes bench/results/sentence-misses-<benchmark>-<half>[-TAG].json.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import prepare  # noqa: E402
from bench.multihop import current_texts, parse_variant  # noqa: E402
from bench.results_file import commit, write_results  # noqa: E402
from rag.sources import benchmarks as bm  # noqa: E402
from rag.text.analysis import content_terms, sentence_spans  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402

KINDS = ("shown", "absent", "lead", "shares", "shares none")


def squash(text: str) -> str:
    """As sentence_recall compares them: case and runs of whitespace aside."""
    return " ".join(text.split()).lower()


def kind(texts: dict[str, str], question: str, doc_id: str, sentence: str, shown: dict[str, str]) -> str:
    """Where one supporting sentence is, in a context whose documents' texts are `shown`."""
    if squash(sentence) in shown.get(doc_id, ""):
        return "shown"
    if doc_id not in shown:
        return "absent"
    text = texts[doc_id]
    lead = sentence_spans(text)[:1]
    if lead and squash(sentence) in squash(text[lead[0][0]:lead[0][1]]):
        return "lead"
    return "shares" if set(content_terms(question)) & set(content_terms(sentence)) else "shares none"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", default="hotpotqa")
    p.add_argument("--half", choices=bm.HALVES, default="tune")
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--variants", default="longrag;longrag-extract")
    p.add_argument("--tag", default="")
    bm.add_benchmarks_option(p)
    args = p.parse_args()
    root = bm.benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    embedder = Embedder(threads=1)
    prepared = prepare(root / args.benchmark, REPO / ".rag" / "bench", "title-links", embedder)
    snap, counter = prepared.reader.snapshot(), prepared.reader.counter
    texts = current_texts(snap)
    questions = [q for q in bm.split_halves(args.benchmark, bm.load_questions(root / args.benchmark))[args.half]
                 if q.supporting_sentences]
    figures = {"command": "python bench/sentence_misses.py " + " ".join(sys.argv[1:]), "commit": commit(REPO),
               "benchmark": args.benchmark, "half": args.half, "budget": args.budget, "questions": len(questions),
               "variants": {}}
    for spec in args.variants.split(";"):
        variant, counts, whole = parse_variant(spec), Counter(), Counter()
        for q in questions:
            (result, _), = variant.run(snap, embedder, counter, q.question, [args.budget])
            shown: dict[str, str] = {}
            for item in result.items:
                shown[item.doc_id] = shown.get(item.doc_id, "") + "\n" + squash(item.text)
                whole["items"] += 1
                whole["whole"] += item.ranges == ((0, len(texts[item.doc_id])),)
            counts.update(kind(texts, q.question, d, s, shown) for d, s in q.supporting_sentences)
        figures["variants"][spec] = {"sentences": {k: counts[k] for k in KINDS}, "items": whole["items"],
                                     "items_whole_document": whole["whole"]}
    prepared.close()
    path = write_results(figures, f"sentence-misses-{args.benchmark}-{args.half}", args.tag)
    print(markdown_table(["variant", *KINDS, "items", "whole documents"],
                         [[v, *(f["sentences"][k] for k in KINDS), f["items"], f["items_whole_document"]]
                          for v, f in figures["variants"].items()]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
