"""Multi-hop retrieval quality on the fixed tune/report halves of the English dev sets, with bootstrap intervals.

Every variant runs on both halves of every benchmark at every budget. Choose on the tune half; the report half
is what the README may quote. Metrics: source completeness (all gold documents present) and evidence recall.
A variant is `method[:key=value,...]` with LongRAGConfig fields, e.g. `longrag:hops=2`, `hybrid:hops=2`;
A trailing `@cap=N` reads the workspace re-planned with a unit cap of N tokens (bench/groupings.py), e.g.
`longrag@cap=1000`; variants on different caps are paired question by question like any others.
`--sensitivity` adds each free weight at -50% and +50% of its default. `--grouping` picks the workspace's units
(bench/groupings.py). Prints a table per benchmark and writes bench/results/multihop-<grouping>[-<tag>].json.
Where the questions give supporting-fact sentences (HotpotQA, 2WikiMultihopQA), it also prints their recall in the
context (rag.evaluation.metrics.sentence_recall); and where the gold answer is a span of the gold documents, whether
the context shows it inside one of them (`answer shown`). `--limit N` probes the first N questions of each half.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.groupings import GROUPINGS, prepare  # noqa: E402
from bench.results_file import results_path, write_json  # noqa: E402
from rag.evaluation.bootstrap import bootstrap_ci, paired_difference_ci  # noqa: E402
from rag.evaluation.metrics import normalize_answer, sentence_recall  # noqa: E402
from rag.query.hybrid import hybrid_explore, pack_hybrid  # noqa: E402
from rag.query.methods import METHODS, rank_once  # noqa: E402
from rag.query.methods import method as registered  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates  # noqa: E402
from rag.retrieval.request import Request, Tools  # noqa: E402
from rag.sources.benchmarks import (  # noqa: E402
    HALVES,
    Question,
    add_benchmarks_option,
    benchmarks_option,
    complete,
    evidence_recall,
    load_questions,
    split_halves,
)
from rag.text.tables import markdown_table  # noqa: E402
from rag.units.long_units import DEFAULT_CAP  # noqa: E402

NAMES = ("hotpotqa", "musique", "2wikimultihopqa")
CALLER = Caller(frozenset({"bench"}))
FREE_WEIGHTS = ("link_boost", "link_share", "lexical_weight", "hop_names", "hop_seeds")
ON_LONGRAG = ("longrag", "longrag-extract")  # LongRAG's ranking (with the variant's settings), each its own packing


@dataclass(frozen=True)
class Variant:
    name: str
    method: str
    config: LongRAGConfig
    unit_cap: int = DEFAULT_CAP

    def run(self, snap, embedder, counter, question: str, budgets: list[int]):
        """(result, seconds) per budget; LongRAG and the hybrid rank once and pack per budget (what their
        retrieve functions do for one budget), so each budget's seconds are the ranking's plus its packing."""
        request, tools = Request(CALLER, question, max(budgets)), Tools(embedder, counter, longrag=self.config)
        if self.method == "hybrid":
            return rank_once(lambda: hybrid_explore(snap, request, tools, self.config), pack_hybrid, budgets)
        if self.method in ON_LONGRAG:
            pack = registered(self.method).pack
            return rank_once(lambda: longrag_candidates(snap, request, tools, self.config),
                             lambda r, b: pack(snap, r, b, tools), budgets)
        out = []
        for b in budgets:
            start = time.perf_counter()
            result = registered(self.method).run(snap, Request(CALLER, question, b), tools)
            out.append((result, time.perf_counter() - start))
        return out


def parse_variant(spec: str) -> Variant:
    """`method[:key=value,...][@cap=N]` → a Variant, or a one-line error naming the problem."""
    head, _, cap = spec.partition("@")
    if cap and not (cap.startswith("cap=") and cap[4:].isdigit()):
        raise SystemExit(f"variant {spec!r}: expected '@cap=<tokens>' after the settings")
    method, _, settings = head.partition(":")
    if method not in METHODS:  # longrag and hybrid rank once for every budget; the others run per budget
        raise SystemExit(f"variant {spec!r}: unknown method {method!r}")
    changes = settings_of(settings.split(","), f"variant {spec!r}")
    return Variant(spec, method, replace(LongRAGConfig(), **changes), int(cap[4:]) if cap else DEFAULT_CAP)


def settings_of(pairs: list[str], where: str) -> dict:
    """`key=value` pairs as LongRAGConfig fields of their types, or a one-line error naming `where`."""
    # Field types are strings under `from __future__ import annotations`.
    kinds = {f.name: {"int": int, "float": float, "str": str}[str(f.type)] for f in fields(LongRAGConfig)}
    changes = {}
    for pair in filter(None, pairs):
        key, _, value = pair.partition("=")
        if key not in kinds:
            raise SystemExit(f"{where}: LongRAGConfig has no field {key!r}")
        changes[key] = kinds[key](value)
    return changes


def sensitivity_variants(base: Variant) -> list[Variant]:
    """Each free weight of the base variant at -50% and +50% of its value, the others unchanged."""
    out = []
    unused = "link_share" if base.config.link_rule == "fixed" else "link_boost"  # the link rule reads one of them
    for name in (w for w in FREE_WEIGHTS if w != unused):
        value = getattr(base.config, name)
        for factor in (0.5, 1.5):
            changed = max(1, round(value * factor)) if isinstance(value, int) else round(value * factor, 4)
            head, at, cap = base.name.partition("@")
            prefix = head + ("," if ":" in head else ":")
            out.append(Variant(f"{prefix}{name}={changed}{at}{cap}", base.method,
                               replace(base.config, **{name: changed}), base.unit_cap))
    return out


def measure(snap, embedder, counter, variant: Variant, questions: list[Question], budgets: list[int],
            texts: dict[str, str]) -> dict:
    """Per budget, per-question completeness, evidence recall, supporting-sentence recall and answer-shown lists (None
    where the question has no sentence facts, or no answer that is a span of its gold documents), tokens and seconds."""
    per = {b: {"complete": [], "recall": [], "sentences": [], "answer": [], "tokens": []} for b in budgets}
    seconds = []
    for q in questions:
        for (result, s), b in zip(variant.run(snap, embedder, counter, q.question, budgets), budgets):
            assert result.tokens <= b, f"{variant.name} over budget {b}"
            ids = {i.doc_id for i in result.items}
            per[b]["complete"].append(float(complete(ids, q.gold_doc_ids)))
            per[b]["recall"].append(evidence_recall(ids, q.gold_doc_ids))
            per[b]["sentences"].append(sentence_recall(result.items, q.supporting_sentences))
            per[b]["answer"].append(answer_shown(result.items, q, texts))
            per[b]["tokens"].append(result.tokens)
            seconds.append(s)
    return {"per_budget": per, "seconds": seconds}


def answer_shown(items, q: Question, texts: dict[str, str]) -> float | None:
    """1.0 when the gold answer (or an alias) is a span of a gold document as the context shows it; None when it is
    no span of the gold documents' whole texts (yes / no, counts), so that no context could show it."""
    answers = [a for a in (normalize_answer(x) for x in (q.answer, *q.aliases)) if a]
    whole = f" {normalize_answer(' '.join(texts.get(d, '') for d in q.gold_doc_ids))} "
    spans = [a for a in answers if f" {a} " in whole]
    if not spans:
        return None
    shown = f" {normalize_answer(' '.join(i.text for i in items if i.doc_id in q.gold_doc_ids))} "
    return float(any(f" {a} " in shown for a in spans))


