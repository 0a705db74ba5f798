"""The figure tables of README.md and docs/figures.md, rendered from bench/results/ (nothing is re-measured).

    python bench/figures.py           # rewrite each table between its marker comments
    python bench/figures.py --check   # exit 1 naming each table that differs from its results files

Each figure names its results file; the file gives the value, the command that made it and the machine it ran on.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
BENCHMARKS = {"hotpotqa": ("HotpotQA", 124), "musique": ("MuSiQue", 106), "2wikimultihopqa": ("2WikiMultihopQA", 53)}
BUDGETS = ("1000", "2000", "4000")


@dataclass(frozen=True)
class Figure:
    """One row: what is measured, how to read the value from its results files, and what it is held against."""
    what: str
    files: tuple[str, ...]
    value: Callable[..., str]
    against: str = ""
    headline: bool = False


def load(name: str) -> dict:
    """One results file, parsed."""
    path = RESULTS / name
    if not path.exists():
        raise SystemExit(f"bench/results/{name} is missing: run its bench (bench/README.md)")
    return json.loads(path.read_text(encoding="utf-8"))


def three(values) -> str:
    """Three figures at 1K / 2K / 4K."""
    return " / ".join(f"{v:.3f}" for v in values)


def report(data: dict, benchmark: str, variant: str, metric: str = "completeness") -> list[float]:
    """A multihop variant's report-half means at 1K, 2K and 4K."""
    half = data["benchmarks"][benchmark]["variants"][variant]["report"]
    return [half[b][metric]["mean"] for b in BUDGETS]


def elite(data: dict, metric: str = "source_completeness") -> list[float]:
    """ELITE's (offline policy) report-half figures at 1K, 2K and 4K."""
    return [data["policies"]["offline"]["budgets"][b][metric] for b in BUDGETS]


def anchor(benchmark: str) -> str:
    """The held-out reference completeness of one benchmark."""
    return "reference " + " / ".join(f"{v:g}" for v in load("anchors.json")["completeness"][benchmark])


def quality(benchmark: str, headline: bool = False) -> Figure:
    """The best registered methods' completeness on one benchmark's report half."""
    name, n = BENCHMARKS[benchmark]

    def value(best: dict) -> str:
        extract, default = report(best, benchmark, "longrag-extract"), report(best, benchmark, "longrag")
        return f"`longrag-extract` **{three(extract)}**, `longrag` {three(default)}"
    return Figure(f"completeness @1K / 2K / 4K, {name} ({n} questions)", ("multihop-title-links-report.json",),
                  value, anchor(benchmark), headline)


def recall(best: dict) -> str:
    """Evidence recall at 1K of both LongRAG methods, every benchmark."""
    rows = []
    for method in ("longrag", "longrag-extract"):
        rows.append(f"`{method}` " + " / ".join(f"{report(best, b, method, 'evidence_recall')[0]:.3f}"
                                                for b in BENCHMARKS))
    return "; ".join(rows)


def baselines(benchmark: str) -> Figure:
    """The other registered methods on one benchmark, for comparison."""
    name, n = BENCHMARKS[benchmark]

    def value(base: dict, hybrid: dict, elite_data: dict) -> str:
        return (f"short chunks {three(report(base, benchmark, 'shortchunk'))}; whole units (`longrag-units`) "
                f"{three(report(base, benchmark, 'longrag-units'))}; `hybrid` "
                f"{three(report(hybrid, benchmark, 'hybrid:hops=1'))}; ELITE {three(elite(elite_data))}")
    return Figure(f"other methods' completeness @1K / 2K / 4K, {name} ({n} questions)",
                  ("multihop-title-links-report-baselines.json", "multihop-title-links-report-hybrid.json",
                   f"elite-{benchmark}-report.json"), value)


def chinese(name: str, label: str) -> Figure:
    """Chinese completeness against the BM25-over-jieba anchor."""
    def value(data: dict) -> str:
        c = data["completeness"]
        return (f"`longrag` {three(c['longrag'][b] for b in BUDGETS)}, `longrag-extract` "
                f"{three(c['longrag_extract'][b] for b in BUDGETS)}")

    def against(data: dict) -> str:
        return "BM25 over jieba " + three(data["completeness"]["bm25_jieba_anchor"][b] for b in BUDGETS)
    data = load(f"chinese-{name}-extract.json")
    return Figure(f"completeness @1K / 2K / 4K, {label} (400 questions, multilingual embedder)",
                  (f"chinese-{name}-extract.json",), value, against(data))


