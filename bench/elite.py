"""ELITE benchmark: collect-round latency over ≥ 2.5M tokens, and evidence recall on the dev benchmarks.

Prints the figures and writes bench/results/elite-<name>.json:
- `collect`: the three benchmark corpora in one catalog; sentence-store build time, then p50/p95 of one
  collect round (score, top K, expand) for every dev question (question words as terms).
- one file per benchmark and half of the fixed tune/report split (report by default; rag.sources.benchmarks.half_of):
  gold-document recall and all-gold share, with bootstrap intervals, at budgets 1K/2K/4K for the offline
  policy and for the baseline (question words only, one round, plain overlap count: the reference's
  collect + expand), LLM calls and tokens per question, time per stage.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.elite import EliteConfig, elite_explore, explorer_for, pack_exploration  # noqa: E402
from rag.elite.collect import expand, score_sentences, term_weights, terms_from, top_k  # noqa: E402
from rag.elite.sentences import STORES, StoreCache  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources.benchmarks import HALVES, add_benchmarks_option, benchmarks_option, half_of  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.publish import publish_documents  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

NAMES = ("hotpotqa", "musique", "2wikimultihopqa")
CALLER = Caller(frozenset({"bench"}))
# The reference's collect + expand: question words, one round, every matched word counts 1, no titles.
BASELINE = EliteConfig(max_rounds=1, noise_samples=0, idf=False, title_weight=0.0, prune_ratio=0.0)


def catalog_for(root: Path, workdir: Path, names: tuple[str, ...], copies: int = 1) -> Catalog:
    """A catalog holding the given benchmarks' docs.jsonl (published once, reused on later runs).

    copies > 1 adds copies of every document under new ids, only to reach a corpus size.
    """
    catalog = Catalog(workdir / f"{'+'.join(names)}{f'-x{copies}' if copies > 1 else ''}.duckdb")
    if not catalog.rows("SELECT count(*) FROM documents")[0][0]:
        sources = [str(root / n / "docs.jsonl") for n in names]
        for k in range(2, copies + 1):
            for n in names:
                copy = workdir / f"{n}-copy{k}.jsonl"
                with copy.open("w") as out:
                    for line in (root / n / "docs.jsonl").open():
                        row = json.loads(line)
                        out.write(json.dumps(row | {"doc_id": f"{row['doc_id']}~{k}"}) + "\n")
                sources.append(str(copy))
        publish_documents(catalog, IngestSettings(sources=sources, default_acl=("bench",)))
    return catalog


def questions(folder: Path, limit: int | None) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "questions.jsonl").open()]
    return rows[:limit] if limit else rows


def collect_benchmark(root: Path, workdir: Path, limit: int | None, copies: int) -> dict:
    """Build the store once (cold, in a fresh cache), then time one collect round per question."""
    catalog = catalog_for(root, workdir, NAMES, copies)
    (characters,) = catalog.rows(f"SELECT sum(len(text)) FROM {catalog.with_texts} WHERE status = 'current'")[0]
    start = time.perf_counter()
    store, _ = StoreCache().get(catalog)
    build = time.perf_counter() - start
    texts = catalog.rows(f"SELECT text FROM {catalog.with_texts} WHERE status = 'current'")
    tokens = int(default_counter().count([t for (t,) in texts]).sum())
    mask = store.readable(CALLER)[store.sent_doc]
    config = EliteConfig()
    times = []
    qs = [q["question"] for n in NAMES for q in questions(root / n, limit)]
    for q in qs:
        start = time.perf_counter()
        weights = term_weights(store, mask, terms_from([q], "question", 1, 1.0, set()))
        scores = score_sentences(store, mask, weights, config.title_weight)
        expand(store, top_k(scores, config.top_k), scores, config.neighbours)
        times.append(time.perf_counter() - start)
    ms = np.array(times) * 1000
    return {"documents": len(store.keys), "sentences": store.n_sentences, "terms": len(store.vocab.stems),
            "tokens": tokens, "characters": int(characters), "store_build_seconds": round(build, 2),
            "rounds": len(times), "collect_ms_p50": round(float(np.percentile(ms, 50)), 3),
            "collect_ms_p95": round(float(np.percentile(ms, 95)), 3)}


def recall(items, gold: list[str]) -> tuple[float, bool]:
    present = {i.doc_id for i in items}
    found = sum(1 for g in gold if g in present)
    return found / len(gold), found == len(gold)


def evaluate(root: Path, workdir: Path, name: str, budgets: list[int], limit: int | None, embedder, half: str) -> dict:
    catalog = catalog_for(root, workdir, (name,))
    out = {"benchmark": name, "half": half, "questions": 0, "budgets": budgets, "policies": {}}
    for label, config in (("baseline", BASELINE), ("offline", EliteConfig())):
        per_budget = {b: {"recall": [], "all_gold": [], "tokens": []} for b in budgets}
        seconds: dict[str, float] = {}
        calls, llm_tokens, rounds = [], [], []
        qs = [q for q in questions(root / name, None) if half_of(name, q["qid"]) == half][:limit]
        for q in qs:
            found = elite_explore(catalog, CALLER, q["question"], explorer_for(embedder=embedder, config=config))
            rounds.append(len(found.trace["rounds"]))
            calls.append(found.trace["llm_totals"]["calls"])
            llm_tokens.append(found.trace["llm_totals"]["input_tokens"] + found.trace["llm_totals"]["output_tokens"])
            for b in budgets:
                result = pack_exploration(found, b)
                r, complete = recall(result.items, q["gold_doc_ids"])
                per_budget[b]["recall"].append(r)
                per_budget[b]["all_gold"].append(complete)
                per_budget[b]["tokens"].append(result.tokens)
            for k, v in found.trace["seconds"].items():
                seconds[k] = seconds.get(k, 0.0) + v
        out["questions"] = len(qs)
        out["policies"][label] = {
            "budgets": {str(b): {"evidence_recall": round(float(np.mean(v["recall"])), 3),
                                 "source_completeness": round(float(np.mean(v["all_gold"])), 3),
                                 "evidence_recall_ci": bootstrap_ci(v["recall"]).to_json(),
                                 "source_completeness_ci": bootstrap_ci(v["all_gold"]).to_json(),
                                 "mean_tokens": round(float(np.mean(v["tokens"])), 1)} for b, v in per_budget.items()},
            "rounds_mean": round(float(np.mean(rounds)), 2), "llm_calls_per_question": float(np.mean(calls)),
            "llm_tokens_per_question": float(np.mean(llm_tokens)),
            "seconds_per_question": {k: round(v / len(qs), 4) for k, v in seconds.items()}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    parser.add_argument("--budgets", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--limit", type=int, help="first N questions per benchmark (default: all)")
    parser.add_argument("--half", choices=HALVES, default="report",
                        help="tune only to choose settings; report to quote")
    parser.add_argument("--workdir", default=str(REPO / ".rag" / "bench-elite"), help="where catalogs are kept")
    parser.add_argument("--skip-collect", action="store_true", help="skip the collect-latency benchmark")
    parser.add_argument("--collect-only", action="store_true", help="only the collect-latency benchmark")
    parser.add_argument("--copies", type=int, default=2,
                        help="copies of the three corpora for the collect benchmark (1.66M tokens each; default 2)")
    add_benchmarks_option(parser)
    args = parser.parse_args()
    root = benchmarks_option(parser, args)
    workdir = Path(args.workdir)
    if not args.skip_collect:
        figures = collect_benchmark(root, workdir, args.limit, args.copies) | {"copies": args.copies}
        print(json.dumps(figures, indent=1))
        write_results(figures, "elite-collect")
    if args.collect_only:
        return
    from rag.models.embedders import Embedder

    embedder = Embedder(threads=1)
    for name in args.benchmark or NAMES:
        figures = evaluate(root, workdir, name, args.budgets, args.limit, embedder, args.half)
        STORES.clear()   # one benchmark's store at a time keeps memory flat
        print(json.dumps(figures, indent=1))
        write_results(figures, f"elite-{name}-{args.half}")


if __name__ == "__main__":
    main()
