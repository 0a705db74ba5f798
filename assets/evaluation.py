"""The nightly evaluation: the production workspace on its own question set, and one partition per benchmark folder.

Lineage is true: `workspace_evaluation` reads the catalog and index that `subchunk_index` publishes, and each
`retrieval_evaluation` partition reads the workspace its `benchmark_workspace` partition ingested.
"""
import base64
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import dagster as dg

from assets.ingest_metadata import any_of
from rag.evaluation import EvalConfig, Evaluator, Outcome, evaluate_workspace, ingest_benchmark, open_prepared
from rag.evaluation.decision import decision_brief
from rag.evaluation.report import render_brief, render_markdown
from rag.evaluation.summary import trend
from rag.query.methods import METHODS
from rag.sources.benchmarks import benchmarks_root
from rag.sources.watch import Changes
from resources import EmbedderResource, ReadSideResource, SourceSettings
from resources.llm import LLMResource

SUBCHUNK_INDEX = dg.AssetKey("subchunk_index")   # by key: the ingest assets are built per partitioning

REPO = Path(__file__).resolve().parent.parent
BENCHMARK_PARTITIONS = dg.DynamicPartitionsDefinition(name="benchmarks")


class EvaluationConfig(dg.Config):
    """What a nightly evaluation runs; the schedules use these defaults, the launchpad can change them."""

    methods: list[str] = list(METHODS)
    budgets: list[int] = [1000, 2000, 4000, 8000]
    limit: Optional[int] = None          # first N questions
    answers: bool = False                # the LLM resource answers (else retrieval only)
    answer_sample: Optional[int] = None  # questions the reader answers, stratified by type and hops (all when unset)
    answer_budgets: Optional[list[int]] = None
    elite_policy: str = "offline"        # "reader": the LLM resource also drives ELITE's exploration
    questions: Optional[str] = None      # the workspace's questions.jsonl (default: beside the first source)
    default_groups: Optional[list[str]] = None  # the caller of questions without asked_as
    out_root: str = str(REPO / ".rag" / "eval")  # <root>/<name>: the report files

    def eval_config(self) -> EvalConfig:
        return EvalConfig(tuple(self.methods), tuple(self.budgets), self.limit, self.answer_sample, self.elite_policy,
                          tuple(self.answer_budgets) if self.answer_budgets else None)


@dataclass(frozen=True)
class EvaluationDefinitions:
    """What pipelines/definitions.py adds: the assets, their jobs, the nightly schedules and the folder sensor."""

    assets: list[dg.AssetsDefinition]
    jobs: list  # define_asset_job results (resolved when Definitions loads)
    schedules: list[dg.ScheduleDefinition]
    sensors: list[dg.SensorDefinition]


def in_words(cron: str) -> str:
    """A schedule as a person says it: '0 4 * * *' is 'every day at 04:00 UTC'; other schedules keep their cron."""
    found = re.fullmatch(r"(\d{1,2}) (\d{1,2}) \* \* \*", cron.strip())
    return f"every day at {int(found[2]):02d}:{int(found[1]):02d} UTC" if found else f"on cron '{cron}' (UTC)"


def benchmark_names(root: Path) -> list[str]:
    """Sub-folders of `root` in the benchmark format (docs.jsonl and questions.jsonl)."""
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if (d / "docs.jsonl").is_file() and (d / "questions.jsonl").is_file())


def questions_beside(sources: list[str]) -> Path | None:
    """The workspace's question set: `questions.jsonl` next to (not inside: the loader would read it) a source."""
    for source in sources:
        candidate = Path(source).resolve().parent / "questions.jsonl"
        if candidate.is_file():
            return candidate
    return None


