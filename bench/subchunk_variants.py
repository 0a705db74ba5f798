"""What a vector stands for: sub-chunk recipes (size, overlap) compared on the three English dev sets at once.

Each recipe `target/max[+overlap]` (tokens; sentence-aligned; the title in front of every embedded sub-chunk, as
rag.units.subchunk_recipe embeds it) gets its own workspace per benchmark, published through the ingest steps with that
recipe (vectors of embedded texts another recipe's workspace already holds are re-used, not re-embedded). Every
method variant (bench/multihop.py's spelling, e.g. `longrag`, `shortchunk`) runs on both halves of the fixed
tune/report split at every budget: choose on the tune half, quote the report half. The first recipe is the
reference of the paired completeness differences. Also per recipe: sub-chunk rows, bytes on disk ÷ raw text
(rag.store.storage.measure, real vectors) and the warm two-hop latency (rank once, pack per budget).
Prints tables and writes bench/results/subchunk-variants[-<tag>].json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.multihop import NAMES, _ci, measure, parse_variant, summarise  # noqa: E402
from bench.results_file import results_path, write_json  # noqa: E402
from rag.evaluation.prepared import benchmark_settings, open_prepared  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import HALVES, add_benchmarks_option, benchmarks_option, load_questions, split_halves  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.text.tables import markdown_table  # noqa: E402
from rag.units.subchunk_recipe import SubchunkRecipe  # noqa: E402


def parse_recipe(spec: str) -> SubchunkRecipe:
    """`target/max[+overlap]` → a recipe, or a one-line error naming the problem."""
    try:
        sizes, _, overlap = spec.partition("+")
        target, maximum = (int(x) for x in sizes.split("/"))
        return SubchunkRecipe(target, maximum, int(overlap or 0))
    except ValueError as err:
        raise SystemExit(f"recipe {spec!r}: expected target/max[+overlap] in tokens ({err})") from None


def slug(recipe: SubchunkRecipe) -> str:
    return f"{recipe.target_tokens}-{recipe.max_tokens}-{recipe.overlap_tokens}"


def build(folder: Path, root: Path, recipe: SubchunkRecipe, embedder, counter, others: list[Path]) -> Path:
    """The benchmark's workspace cut by `recipe`, brought up to date (incremental) through the ingest steps."""
    workspace = root / f"{folder.name}@{slug(recipe)}"
    settings = replace(benchmark_settings(folder), chunk_target=recipe.target_tokens, chunk_max=recipe.max_tokens,
                       chunk_overlap=recipe.overlap_tokens)
    catalog = Catalog(workspace / "catalog.duckdb", entry="bench/subchunk_variants.py")
    try:
        publish_documents(catalog, settings)
        publish_units(catalog, counter, settings)
        siblings = lambda: [SubchunkIndex.reader(p / "lancedb", None) for p in others if p.exists()]  # noqa: E731
        report = publish_index(catalog, SubchunkIndex(str(workspace / "lancedb")), embedder.encode, counter, settings,
                               embedder.name, siblings)
    finally:
        catalog.close()
    print(f"  {folder.name} {recipe.name}: {report.subchunks} sub-chunks, {report.embedded} embedded now", flush=True)
    return workspace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", action="append", choices=NAMES, help="default: all three")
    p.add_argument("--recipes", default="112/128,56/64",
                   help="comma-separated target/max[+overlap]; the first is the reference")
    p.add_argument("--variants", default="longrag;shortchunk", help="method variants separated by ';'")
    p.add_argument("--budgets", default="1000,2000,4000")
    p.add_argument("--half", choices=HALVES, help="one half only (default: both)")
    p.add_argument("--tag", default="")
    p.add_argument("--workspace-root", default=str(REPO / ".rag" / "bench" / "subchunks"))
    p.add_argument("--print", metavar="JSON", help="only print the tables of a results file (of a run cut short too)")
    add_benchmarks_option(p)
    args = p.parse_args()
    if args.print:
        return print_tables(json.loads(Path(args.print).read_text()))
    root = benchmarks_option(p, args)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rag.models.embedders import Embedder

    recipes = [parse_recipe(s) for s in args.recipes.split(",")]
    variants = [parse_variant(s) for s in args.variants.split(";")]
    budgets = [int(b) for b in args.budgets.split(",")]
    halves_run = (args.half,) if args.half else HALVES
    query_embedder, index_embedder, counter = Embedder(threads=1), Embedder(threads=2), default_counter()
    out = results_path("subchunk-variants", args.tag)
    figures = {"command": "python bench/subchunk_variants.py " + " ".join(sys.argv[1:]),
               "split": "rag.sources.benchmarks.half_of: sha256('tune-report|<benchmark>|<qid>') last bit, 0 tune, 1 report",
               "reference": recipes[0].name, "budgets": budgets, "benchmarks": {}}
    names, raws = args.benchmark or list(NAMES), {}
    halves = {name: split_halves(name, load_questions(root / name)) for name in names}
    for name in names:
        figures["benchmarks"][name] = {"questions": {h: len(qs) for h, qs in halves[name].items()}, "recipes": {}}
    for recipe in recipes:   # recipe by recipe over all benchmarks, so a cut-short run still compares them all
        for name in names:
            bench = figures["benchmarks"][name]
            built = [Path(args.workspace_root) / f"{name}@{slug(r)}" for r in recipes[:recipes.index(recipe)]]
            workspace = build(root / name, Path(args.workspace_root), recipe, index_embedder, counter, built)
            prepared = open_prepared(name, workspace, query_embedder, counter)
            snap = prepared.reader.snapshot()
            snap.lexical  # noqa: B018 - built before the first timed query, as a warm service has it
            cell = bench["recipes"][recipe.name] = {
                "subchunks": prepared.subchunks, "units": prepared.units, "checks": prepared.checks,
                "storage_ratio": prepared.storage.ratio(), "index_ratio": prepared.storage.shares()["index"],
                "variants": {}}
            for v in variants:
                for half in halves_run:
                    raw = raws[(name, recipe.name, v.name, half)] = measure(snap, query_embedder, counter, v,
                                                                            halves[name][half], budgets)
                    reference = raws.get((name, recipes[0].name, v.name, half)) if recipe != recipes[0] else None
                    cell["variants"].setdefault(v.name, {})[half] = summarise(raw, reference)
                    print(f"  {name} {recipe.name} {v.name} {half}: " + " ".join(
                        f"{b}:{cell['variants'][v.name][half][str(b)]['completeness']['mean']:.3f}" for b in budgets),
                        flush=True)
            prepared.close()
            write_json(out, figures)
    figures["macro_completeness"] = macro(figures, budgets)
    write_json(out, figures)
    print_tables(figures)


