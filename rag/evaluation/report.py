"""The report files: results.jsonl, results.duckdb, summary.json, report.md and PNG plots (matplotlib, Agg)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from rag.evaluation.decision import decision_line
from rag.evaluation.plots import draw_plots
from rag.evaluation.run import Evaluation
from rag.text.tables import markdown_table

PLOTS = {"quality": "Evidence recall, completeness and F1 by budget",
         "by_type": "Completeness by question type",
         "latency": "Retrieval time and AvgQueryTime by budget",
         "storage": "Storage on disk by method"}


@dataclass
class ReportFiles:
    results_jsonl: Path
    results_duckdb: Path
    summary_json: Path
    report_md: Path
    plots: dict[str, Path] = field(default_factory=dict)


def write_report(out: Path, evaluation: Evaluation, summary: dict) -> ReportFiles:
    """Write every file into `out` (created if needed) and return their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(out / "results.jsonl", out / "results.duckdb", out / "summary.json", out / "report.md")
    with files.results_jsonl.open("w", encoding="utf-8") as f:
        for row in evaluation.rows:
            f.write(json.dumps({"benchmark": evaluation.benchmark, **row.to_json()}, ensure_ascii=False) + "\n")
    write_duckdb(files.results_duckdb, files.results_jsonl, summary)
    files.summary_json.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    files.plots = draw_plots(out, summary)
    files.report_md.write_text(render_markdown(summary, {k: p.name for k, p in files.plots.items()}), encoding="utf-8")
    return files


def write_duckdb(path: Path, results_jsonl: Path, summary: dict) -> None:
    """Table `results` (one row per question × method × budget) and `figures` (one per method × budget)."""
    path.unlink(missing_ok=True)  # a report is a snapshot of one run, never appended to
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE results AS SELECT * FROM read_json_auto(?)", [str(results_jsonl)])
        con.execute("CREATE TABLE figures (benchmark VARCHAR, method VARCHAR, budget INTEGER, metric VARCHAR, "
                    "mean DOUBLE, low DOUBLE, high DOUBLE, n INTEGER)")
        con.executemany("INSERT INTO figures VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
            [summary["benchmark"], cell["method"], cell["budget"], metric, v["mean"], v["low"], v["high"], v["n"]]
            for cell in summary["results"] for metric, v in cell.items() if isinstance(v, dict)])
    finally:
        con.close()


def _ci(value: dict | None, digits: int = 3) -> str:
    if not value:
        return "–"
    return f"{value['mean']:.{digits}f} [{value['low']:.{digits}f}, {value['high']:.{digits}f}]"