def latency(size: str, label: str, headline: bool = False) -> Figure:
    """A warm two-hop LongRAG query's CPU time, and its parts."""
    def value(data: dict) -> str:
        total, parts = data["latency_ms"]["longrag"], data["parts_p50_ms"]["longrag"]
        split = " / ".join(f"{parts[k]:g}" for k in ("embed", "search", "rank", "pack"))
        return f"**{total['p50']:g} / {total['p95']:g}** (embed / search / rank / pack p50: {split})"
    goal = {"110k": "goal ≤ 25 / ≤ 50", "1m": "goal p50 ≤ 60", "3m": "goal p50 ≤ 60"}.get(size, "")
    return Figure(f"two-hop LongRAG, CPU ms p50 / p95, {label}", (f"hop-latency-{size}.json",), value, goal,
                  headline)


def serve_load(data: dict) -> str:
    """`rag serve` throughput and tail latency under a re-publish."""
    return (f"**{data['requests_per_s']:g} requests/s, p99 {data['latency_ms']['p99']:g} ms** "
            f"({data['latency_ms_during_ingest']['p99']:g} ms during the re-publish), {data['errors']} errors, "
            f"{data['leaks']} leaks; {data['server_cpu_ms_per_request']:g} server CPU ms a request")


def storage(hotpot: dict, musique: dict, wiki: dict) -> str:
    """Bytes on disk ÷ raw text after the first ingest and after five 10% re-publishes."""
    parts = []
    for (name, _), data in zip(BENCHMARKS.values(), (hotpot, musique, wiki)):
        corpus = next(iter(data["corpora"].values()))
        parts.append(f"{name} {corpus['after_first_ingest']['ratio']:g} / {corpus['after_republishes']['ratio']:g}")
    return "; ".join(parts)


def embedding(data: dict) -> str:
    """Ingest embedding throughput against sentence-transformers on torch."""
    rate = data["tokens_per_cpu_s"]
    return (f"**{rate['openvino-bf16']:,}** (sentence-transformers on torch {rate['torch']:,}: "
            f"{data['over_torch']['openvino-bf16']:g}×)")


def scale_ops(data: dict) -> str:
    """Operations on a partitioned 100K-document workspace."""
    ops = data["after_change"]
    return (f"**{ops['no_change_run_s']:g} / {ops['edit_published_s']:g} / {ops['delete_invisible_s']:g} s** "
            f"({ops['documents']:,} documents, {ops['partitions']} partitions)")


def permissions(data: dict) -> str:
    """Leaks over random callers, budgets and revoked ACLs."""
    trials = sum(v["trials"] for v in data.values() if isinstance(v, dict) and "trials" in v)
    leaks = sum(v["leaks"] for v in data.values() if isinstance(v, dict) and "leaks" in v)
    return f"**{leaks} leaks** in {trials:,} trials (LongRAG, short chunks, ELITE)"


def bucket_source(data: dict) -> str:
    """An s3:// source: a run with nothing changed, and its published state against the same folder's."""
    run, sensor, same = data["no_change"]["documents_step"], data["no_change"]["sensor_tick"], data["compare"]
    identical = all(same["identical"].values()) and same["rankings_identical"]
    return (f"**{run['object_body_bytes']} bytes** of objects read; listing {sensor['seconds']:.1f} s, documents "
            f"step {run['seconds']:.1f} s, {sum(run['requests'].values())} requests at "
            f"{data['no_change']['objects']:,} objects (moto on loopback); state and rankings "
            f"{'identical' if identical else 'DIFFERENT'} to a folder's at {same['documents']:,} documents")


def revocation_latency(data: dict) -> str:
    """A folder ACL object's edit (a bucket source) and a `chgrp` (a folder read with `--acl-from posix`), with the
    sensor on, until `rag retrieve` no longer shows the documents."""
    bucket, chgrp = data["revocation_latency"], data["chgrp_latency"]
    return (f"**{bucket['edit_to_hidden_s']:.1f} s / {chgrp['edit_to_hidden_s']:.1f} s** from the tick that sees the "
            f"change (run {bucket['run_s']:.1f} / {chgrp['run_s']:.1f} s, {bucket['documents']} documents), plus up "
            f"to one sensor interval ({bucket['sensor_interval_s']} s) before that tick")


def cold_retrieve(data: dict) -> str:
    """A whole `rag retrieve` process."""
    after = data["results"]["after"]
    return f"{after['cpu_seconds_median']:g} CPU s, {after['peak_mb_median']} MB peak"