def print_tables(figures: dict) -> None:
    budgets = figures["budgets"]
    for name, bench in figures["benchmarks"].items():
        print(table(name, bench, budgets), flush=True)
    print("\nmean over the benchmarks where every recipe ran (completeness):")
    print(markdown_table(["recipe", "variant", "half"] + [str(b) for b in budgets],
                         [[r, v, h] + [f"{x:.3f}" for x in xs] for (r, v, h), xs in macro(figures, budgets)]))


def table(name: str, bench: dict, budgets: list[int]) -> str:
    rows = []
    for recipe, cell in bench["recipes"].items():
        for v, by_half in cell["variants"].items():
            for half, c in by_half.items():
                diff = c[str(budgets[0])].get("completeness_minus_reference")
                rows.append([recipe, v, half] + [_ci(c[str(b)]["completeness"]) for b in budgets]
                            + [_ci(diff) if diff else "–", f"{c['latency_ms']['p50']}/{c['latency_ms']['p95']}",
                               cell["subchunks"], cell["storage_ratio"]])
    head = (["recipe", "variant", "half"] + [f"complete@{b}" for b in budgets]
            + [f"Δ@{budgets[0]} vs first", "ms p50/p95", "rows", "bytes÷text"])
    return f"\n{name} (questions {bench['questions']})\n" + markdown_table(head, rows)


def macro(figures: dict, budgets: list[int]) -> list:
    """Each (recipe, variant, half)'s completeness averaged over the benchmarks where every recipe has it (each
    benchmark weighs the same), so that recipes are compared on the same benchmarks in a run cut short."""
    benches = list(figures["benchmarks"].values())
    recipes = list(benches[0]["recipes"])
    out = []
    for v, by_half in benches[0]["recipes"][recipes[0]]["variants"].items():
        for half in by_half:
            common = [b for b in benches if all(half in b["recipes"].get(r, {}).get("variants", {}).get(v, {})
                                                for r in recipes)]
            for r in recipes:
                out.append(((r, v, half), [float(np.mean([b["recipes"][r]["variants"][v][half][str(k)]["completeness"]
                                                          ["mean"] for b in common])) if common else float("nan")
                                           for k in budgets]))
    return out

if __name__ == "__main__":
    main()