def evaluation_definitions(benchmarks: Path | None = None, cron: str = "0 4 * * *",
                           workspace_root: Path = REPO / ".rag" / "bench",
                           sources: list[str] | None = None) -> EvaluationDefinitions:
    """The workspace evaluation, the benchmark workspaces and their evaluations, the nightly schedules, the sensor.

    `workspace_root/<benchmark>` holds each benchmark's catalog.duckdb and lancedb/: the one place both the
    ingesting and the evaluating asset use, so the lineage edge between them is the data itself. `benchmarks`
    defaults to rag.sources.benchmarks.benchmarks_root() ($RAG_BENCHMARKS, else the slices in samples/benchmarks/).
    The schedules start ON; the folder sensor starts OFF, since ingesting benchmarks (minutes for the bundled
    slices, hours for full ones) is work a team starts on purpose.
    """
    benchmarks, default_root = Path(benchmarks) if benchmarks else benchmarks_root(), Path(workspace_root)

    @dg.asset(partitions_def=BENCHMARK_PARTITIONS, group_name="evaluation", kinds={"duckdb", "lancedb"},
              description="A benchmark folder ingested into a workspace of its own (incremental), the one writer.")
    def benchmark_workspace(context: dg.AssetExecutionContext, embedder: EmbedderResource) -> dg.MaterializeResult:
        name = context.partition_key
        report = ingest_benchmark(benchmarks / name, default_root / name, embedder.embedder(), embedder.counter())
        return dg.MaterializeResult(metadata={"workspace": dg.MetadataValue.path(str(default_root / name)),
                                              "subchunks": report.subchunks})

    @dg.asset(partitions_def=BENCHMARK_PARTITIONS, deps=[benchmark_workspace], group_name="evaluation",
              kinds={"duckdb", "python"},
              description="Every method on one benchmark's published workspace under matched token budgets: "
                          "evidence recall, completeness, (answers), latency, storage, with bootstrap 95% intervals.")
    def retrieval_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig,
                             embedder: EmbedderResource, llm: LLMResource) -> dg.MaterializeResult:
        name = context.partition_key
        from rag.evaluation.benchmark import evaluate_prepared

        ev = Evaluator(config.eval_config(), embedder.embedder(), embedder.counter(),
                       llm.chat_model() if config.answers else None,
                       f"dagster asset materialize -m pipelines.definitions --select retrieval_evaluation "
                       f"--partition {name}")
        prepared = open_prepared(name, default_root / name, ev.embedder, ev.counter)
        outcome = evaluate_prepared(ev, prepared, benchmarks / name / "questions.jsonl", Path(config.out_root) / name)
        context.log.info(f"{name}: {outcome.summary['questions']} questions in "
                         f"{outcome.summary['evaluation_seconds']:.0f} s; report in {outcome.files.report_md}")
        return dg.MaterializeResult(metadata=report_metadata(outcome))

    @dg.asset(deps=[SUBCHUNK_INDEX], group_name="evaluation", kinds={"duckdb", "python"},
              description="Every method on the production workspace's own questions.jsonl (kept beside its "
                          "sources), each asked as its user: permissions, versions and answers on the real index.")
    def workspace_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, read_side: ReadSideResource,
                             source_settings: SourceSettings, embedder: EmbedderResource,
                             llm: LLMResource) -> dg.MaterializeResult:
        from rag.retrieval.callers import load_users, resolve_caller

        questions = Path(config.questions) if config.questions else questions_beside(source_settings.sources)
        if questions is None:
            raise dg.Failure(f"no questions.jsonl beside the sources ({', '.join(source_settings.sources)}); "
                             "write one or set the questions config")
        users_file = questions.parent / "users.yaml"
        ev = Evaluator(config.eval_config(), embedder.embedder(), embedder.counter(),
                       llm.chat_model() if config.answers else None,
                       "dagster asset materialize -m pipelines.definitions --select workspace_evaluation",
                       load_users(users_file) if users_file.is_file() else {},
                       resolve_caller(groups=config.default_groups) if config.default_groups else None)
        outcome = evaluate_workspace(ev, "workspace", Path(read_side.workspace), questions,
                                     Path(config.out_root) / "workspace", read_side.lance_uri)
        context.log.info(f"{questions}: {outcome.summary['questions']} questions, "
                         f"{len(outcome.summary['expectations'])} expectation failures")
        return dg.MaterializeResult(metadata=report_metadata(outcome))

    job = dg.define_asset_job("evaluation", selection=[retrieval_evaluation], partitions_def=BENCHMARK_PARTITIONS,
                              description="Evaluate the retrieval methods on one benchmark (a partition).")
    prepare_job = dg.define_asset_job("benchmark_workspaces", selection=[benchmark_workspace],
                                      partitions_def=BENCHMARK_PARTITIONS,
                                      description="Ingest one benchmark folder into its workspace (a partition).")
    workspace_job = dg.define_asset_job("evaluate_workspace", selection=[workspace_evaluation],
                                        description="Evaluate the production workspace on its own question set.")

    @dg.schedule(job=job, cron_schedule=cron, name="nightly_evaluation",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description=f"ON by default: {in_words(cron)} evaluates every known benchmark partition, "
                             "after the 02:00 re-index.")
    def nightly_evaluation(context: dg.ScheduleEvaluationContext):
        day = context.scheduled_execution_time.strftime("%Y-%m-%d")
        names = context.instance.get_dynamic_partitions(BENCHMARK_PARTITIONS.name)
        if not names:
            return dg.SkipReason("no benchmark partition yet: start the benchmark_folders sensor to ingest the "
                                 "benchmark folders")
        # The workspace tag shares dagster.yaml's limit of one run per workspace with the ingest runs.
        return [dg.RunRequest(run_key=f"{name}@{day}", partition_key=name,
                              tags={"rag/workspace": str(default_root / name)}) for name in names]

    @dg.schedule(job=workspace_job, cron_schedule=cron, name="nightly_workspace_evaluation",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description=f"ON by default: {in_words(cron)} evaluates the production workspace on the "
                             "questions.jsonl beside its sources, after the 02:00 re-index; skips without one.")
    def nightly_workspace(context: dg.ScheduleEvaluationContext):
        if sources is not None and questions_beside(sources) is None:
            return dg.SkipReason(f"no questions.jsonl beside the sources ({', '.join(sources)})")
        return dg.RunRequest(run_key=f"workspace@{context.scheduled_execution_time:%Y-%m-%d}")

    @dg.sensor(job=prepare_job, name="benchmark_folders", minimum_interval_seconds=60,
               default_status=dg.DefaultSensorStatus.STOPPED,
               description="OFF by default (ingesting benchmarks is minutes of work for the bundled slices, hours for "
                           "full ones; start it here when you want them): discovers benchmark folders under "
                           f"{benchmarks} and ingests each new or changed one.")
    def benchmark_folders(context: dg.SensorEvaluationContext):
        names = benchmark_names(benchmarks)
        known = set(context.instance.get_dynamic_partitions(BENCHMARK_PARTITIONS.name))
        stamps = {n: str((benchmarks / n / "docs.jsonl").stat().st_mtime_ns) for n in names}
        seen = Changes.load(context.cursor, benchmarks)
        now = seen.after(stamps)
        runs = [dg.RunRequest(run_key=now.run_key(n), partition_key=n) for n in seen.changed(stamps)]
        quiet = (f"no change since the last run request in {any_of(len(names), 'benchmark folder')}" if names else
                 f"no benchmark folder (docs.jsonl and questions.jsonl) under {benchmarks}")
        return dg.SensorResult(
            cursor=now.dump(), run_requests=runs, skip_reason=None if runs else quiet,
            dynamic_partitions_requests=[BENCHMARK_PARTITIONS.build_add_request([n for n in names if n not in known])]
            if set(names) - known else [])

    return EvaluationDefinitions([benchmark_workspace, retrieval_evaluation, workspace_evaluation],
                                 [job, prepare_job, workspace_job], [nightly_evaluation, nightly_workspace],
                                 [benchmark_folders])