def render_markdown(summary: dict, plots: dict[str, str]) -> str:
    """report.md: how it was produced, then quality, cost, preparation and storage, differences and plots."""
    corpus = summary["corpus"]
    checks = summary["workspace_checks"]
    lines = [
        f"# Retrieval evaluation: {summary['benchmark']}",
        "",
        *decision_section(summary),
        f"Generated {summary['generated_at']} with:",
        "",
        "```",
        summary["command"],
        "```",
        "",
        f"- **Reader**: {summary['reader']}; answered {summary['answered']} of {summary['questions']} questions.",
        f"- **ELITE policy**: {summary['elite_policy'] or 'not run'}.",
        f"- **Corpus**: {corpus['documents']:,} documents, {corpus['units']:,} long units, "
        f"{corpus['subchunks']:,} sub-chunks, {corpus['raw_text_bytes']:,} bytes of text.",
        f"- **Workspace checks**: {'all passed' if all(checks.values()) else 'FAILED: ' + ', '.join(k for k, v in checks.items() if not v)}.",
        f"- **Wall time**: ingest {summary['ingest_seconds']:.1f} s, evaluation {summary['evaluation_seconds']:.1f} s.",
        "- Budgets are matched: every method hands the reader at most B tokens (MiniLM word pieces, recounted "
        "per row); means over questions with bootstrap 95% intervals in brackets.",
        "",
        "## Evidence and answers by budget",
        "",
        markdown_table(["method", "budget", "tokens mean / max", "evidence recall", "sentence recall", "completeness",
                        "expectations met", "EM", "F1", "citations valid", "locatable"],
                       [[c["method"], c["budget"], f"{c['tokens_mean']:.0f} / {c['tokens_max']}",
                         _ci(c["evidence_recall"]), _ci(c["sentence_recall"]), _ci(c["completeness"]),
                         _ci(c["expectation_met"]), _ci(c["exact_match"]), _ci(c["f1"]), _ci(c["citations_valid"]),
                         _ci(c["citation_locatable"])] for c in summary["results"]]),
        "",
        "Expectations: for `not_found` questions no byte of the gold documents (the asker may not read them) may "
        "appear; for `absent_version` questions no text of the named version. Failures are listed below.",
        "",
        *_expectations(summary["expectations"]),
        *_localisation(summary["results"]),
        "## By question type",
        "",
        markdown_table(["type", "hops", "method", "budget", "n", "evidence recall", "completeness", "F1"],
                       [[c["type"], c["hops"], c["method"], c["budget"], c["n"], _ci(c["evidence_recall"]),
                         _ci(c["completeness"]), _ci(c["f1"])] for c in summary["by_type"]]),
        "",
        "## Cost per query",
        "",
        markdown_table(["method", "budget", "retrieve s", "generate s", "LLM calls", "input tokens", "output tokens",
                        "AvgQueryTime s"],
                       [[c["method"], c["budget"], _ci(c["retrieve_s"], 4), _ci(c["generate_s"], 3),
                         c["llm_calls_mean"], c["input_tokens_mean"], c["output_tokens_mean"],
                         c["avg_query_seconds"]] for c in summary["results"]]),
        "",
        "AvgQueryTime = (T_prepare + N·(T_retrieve + T_gen)) / N over the N questions evaluated, the same for every "
        "method. ELITE explores once per question; each budget's retrieval time is that exploration plus its own "
        "packing.",
        "",
        "## Preparation and storage",
        "",
        markdown_table(["method", "prepare s", "of which", "storage bytes", "ratio to raw text"],
                       [[m, c["prepare_seconds"], ", ".join(f"{k} {v}" for k, v in c["prepare_parts"].items()),
                         f"{c['storage_bytes']:,}", c["storage_ratio_to_raw_text"]]
                        for m, c in summary["methods"].items()]),
        "",
        "Storage is bytes on disk ÷ the UTF-8 bytes of the current documents' titles and texts (`rag.store.storage`, the "
        "figure the ingest metadata and the README state too): the writer's catalog and the published read state "
        "for every method, plus the LanceDB database (vectors, vector cache, versions kept for as-of reads) for the "
        "index-based methods.",
        "",
        "Preparation is one clean build per method, counted the same way for all: opening the published catalog, "
        "plus one clean build of the sub-chunk index for the index-based methods (its sub-chunks at the embedding "
        "rate the publish log measured, so earlier re-embeds are not charged), LongRAG's BM25 channel, and ELITE's "
        "sentence store (both built from scratch and timed by this run).",
        "",
    ]
    lines += _differences(summary["differences"])
    lines += [f"## {PLOTS[name]}\n\n![{name}]({file})\n" for name, file in plots.items()]
    lines += ["## Recomputing", "",
              "`results.jsonl` (and table `results` in `results.duckdb`) has one row per question × method × budget "
              "with `qid`, `method`, `budget`, `tokens` and `retrieved_doc_ids`; table `figures` holds the "
              "intervals above.", ""]
    return "\n".join(lines)