def workers(data: dict) -> str:
    """Serving workers sharing one mapped read state; against the code before (`--before`): its fresh workers where
    they too mapped the files, else its worker that built its own state."""
    runs = data["runs"]

    def span(values: list[float], unit: str) -> str:
        low, high = (f"{v:,.0f}" if unit == "MB" else f"{v:g}" for v in (min(values), max(values)))
        return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"

    def fresh(code: str) -> str:
        summary, started = data["summary"][code], runs[code]["workers"][1:]
        many = max(summary, key=int)
        return (f"an extra worker USS {span(summary[many]['uss_mb_each'][1:], 'MB')}, PSS "
                f"{span(summary[many]['pss_mb_each'][1:], 'MB')}; {many} workers' PSS "
                f"{summary[many]['pss_mb_total']:,.0f} MB; a fresh worker's first answer "
                f"{span([w['first_answer_seconds'] for w in started], 's')}, "
                f"{span([w['first_answer_cpu_seconds'] for w in started], 'CPU s')} (its read state "
                f"{span([w['read_state_cpu_seconds'] for w in started], 'CPU s')}), from its start to its "
                f"{data['questions']}th answer and the rest of its state "
                f"{span([w['warm_cpu_seconds'] for w in started], 'CPU s')}")

    text = fresh("after")
    if "before" in runs and len(runs["before"]["workers"]) > 1:
        text += f" (before: {fresh('before')})"
    elif "before" in runs:
        alone = data["summary"]["before"]["1"]["uss_mb_each"][0]
        built = min(w["read_state_cpu_seconds"] for w in runs["before"]["workers"])
        text += f"; a worker building its own: USS {alone:,.0f} MB, read state {built:g} CPU s"
    return text + ("; same answers" if data["same_answers_before_after"] else "; ANSWERS DIFFER")


def projected(workers_1m: dict, workers_3m: dict, hops_1m: dict, hops_3m: dict, ann: dict) -> str:
    """10M sub-chunks projected from the 1M and 3M measurements: each part linear in sub-chunks through the two
    points, except the dense search, which scales as the IVF measured at 3M and 10M."""
    def line(at_1m: float, at_3m: float) -> float:  # through (1M, at_1m) and (3M, at_3m), read at 10M
        return at_3m + (at_3m - at_1m) * 3.5

    def fresh(data: dict) -> float:
        return max(w["first_answer_seconds"] for w in data["runs"]["after"]["workers"][1:])

    most = max(workers_3m["summary"]["after"], key=int)
    pss = [w["summary"]["after"][most]["pss_mb_total"] for w in (workers_1m, workers_3m)]
    files = [w["read_state_files_mb"] for w in (workers_1m, workers_3m)]
    parts = [h["parts_p50_ms"]["longrag"] for h in (hops_1m, hops_3m)]
    ivf = {n: ann["sizes"][n]["ivf"]["cpu_ms"]["p50"] for n in ("3000000", "10000000")}
    p50 = (parts[1]["embed"] + parts[1]["pack"] + parts[1]["search"] * ivf["10000000"] / ivf["3000000"]
           + line(parts[0]["rank"], parts[1]["rank"]))
    measured = "; ".join(f"{label}: two-hop p50 {h['latency_ms']['longrag']['p50']:g} ms, {most} workers' PSS "
                         f"{m:,.0f} MB, a fresh worker's first answer ≤ {fresh(w):g} s" for label, h, m, w in
                         (("1M", hops_1m, pss[0], workers_1m), ("3M", hops_3m, pss[1], workers_3m)))
    return (f"**10M projected: two-hop p50 {p50:.0f} ms, {most} workers' PSS {line(*pss) / 1024:.1f} GB, a fresh "
            f"worker's first answer {line(fresh(workers_1m), fresh(workers_3m)):.1f} s, read-state files "
            f"{line(*files) / 1024:.1f} GB** (measured {measured})")


def value_range(values: list[float]) -> str:
    """The values' smallest and largest, or the one value they all are."""
    return f"{min(values):g}" if min(values) == max(values) else f"{min(values):g}–{max(values):g}"