def current_texts(snap) -> dict[str, str]:
    """doc_id → current text of every document in a unit (a benchmark's documents have one version each)."""
    keys = {(r.doc_id, r.doc_version) for r in snap.member_table.rows}
    return {doc_id: text for (doc_id, _), (_, text) in snap.texts(sorted(keys)).items()}


def summarise(raw: dict, reference: dict | None) -> dict:
    """Intervals per budget, and the paired completeness difference to the reference variant on the same half."""
    out = {}
    for b, v in raw["per_budget"].items():
        cell = {"completeness": bootstrap_ci(v["complete"]).to_json(),
                "evidence_recall": bootstrap_ci(v["recall"]).to_json(),
                "tokens_mean": round(float(np.mean(v["tokens"])), 1)}
        for key, name in (("sentences", "sentence_recall"), ("answer", "answer_shown")):
            if any(x is not None for x in v[key]):
                cell[name] = bootstrap_ci(v[key]).to_json()
                if reference is not None:
                    diff = paired_difference_ci(v[key], reference["per_budget"][b][key])
                    cell[f"{name}_minus_reference"] = diff.to_json()
        if reference is not None:
            diff = paired_difference_ci(v["complete"], reference["per_budget"][b]["complete"])
            cell["completeness_minus_reference"] = diff.to_json()
        out[str(b)] = cell
    ms = np.array(raw["seconds"]) * 1000
    out["latency_ms"] = {"p50": round(float(np.percentile(ms, 50)), 1), "p95": round(float(np.percentile(ms, 95)), 1)}
    return out


