"""The nightly evaluation: one partition per benchmark folder, LongRAG vs ELITE under matched token budgets."""
import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import dagster as dg

from assets.ingest import subchunk_index
from rag.evaluation import EvalConfig, Outcome, evaluate_benchmark
from rag.evaluation.report import render_markdown
from resources import EmbedderResource
from resources.llm import LLMResource

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = Path(os.environ.get("RAG_BENCHMARKS", REPO.parent / "shared" / "benchmarks"))


class EvaluationConfig(dg.Config):
    """What the nightly run evaluates; the schedule uses these defaults, the launchpad can change them."""

    methods: list[str] = ["longrag", "elite", "shortchunk"]
    budgets: list[int] = [1000, 2000, 4000, 8000]
    limit: Optional[int] = None          # first N questions
    answer_sample: Optional[int] = None  # questions the reader answers (all when unset)
    elite_policy: str = "offline"        # "reader": the LLM resource also drives ELITE's exploration
    workspace_root: str = str(REPO / ".rag" / "bench")   # <root>/<benchmark>: catalog.duckdb and lancedb/
    out_root: str = str(REPO / ".rag" / "eval")          # <root>/<benchmark>: the report files


@dataclass(frozen=True)
class EvaluationDefinitions:
    """What pipelines/definitions.py adds: the asset, its job and the nightly schedule."""

    assets: list[dg.AssetsDefinition]
    jobs: list  # define_asset_job results (resolved when Definitions loads)
    schedules: list[dg.ScheduleDefinition]


def benchmark_names(root: Path) -> list[str]:
    """Sub-folders of `root` in the benchmark format (docs.jsonl and questions.jsonl)."""
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if (d / "docs.jsonl").is_file() and (d / "questions.jsonl").is_file())


def evaluation_definitions(benchmarks: Path = BENCHMARKS, cron: str = "0 4 * * *") -> EvaluationDefinitions:
    """The evaluation asset partitioned by the benchmark folders found under `benchmarks`, scheduled nightly."""
    names = benchmark_names(Path(benchmarks))
    if not names:  # nothing to evaluate in this deployment: the code location still loads
        return EvaluationDefinitions([], [], [])
    partitions = dg.StaticPartitionsDefinition(names)

    # Lineage: the report is computed by the same publishing steps that build `subchunk_index`, run over the
    # benchmark's own workspace, so the graph shows index → evaluation.
    @dg.asset(partitions_def=partitions, deps=[subchunk_index], group_name="evaluation", kinds={"duckdb", "python"},
              description="LongRAG vs ELITE (and the short-chunk baseline) on one benchmark under matched token "
                          "budgets: answer quality, evidence recall, completeness, latency, storage, with "
                          "bootstrap 95% intervals.")
    def retrieval_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig,
                             embedder: EmbedderResource, llm: LLMResource) -> dg.MaterializeResult:
        name = context.partition_key
        outcome = evaluate_benchmark(
            Path(benchmarks) / name, Path(config.workspace_root) / name, Path(config.out_root) / name,
            EvalConfig(tuple(config.methods), tuple(config.budgets), config.limit, config.answer_sample,
                       config.elite_policy),
            embedder.embedder(), embedder.counter(), llm.chat_model(),
            f"dagster asset materialize -m pipelines.definitions --select retrieval_evaluation --partition {name}")
        context.log.info(f"{name}: {outcome.summary['questions']} questions in "
                         f"{outcome.summary['evaluation_seconds']:.0f} s; report in {outcome.files.report_md}")
        return dg.MaterializeResult(metadata=report_metadata(outcome))

    job = dg.define_asset_job("evaluation", selection=[retrieval_evaluation],
                              description="Evaluate the retrieval methods on one benchmark (a partition).")

    @dg.schedule(job=job, cron_schedule=cron, name="nightly_evaluation",
                 description="Every benchmark, every night, after the 02:00 re-index.")
    def nightly_evaluation(context: dg.ScheduleEvaluationContext):
        day = context.scheduled_execution_time.strftime("%Y-%m-%d")
        # The workspace tag shares dagster.yaml's limit of one run per workspace with the ingest runs.
        return [dg.RunRequest(run_key=f"{name}@{day}", partition_key=name,
                              tags={"rag/workspace": str(REPO / ".rag" / "bench" / name)}) for name in names]

    return EvaluationDefinitions([retrieval_evaluation], [job], [nightly_evaluation])


def report_metadata(outcome: Outcome) -> dict:
    """The report (plots inline, so the UI shows them), headline numbers to chart across nights, file paths."""
    summary, files = outcome.summary, outcome.files
    images = {name: _data_uri(path) for name, path in files.plots.items()}
    metadata = {
        "report": dg.MetadataValue.md(render_markdown(summary, images)),
        **{f"plot_{name}": dg.MetadataValue.md(f"![{name}]({uri})") for name, uri in images.items()},
        "reader": summary["reader"],
        "elite_policy": summary["elite_policy"] or "not run",
        "questions": summary["questions"],
        "answered": summary["answered"],
        "documents": summary["corpus"]["documents"],
        "evaluation_seconds": summary["evaluation_seconds"],
        "workspace_checks_passed": all(summary["workspace_checks"].values()),
        "summary": dg.MetadataValue.json(summary["methods"]),
        "report_dir": dg.MetadataValue.path(str(files.report_md.parent)),
    }
    for cell in summary["results"]:  # one float per method × budget, so the UI plots each over time
        for metric in ("evidence_recall", "completeness", "f1"):
            if cell[metric]:
                metadata[f"{metric}/{cell['method']}@{cell['budget']}"] = dg.MetadataValue.float(cell[metric]["mean"])
    return metadata


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