def render_brief(summary: dict, full_report: str) -> str:
    """The verdict and one table (method × budget), short enough for the Dagster UI's dialog to open at its top."""
    budgets = summary["config"]["budgets"]
    cells = {(c["method"], c["budget"]): c for c in summary["results"]}

    def figure(method: str, budget: int) -> str:
        cell = cells.get((method, budget))
        value = cell and (cell["f1"] or cell["completeness"])
        return f"{value['mean']:.3f}" if value else "–"

    answered = any(c["f1"] for c in summary["results"])
    return "\n".join([
        f"# Retrieval evaluation: {summary['benchmark']}", "", *decision_section(summary),
        f"## {'Answer F1 (where answered), else source completeness' if answered else 'Source completeness'}", "",
        markdown_table(["method", *[f"budget {b}" for b in budgets]],
                       [[m, *[figure(m, b) for b in budgets]] for m in summary["config"]["methods"]]), "",
        f"{summary['questions']} questions, {summary['corpus']['documents']:,} documents, reader: {summary['reader']}. "
        f"Every figure with its interval, the costs and the plots: `report_full` beside this entry, or {full_report}.",
    ])


def decision_section(summary: dict) -> list[str]:
    """The verdict first: per budget, the method to use, with its paired interval against the runner-up."""
    found = summary.get("decisions") or []
    if not found:
        return []
    return ["## Which method to use", "", *[f"- **{decision_line(d)}**" for d in found], "",
            "The deciding figure is answer F1 where a reader answered at that budget, else source completeness, "
            "averaged over the same questions; the interval is a paired bootstrap of the difference (first − second). "
            "An interval that includes 0 is no real difference: then the faster method is named too. A question with no "
            "value for the deciding figure (it expects nothing found, it has no gold documents, or, for answer F1, the "
            "reader was not given it) is left out, and each verdict counts those left out by reason.", ""]


def _differences(diffs: list[dict]) -> list[str]:
    if not diffs:
        return []
    rows = [[d["budget"], f"{d['a']} − {d['b']}", d["metric"], f"{d['mean']:+.3f}",
             f"[{d['low']:+.3f}, {d['high']:+.3f}]", d["n"], f"{d['a_wins']} / {d['b_wins']} / {d['ties']}",
             "yes" if d["low"] > 0 or d["high"] < 0 else "no"] for d in diffs]
    return ["## Paired differences (same questions)", "",
            markdown_table(["budget", "methods", "metric", "difference", "95% interval", "n", "wins a / b / ties",
                            "interval excludes 0"], rows), ""]


def _expectations(failures: list[dict]) -> list[str]:
    if not failures:
        return ["No expectation failed.", ""]
    return [markdown_table(["qid", "method", "budget", "asked as", "expect", "retrieved"],
                           [[f["qid"], f["method"], f["budget"], f["asked_as"], f["expect"],
                             ", ".join(f["retrieved_doc_ids"][:6])] for f in failures]), ""]


def _localisation(cells: list[dict]) -> list[str]:
    """The seed's diagnostic, where a reader answered: did it cite a gold document, is its answer inside one?"""
    answered = [c for c in cells if c["cited_gold"]]
    if not answered:
        return []
    return ["## Evidence localisation (answered questions)", "",
            markdown_table(["method", "budget", "cited a gold document", "answer span inside a gold document",
                            "citation recall", "citation precision", "citations attributed",
                            "short answer supported", "withheld"],
                           [[c["method"], c["budget"], _ci(c["cited_gold"]), _ci(c["answer_in_gold"]),
                             _ci(c.get("citation_recall")), _ci(c.get("citation_precision")),
                             _ci(c.get("citations_attributed")), _ci(c.get("short_answer_supported")),
                             _ci(c.get("abstained"))]
                            for c in answered]), "",
            "Citation recall and precision are against the gold documents. An *attributed* citation was not written "
            "by the reader: its statement was found in that document afterwards. A *withheld* reply is one nothing in the "
            "context supports: the answer says the sources do not answer, and the citation figures leave it out "
            "(docs/citations.md).", ""]