def run_benchmark(folder: Path, grouping: str, variants: list[Variant], budgets: list[int], embedder,
                  halves_run: tuple[str, ...] = HALVES, workdir: Path = REPO / ".rag" / "bench",
                  limit: int | None = None) -> dict:
    name = folder.name
    caps = list(dict.fromkeys(v.unit_cap for v in variants))
    prepared = {cap: prepare(folder, workdir, grouping, embedder, cap) for cap in caps}
    snaps = {cap: p.reader.snapshot() for cap, p in prepared.items()}
    counter = prepared[caps[0]].reader.counter
    texts = current_texts(snaps[caps[0]])  # the documents are the same under every cap
    halves = {h: qs[:limit] for h, qs in split_halves(name, load_questions(folder)).items()}  # a probe's slice
    for snap in snaps.values():
        snap.lexical  # noqa: B018 - built before the first timed query, as a warm service has it
    first = prepared[caps[0]]
    figures = {"units": first.units, "documents": first.documents,
               "units_by_cap": {str(cap): p.units for cap, p in prepared.items()},
               "questions": {h: len(qs) for h, qs in halves.items()}, "variants": {}}
    for half in halves_run:
        raws = {}
        for v in variants:
            raws[v.name] = measure(snaps[v.unit_cap], embedder, counter, v, halves[half], budgets, texts)
            reference = raws[variants[0].name] if v is not variants[0] else None
            figures["variants"].setdefault(v.name, {})[half] = summarise(raws[v.name], reference)
            print(f"  {name} {half} {v.name}: " + " ".join(
                f"{b}:{figures['variants'][v.name][half][str(b)]['completeness']['mean']:.3f}" for b in budgets),
                flush=True)
    for p in prepared.values():
        p.close()
    return figures


def table(name: str, figures: dict, budgets: list[int]) -> str:
    rows = []
    sentences = any("sentence_recall" in c[str(budgets[0])] for by_half in figures["variants"].values()
                    for c in by_half.values())
    for v, by_half in figures["variants"].items():
        for half in by_half:
            cells = by_half[half]
            rows.append([v, half] + [_ci(cells[str(b)]["completeness"]) for b in budgets]
                        + [_ci(cells[str(b)]["evidence_recall"]) for b in budgets[:1]]
                        + ([f"{cells[str(b)]['sentence_recall']['mean']:.3f}" for b in budgets] if sentences else [])
                        + [f"{cells[str(b)]['answer_shown']['mean']:.3f}" if "answer_shown" in cells[str(b)] else "-"
                           for b in budgets]
                        + [f"{cells['latency_ms']['p50']}/{cells['latency_ms']['p95']}"])
    head = (["variant", "half"] + [f"complete@{b}" for b in budgets] + [f"recall@{budgets[0]}"]
            + ([f"sentences@{b}" for b in budgets] if sentences else []) + [f"answer@{b}" for b in budgets]
            + ["ms p50/p95"])
    return f"\n{name} (questions {figures['questions']}, units {figures['units']})\n" + markdown_table(head, rows)