def next_snapshot(data: dict) -> str:
    """A serving worker's next snapshot after a small publish, this code against the code before (ABBA)."""
    def cpu(run: dict, part: str | None) -> float:
        step = run["next_snapshot"]
        if part == "open":  # what is not a part: opening the snapshot (the catalog's shared file) and one question
            return round(step["cpu_seconds"] - sum(p["cpu_seconds"] for p in step["parts"].values()), 2)
        return (step["parts"][part] if part else step)["cpu_seconds"]

    def span(runs: list[dict], part: str | None = None) -> str:
        return value_range([cpu(r, part) for r in runs])

    def written(runs: list[dict]) -> str:
        return f"{max(r['next_snapshot']['written_mb'] for r in runs):,.0f} MB"

    def query(runs: list[dict]) -> str:
        return value_range([r["query_ms_on_it"]["p50"] for r in runs]) + " ms"

    after = [r for r in data["runs"] if r["code"] == "."]
    before = [r for r in data["runs"] if r["code"] != "."]
    parts = ", ".join(f"{name} {span(after, part)} (before {span(before, part)})" for name, part in
                      (("members and ACLs", "current"), ("vectors", "vectors"), ("BM25", "lexical"),
                       ("opening it (the catalog file) and one question", "open")))
    text = (f"**{span(after)} CPU s** (before: {span(before)}): {parts}; {written(after)} of files written (before "
            f"{written(before)})")
    if all("query_ms_on_it" in r for r in data["runs"]):
        text += f"; a question on it p50 {query(after)} (before {query(before)})"
    return text + ("; same answers" if data["same_answers"] else "; ANSWERS DIFFER")


def vector_search(data: dict) -> str:
    """The in-memory sub-chunk search alone."""
    rows = []
    for size, label in (("110000", "110K"), ("1000000", "1M")):
        ms = data["sizes"][size]["latency_ms"]
        rows.append(f"{label}: {ms['one group (20% of rows)']['p50']:g} / {ms['all five groups']['p50']:g}")
    return "; ".join(rows)


def ann_search(data: dict, spread: dict, minilm: dict) -> str:
    """The IVF against the exact pass up to 10M rows, its recall on rows spread wider and on replicated MiniLM rows
    with real questions, and what the largest size costs a host."""
    rows = [f"{int(n) / 1e6:g}M" if int(n) >= 10**6 else f"{int(n) // 1000}K" for n in data["sizes"]]
    rows = [f"{label}: {f['exact']['cpu_ms']['p50']:g} / {f['ivf']['cpu_ms']['p50']:g} (recall {f['recall_at_50']:g})"
            for label, f in zip(rows, data["sizes"].values())]
    wide = " / ".join(f"{f['recall_at_50']:g}" for f in spread["sizes"].values())
    real = " / ".join(f"{f['recall_at_50']:g}" for f in minilm["sizes"].values())
    largest = data["sizes"][max(data["sizes"], key=int)]
    return (f"{'; '.join(rows)}; recall with rows spread {spread['noise'] / data['noise']:g}× wider: {wide}, on "
            f"replicated MiniLM rows and real questions: {real}; at {int(largest['rows']) / 1e6:g}M a fresh worker's "
            f"first search {largest['ivf']['first_search']['wall_s']:g} s, "
            f"{largest['ivf']['memory_mb']['file_backed'] / 1024:.1f} GB of mapped files resident (shared by a "
            f"host's workers) + {largest['ivf']['memory_mb']['anonymous']:.0f} MB per worker, "
            f"{(largest['exact_bytes'] + largest['ivf_bytes']) / 1e9:.1f} GB of files, first build "
            f"{largest['build']['ivf']['cpu_s'] / 60:.0f} CPU min")


def production_sweep(data: dict) -> str:
    """Each queue concurrency's first sweep and no-change sweep, and the most any run restored."""
    runs = [f"{s['concurrency']} at a time: {s['first']['wall_s'] / 60:.1f} min ({s['first']['runs_per_min']:g} "
            f"runs/min), no change {s['no_change']['wall_s'] / 60:.1f} min" for s in data["sweeps"]]
    restored = max(s["no_change"]["restored_bytes_max"] for s in data["sweeps"])
    peak = max(s[k]["peak_postgres_connections"] for s in data["sweeps"] for k in ("first", "no_change"))
    return f"{'; '.join(runs)}; ≤ {restored / 1e3:.0f} KB restored a run; ≤ {peak} Postgres sessions"


def citations(data: dict) -> str:
    """The reader's citation figures on one set, with F1's interval and the withheld replies."""
    c = data["cells"][0]
    n, f1 = c["exact_match"]["n"], c["f1"]
    split = c.get("citation_recall_by_answer")
    by_answer = (f"; {split['right']['citation_recall']:.2f} where the answer is right ({split['right']['n']}), "
                 f"{split['wrong']['citation_recall']:.2f} where wrong" if split else "")
    gold = (f", gold documents cited {c['citation_recall']['mean']:.2f} (precision "
            f"{c['citation_precision']['mean']:.2f}{by_answer})" if data["set"] != "sample" else "")
    return (f"valid {c['citations_valid']['mean']:.2f}, locatable {c['citation_locatable']['mean']:.2f}{gold}, "
            f"withheld {round(c['abstained']['mean'] * n)} of {n}; F1 {f1['mean']:.2f} [{f1['low']:.2f}, "
            f"{f1['high']:.2f}]; {c['generate_s']['mean']:.0f} s an answer")