def report_metadata(outcome: Outcome) -> dict:
    """The report (plots inline, so the UI shows them), headline numbers, the trend floats, file paths."""
    summary, files = outcome.summary, outcome.files
    images = {name: _data_uri(path) for name, path in files.plots.items()}
    metadata = {
        # First and as plain text, so the asset's page shows the verdict without opening the report.
        **{f"use_at_{d['budget']}": decision_brief(d) for d in summary.get("decisions", [])},
        # The UI's dialog focuses its Close button, at the bottom: a long report opens scrolled to its middle.
        "report": dg.MetadataValue.md(render_brief(summary, str(files.report_md))),
        # A path, not a file:// link: the file is on the server's disk, which the browser's machine cannot open.
        "report_file": dg.MetadataValue.path(str(files.report_md.resolve())),
        "report_full": dg.MetadataValue.md(render_markdown(summary, images)),
        **{f"plot_{name}": dg.MetadataValue.md(f"![{name}]({uri})") for name, uri in images.items()},
        "reader": summary["reader"],
        "elite_policy": summary["elite_policy"] or "not run",
        "questions": summary["questions"],
        "answered": summary["answered"],
        "documents": summary["corpus"]["documents"],
        "evaluation_seconds": summary["evaluation_seconds"],
        "expectation_failures": len(summary["expectations"]),
        "workspace_checks_passed": all(summary["workspace_checks"].values()),
        "report_dir": dg.MetadataValue.path(str(files.report_md.parent)),
    }
    # One float per metric × method × budget under stable keys, so the UI plots each across nights.
    metadata.update({key: dg.MetadataValue.float(value) for key, value in trend(summary).items()})
    metadata.update({f"difference_to_runner_up@{d['budget']}": dg.MetadataValue.float(d["difference"]["mean"])
                     for d in summary.get("decisions", []) if d.get("runner_up")})
    return metadata


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