def _ci(c: dict) -> str:
    return f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    p.add_argument("--variants", default="longrag;shortchunk",
                   help="variants separated by ';' (the first is the reference of the paired differences)")
    p.add_argument("--sensitivity", action="store_true", help="add the ±50%% curves of the first variant's weights")
    p.add_argument("--grouping", choices=GROUPINGS, default="title-links")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--tag", default="", help="suffix of the results file")
    p.add_argument("--half", choices=HALVES, help="one half only (default: both)")
    p.add_argument("--limit", type=int, help="the first N questions of each half only (a probe, not a figure)")
    p.add_argument("--embedder", choices=("minilm", "minilm-int8"), default="minilm",
                   help="the workspaces' embedder (each embedder keeps its own workspaces: spaces are never mixed)")
    p.add_argument("--workdir", type=Path, default=REPO / ".rag" / "bench",
                   help="where the workspaces are kept (minilm-int8's: this folder's name + '-minilm-int8')")
    add_benchmarks_option(p)
    args = p.parse_args()
    root = benchmarks_option(p, args)
    threadpool_limits(limits=1, user_api="blas")  # numpy is loaded: an environment variable set now is not read
    from rag.models.embedders import Embedder

    variants = [parse_variant(s) for s in args.variants.split(";")]
    if args.sensitivity:
        variants += sensitivity_variants(variants[0])
    budgets = [int(b) for b in args.budgets.split(",")]
    embedder = Embedder(threads=1, int8=args.embedder == "minilm-int8")
    workdir = args.workdir if args.embedder == "minilm" else args.workdir.with_name(f"{args.workdir.name}-{args.embedder}")
    out = results_path(f"multihop-{args.grouping}", args.tag)
    figures = {"command": "python bench/multihop.py " + " ".join(sys.argv[1:]), "grouping": args.grouping,
               "split": "rag.sources.benchmarks.half_of: sha256('tune-report|<benchmark>|<qid>') last bit, 0 tune, 1 report",
               "reference": variants[0].name, "budgets": budgets, "embedder": args.embedder, "benchmarks": {}}
    for name in args.benchmark or NAMES:
        figures["benchmarks"][name] = run_benchmark(root / name, args.grouping, variants, budgets, embedder,
                                                    (args.half,) if args.half else HALVES, workdir, args.limit)
        write_json(out, figures)
        print(table(name, figures["benchmarks"][name], budgets), flush=True)
    figures["macro_completeness"] = macro(figures, budgets)
    write_json(out, figures)
    print("\nmean over the benchmarks (completeness):")
    print(markdown_table(["variant", "half"] + [str(b) for b in budgets],
                         [[v, h] + [f"{x:.3f}" for x in xs] for v, by_half in figures["macro_completeness"].items()
                          for h, xs in by_half.items()]))


def macro(figures: dict, budgets: list[int]) -> dict:
    """Each variant's completeness averaged over the benchmarks (each weighs the same), per half and budget."""
    names = list(figures["benchmarks"])
    variants = figures["benchmarks"][names[0]]["variants"]
    return {v: {h: [float(np.mean([figures["benchmarks"][n]["variants"][v][h][str(b)]["completeness"]["mean"]
                                   for n in names])) for b in budgets] for h in variants[v]} for v in variants}


if __name__ == "__main__":
    main()