def serve_cpu(data: dict) -> str:
    """CPU per request of a one-worker server."""
    ms = data["cpu_ms_per_request"]
    return (f"{data['server_cpu_ms_per_request']:g} CPU ms a request (LongRAG {ms['longrag']:g}, short chunks "
            f"{ms['shortchunk']:g} in process; HTTP {data['http_server_ms']:g})")


def serve_memory(data: dict) -> str:
    """RSS and open files of `rag serve` across publishes."""
    return (f"RSS {data['baseline_rss_mib']:g} → {data['final_rss_mib']:g} MiB over {data['publishes']} publishes, "
            f"open files {data['open_files_baseline']} → {data['open_files_final']}")


def storage_100k(data: dict) -> str:
    """Storage of 100K documents and the bytes a one-document edit writes."""
    scale = data["scale"]
    edit = scale.get("one_edit", {})
    written = edit.get("bytes_written")
    tail = f"; a one-document edit writes {written / 1e6:.2f} MB" if written else ""
    return f"{scale['first_ingest']['after']['ratio']:g} × the raw text{tail}"


def incremental(data: dict) -> str:
    """A one-document edit's run against a full re-plan, largest size."""
    size = data["sizes"][-1]
    edit = size["one_edit"]
    return (f"{edit['incremental']['total_s']:g} s against {edit['full']['total_s']:g} s "
            f"({size['documents']:,} documents)")


def publish_steps(data: dict) -> str:
    """CPU seconds of each step of an equal-sized publish into one partition, at its first and its last full stage."""
    stages = data["stages"]
    held = [0] + [s["subchunks"] for s in stages[:-1]]  # sub-chunks the partition held before each stage
    full = [(h, s) for h, s in zip(held, stages) if s["subchunks"] - h == stages[0]["subchunks"]]

    def steps(stage: dict) -> str:
        return " / ".join(f"{stage['steps'][k]['cpu_seconds']:g}" for k in ("documents", "units", "index"))

    (first_held, first), (last_held, last) = full[0], full[-1]
    into = f"{first_held:,} sub-chunks" if first_held else "an empty partition"
    return (f"{steps(first)} CPU s into {into}; {steps(last)} into {last_held:,} sub-chunks "
            f"({first['subchunks']:,} new ones each)")


def publish_change(data: dict) -> str:
    """CPU seconds of the documents and units steps of a small change, this code against the code before (ABBA)."""
    def steps(runs: list[dict], after: bool) -> str:
        mine = [r for r in runs if (r["code"] == runs[0]["code"]) == after]   # runs: after, before, before, after
        return " / ".join("–".join(f"{v:g}" for v in sorted({r[k]["cpu_seconds"] for r in mine}))
                          for k in ("documents", "units"))

    edit, gone = data["runs"]["one_edit"], data["runs"]["one_copy_deleted"]
    return (f"one-document edit: {steps(edit, True)} CPU s (before: {steps(edit, False)}); one copy's "
            f"{gone[0]['documents']['deleted']:,} documents deleted: {steps(gone, True)} "
            f"(before: {steps(gone, False)}); "
            f"{data['documents']:,} documents, {data['units']:,} units")


def nightly(data: dict) -> str:
    """The retrieval-only nightly evaluation of every dev question."""
    questions = sum(b["questions"] for b in data["benchmarks"].values())
    return (f"{data['evaluation_wall_s_total']:g} s for {questions} questions × {len(data['methods'])} methods × "
            f"{len(data['budgets'])} budgets")


def elite_collect(data: dict) -> str:
    """One ELITE collect round over a large sentence store."""
    return (f"{data['collect_ms_p50']:g} / {data['collect_ms_p95']:g} ms p50 / p95 over {data['tokens']:,} tokens "
            f"({data['sentences']:,} sentences)")


def extraction(data: dict, fmt: str) -> str:
    """One format's words / pairs / cells / headings and speed, ours then the anchors'."""
    methods = data["formats"][fmt]["methods"]
    unit = "pages" if fmt == "pdf" else "files"

    def scores(name: str) -> str:
        m = methods[name]
        return " / ".join(f"{m[s]:.2f}" for s in ("words", "pairs", "cells", "headings")) + f", {m['speed']:.0f} {unit}/s"
    anchors = "; ".join(f"{name} {scores(name)}" for name in ("kreuzberg", "markitdown") if name in methods)
    return f"**{scores('ours')}**" + (f" ({anchors})" if anchors else "")


def reader_speed(data: dict) -> str:
    """Prompt tokens a second, the arithmetic rate that is, and the server's resident memory (each model's)."""
    def one(s: dict) -> str:
        return (f"{s['prompt_tokens_per_s']:.0f} prompt tokens/s ({s['gflop_per_s']:.0f} GFLOP/s), "
                f"{s['seconds_median']:.1f} s for {s['prompt_tokens']:,} tokens; server {s['rss_mb'] / 1024:.1f} GB "
                "resident")
    if "versus" not in data["summary"]:
        return one(data["summary"]["after"])
    return "; ".join(f"{s['model']}: {one(s)}" for s in (data["summary"]["after"], data["summary"]["versus"]))


def parity(data: dict) -> str:
    """Completeness at 1K / 2K / 4K of a benchmark's documents read from files, against its JSONL."""
    [run] = data["parity"][:1]
    rows = " · ".join(f"{r['corpus']} {three(r[b] for b in BUDGETS)}" for r in run["rows"])
    return f"{run['benchmark']} ({run['questions']} questions, {run['method']}): {rows}"


def sections() -> dict[str, list[Figure]]:
    """Every figure, by section."""
    return {
        "Quality on unseen questions (report halves)": [
            quality("musique", True), quality("hotpotqa", True), quality("2wikimultihopqa", True),
            Figure("evidence recall @1K, HotpotQA / MuSiQue / 2WikiMultihopQA", ("multihop-title-links-report.json",),
                   recall, "goal " + " / ".join(f"{v:g}" for v in load("anchors.json")["evidence_recall_1k_goal"].values())),
            baselines("musique"), baselines("hotpotqa"), baselines("2wikimultihopqa"),
            chinese("cmrc2018", "CMRC 2018"), chinese("drcd", "DRCD"),
            Figure("the embedded reader's citations, sample questions, LongRAG at 2K tokens", ("citations-sample.json",),
                   citations, "goal valid ≥ 0.95, locatable ≥ 0.90"),
            Figure("the larger embedded reader's citations (1.5B, RAG_LOCAL_MODEL), sample questions, LongRAG at 2K tokens",
                   ("citations-sample-reader-1.5b.json",), citations, "the 0.5B on the same questions: the row above"),
            Figure("the embedded reader's citations, HotpotQA report half, LongRAG at 2K tokens",
                   ("citations-hotpotqa-recite.json",), citations, "goal gold documents cited ≥ 0.8"),
            Figure("the larger embedded reader's citations (1.5B, RAG_LOCAL_MODEL), HotpotQA report half, LongRAG at 2K "
                   "tokens", ("citations-hotpotqa-recite-reader-1.5b.json",), citations,
                   "the 0.5B on the same 100 questions: the row above"),
            Figure("the embedded reader's citations, HotpotQA report half, ELITE at 2K tokens",
                   ("citations-hotpotqa-recite-elite.json",), citations, "LongRAG on the same 100 questions: the row "
                   "above"),
            Figure("the embedded reader's citations, HotpotQA report half, longrag-extract at 2K tokens",
                   ("citations-hotpotqa-recite-extract.json",), citations, "LongRAG on the same 100 questions: two "
                   "rows above"),
            Figure("the embedded reader's citations, MuSiQue report half, LongRAG at 2K tokens",
                   ("citations-musique-recite.json",), citations, "2–4 hops; a 0.5B reader"),
            Figure("the embedded reader's citations, MuSiQue report half, ELITE at 2K tokens, 50 questions; LongRAG's "
                   "recorded replies to the same 50", ("citations-musique-recite-elite.json",
                                                        "citations-musique-recite-elite-questions.json"),
                   lambda elite, longrag: f"ELITE: {citations(elite)}; LongRAG: {citations(longrag)}",
                   "2–4 hops; a 0.5B reader"),
            Figure("the embedded reader's citations, MuSiQue report half, longrag-extract at 2K tokens, the same 50 "
                   "questions", ("citations-musique-recite-extract.json",), citations, "LongRAG and ELITE on the same "
                   "50: the row above"),
            Figure("the embedded reader's citations, 2WikiMultihopQA report half (all 53), LongRAG at 2K tokens",
                   ("citations-2wikimultihopqa-recite.json",), citations, "2 hops; a 0.5B reader"),
            Figure("the embedded reader's citations, 2WikiMultihopQA report half (all 53), ELITE at 2K tokens",
                   ("citations-2wikimultihopqa-recite-elite.json",), citations, "LongRAG on the same 53 questions: the "
                   "row above"),
            Figure("the embedded reader's citations, 2WikiMultihopQA report half (all 53), longrag-extract at 2K "
                   "tokens",
                   ("citations-2wikimultihopqa-recite-extract.json",), citations, "LongRAG on the same 53 questions: "
                   "two rows above"),
        ],
        "Query cost": [
            latency("110k", "110K sub-chunks, a caller reading 20%", True),
            latency("333k", "333K sub-chunks, a caller reading 20%"),
            latency("1m", "1M sub-chunks, a caller reading 20%", True),
            latency("3m", "3M sub-chunks, a caller reading 20%"),
            latency("1m-all-groups", "1M sub-chunks, a caller reading all"),
            Figure("vector search alone, CPU ms p50, a caller reading 20% / all", ("vector-search.json",), vector_search),
            Figure("dense search on synthetic rows, CPU ms p50 exact / IVF (`RAG_ANN_MIN_ROWS`), recall of the exact "
                   "top 50, a caller reading 20%",
                   ("ann-search-10m.json", "ann-search-spread.json", "ann-search-minilm.json"),
                   ann_search, "goal recall ≥ 0.99", True),
            Figure("a cold `rag retrieve` (whole process, demo workspace)", ("cold-retrieve.json",), cold_retrieve,
                   "goal ≤ 2 s, ≤ 400 MB"),
            Figure("ELITE collect round", ("elite-collect.json",), elite_collect),
            Figure("the embedded reader's server, a ~1,800-token prompt", ("reader-speed.json",), reader_speed,
                   "0.5B parameters: ~1 GFLOP a token"),
            Figure("the two embedded readers' servers, the same prompt, in one run", ("reader-speed-models.json",),
                   reader_speed, "1.5B parameters: ~3 GFLOP a token"),
        ],
        "Serving": [
            Figure("`rag serve`, 2 workers, 8 kept-alive clients, a 10% re-publish mid-run", ("serve-load.json",),
                   serve_load, "goal ≥ 60 requests/s, p99 ≤ 300 ms", True),
            Figure("`rag serve`, one worker, CPU per request", ("serve-cpu.json",), serve_cpu),
            Figure("`rag serve` memory across publishes", ("serve-memory.json",), serve_memory, "flat"),
            Figure("workers on one host mapping one read state, 110K sub-chunks", ("read-state-workers-110k.json",),
                   workers),
            Figure("workers on one host mapping one read state, 832K sub-chunks", ("read-state-workers-832k.json",),
                   workers),
            Figure("workers on one host mapping one read state, 1M sub-chunks", ("read-state-workers-1m.json",),
                   workers, "goal: an extra worker ≤ 300 MB; a fresh worker ≤ 5 s, ≤ 5 CPU s"),
            Figure("workers on one host mapping one read state, 3M sub-chunks", ("read-state-workers-3m.json",),
                   workers),
            Figure("10M sub-chunks projected from 1M and 3M: each part linear in sub-chunks, the dense search as the "
                   "IVF measured at 3M and 10M", ("read-state-workers-1m.json", "read-state-workers-3m.json",
                                                  "hop-latency-1m.json", "hop-latency-3m.json", "ann-search-10m.json"),
                   projected, "goal: two-hop p50 ≤ 60 ms, host ≤ 8 GB, a fresh worker ≤ 10 s", True),
            Figure("a serving worker's next snapshot after one copy's 966 documents are deleted, 1M sub-chunks",
                   ("next-snapshot-1m.json",), next_snapshot, "goal: grows with the change"),
        ],
        "Storage and ingest": [
            Figure("storage ÷ raw text, first ingest / after five 10% re-publishes", ("storage-hotpotqa.json",
                   "storage-musique.json", "storage-2wikimultihopqa.json"), storage, "goal ≤ 3 / ≤ 3.5", True),
            Figure("storage at 100K documents", ("storage-100k.json",), storage_100k, "goal ≤ 3"),
            Figure("ingest embedding, word pieces per CPU second", ("embed-runtimes.json",), embedding,
                   "goal ≥ 2× torch", True),
            Figure("a one-document edit's run, incremental against a full re-plan", ("incremental.json",), incremental,
                   "grows with the change"),
            Figure("documents / units steps of a small change published into 1M sub-chunks, one partition",
                   ("publish-change-1m.json",), publish_change, "grows with the change"),
            Figure("documents / units / index steps of a publish into one partition, small and large",
                   ("replicated-1m.json",), publish_steps, "a bulk publish (over 100 new versions) still reads "
                   "every current title to scan the new texts"),
            Figure("PDF text of generated documents: words / word pairs / table cells / headings, pages per CPU second",
                   ("formats.json",), lambda d: extraction(d, "pdf"), "Kreuzberg, MarkItDown in the same run", True),
            *[Figure(f"{fmt.upper()} text of generated documents: words / word pairs / table cells / headings, files per CPU second",
                     ("formats.json",), lambda d, fmt=fmt: extraction(d, fmt), "Kreuzberg, MarkItDown in the same run")
              for fmt in ("docx", "pptx", "xlsx", "html", "eml")],
            Figure("completeness of a benchmark's documents read from PDF / DOCX / HTML files",
                   ("formats.json",), parity, "the same documents as JSONL"),
        ],
        "Scale and rules": [
            Figure("partitioned workspace: run with nothing changed / one-document edit published / deletion invisible",
                   ("scale-ops.json",), scale_ops, "goal ≤ 5 / ≤ 10 / ≤ 5 s", True),
            Figure("permission leaks over random callers, budgets and revoked ACLs", ("permissions.json",), permissions,
                   "0", True),
            Figure("a bucket source's run with nothing changed", ("bucket_source.json",), bucket_source,
                   "goal 0 bytes read"),
            Figure("a revocation, sensor on: a bucket's folder ACL object edited / a folder's `chgrp` (`--acl-from "
                   "posix`) → hidden from `rag retrieve`", ("bucket_source.json",), revocation_latency,
                   "goal ≤ one sensor interval + the publish"),
            Figure("100 partitions through the daemon, each run in an empty folder: first sweep / nothing changed",
                   ("production-sweep-100.json",), production_sweep, "restored bytes grow with the partition, not N"),
            Figure("nightly evaluation, retrieval only", ("eval-dev-retrieval.json",), nightly, "goal ≤ 15 min"),
        ],
    }


def command_link(name: str) -> str:
    """The command that wrote a results file, linked to its bench's entry in bench/README.md."""
    command = load(name).get("command", "")
    run = re.sub(r"^(\w+=\S+ )+", "", command)  # settings in the environment before the command
    script = run.split()[1] if run.startswith("python bench/") else ""
    anchor = Path(script).stem.replace("_", "-")
    return f"[`{command}`](BENCH_README#{anchor})" if script else f"`{name}`"


def machine(names: tuple[str, ...]) -> str:
    """The machine the files were measured on (cores, CPU model)."""
    found = {(m["cores"], m["cpu"]) for m in (load(n).get("machine") for n in names) if m}
    if not found:
        raise SystemExit(f"{', '.join(names)}: no machine recorded")
    return "; ".join(f"{cores} cores, {cpu}" for cores, cpu in sorted(found))


def row(figure: Figure) -> str:
    """One table row."""
    value = figure.value(*(load(n) for n in figure.files))
    commands = "<br>".join(command_link(n) for n in figure.files)
    return f"| {figure.what} | {value} | {figure.against} | {machine(figure.files)} | {commands} |"


HEADER = "| what | figure | against | machine | command |\n|---|---|---|---|---|"


def headline_table() -> str:
    """The README's table: the headline figures only."""
    rows = [row(f) for figures in sections().values() for f in figures if f.headline]
    return "\n".join([HEADER, *rows]).replace("BENCH_README", "bench/README.md")


def full_tables() -> str:
    """docs/figures.md's tables: every figure, by section."""
    parts = []
    for title, figures in sections().items():
        parts += [f"### {title}", "", HEADER, *(row(f) for f in figures), ""]
    return "\n".join(parts).rstrip().replace("BENCH_README", "../bench/README.md")


TARGETS = {REPO / "README.md": ("headline", headline_table), REPO / "docs" / "figures.md": ("all", full_tables)}


def rendered(text: str, marker: str, table: str, path: Path) -> str:
    """`text` with the part between the marker comments replaced by `table`."""
    start, end = f"<!-- figures:{marker}:start -->", f"<!-- figures:{marker}:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"{path.relative_to(REPO)}: the markers {start} … {end} are missing")
    head, rest = text.split(start, 1)
    return f"{head}{start}\n{table}\n{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a table differs")
    args = parser.parse_args(argv)
    stale = []
    for path, (marker, table) in TARGETS.items():
        text = path.read_text(encoding="utf-8")
        new = rendered(text, marker, table(), path)
        if new != text:
            stale.append(str(path.relative_to(REPO)))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"figures differ from bench/results in: {', '.join(stale)} (run python bench/figures.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
