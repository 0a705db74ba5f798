"""The Dagster code location: `dagster dev` loads this through workspace.yaml."""
from __future__ import annotations

import dagster as dg

from assets.evaluation import evaluation_definitions
from assets.ingest import COLLECTIONS, build_ingest
from assets.workspace_totals import workspace_totals_definitions
from pipelines.ask_job import ask
from pipelines.sensors import collection_sensor, sensor_names, source_sensor
from pipelines.workspace_resources import resources_from_env

# A retry of a killed run re-runs every step: each step repairs from the catalog, wherever the kill came.
RETRY_ALL_STEPS = {"dagster/retry_strategy": "ALL_STEPS"}


def build_definitions(resources: dict) -> dg.Definitions:
    settings = resources["source_settings"]
    workspace = resources["read_side"].workspace
    ingest = _partitioned_ingest(settings, workspace) if settings.partitioned else _whole_ingest(settings, workspace)
    evaluation = evaluation_definitions(sources=list(settings.sources))
    return dg.Definitions.merge(ingest, dg.Definitions(
        assets=evaluation.assets, jobs=[ask, *evaluation.jobs], schedules=evaluation.schedules,
        sensors=evaluation.sensors, resources=resources))


def _whole_ingest(settings, workspace: str) -> dg.Definitions:
    assets, checks = build_ingest()
    # In-process: the run's resources (and so the writer lock) are set up once and held across its steps.
    # The tag carries the workspace, so dagster.yaml's per-value limit queues a second run of the same one.
    job = dg.define_asset_job(
        "ingest", selection=dg.AssetSelection.groups("sources", "units", "index"),
        executor_def=dg.in_process_executor, tags={"rag/workspace": workspace, **RETRY_ALL_STEPS},
        description="Load sources, re-group affected units and bring the sub-chunk index up to date.")
    nightly = dg.ScheduleDefinition(
        name="nightly_reindex", job=job, cron_schedule="0 2 * * *", default_status=dg.DefaultScheduleStatus.RUNNING,
        description="ON by default: every day at 02:00 UTC sweeps every source and repairs drift; the asset checks run after it.")
    names = sensor_names(list(settings.sources))
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=[job], schedules=[nightly],
                          sensors=[source_sensor(s, workspace, job, settings.sensor_interval_s, names[s]) for s in settings.sources])


def _partitioned_ingest(settings, workspace: str) -> dg.Definitions:
    assets, checks = build_ingest(COLLECTIONS)
    # One run per partition, each in its own process (or pod): partitions write separate stores, so runs of
    # different partitions proceed in parallel; dagster.yaml queues a second run of the same partition.
    job = dg.define_asset_job(
        "ingest", selection=dg.AssetSelection.groups("sources", "units", "index"), partitions_def=COLLECTIONS,
        executor_def=dg.in_process_executor, tags=RETRY_ALL_STEPS,
        description="Load one collection's sources, re-group its affected units and bring its index up to date.")

    @dg.schedule(job=job, cron_schedule="0 2 * * *", name="nightly_reindex",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="ON by default: every day at 02:00 UTC sweeps every collection and repairs drift; the asset checks "
                             "run after each.")
    def nightly(context: dg.ScheduleEvaluationContext):
        keys = context.instance.get_dynamic_partitions(COLLECTIONS.name)
        if not keys:
            return dg.SkipReason("no collection partition yet: the collection_changes sensor adds each collection")
        return [dg.RunRequest(partition_key=k, run_key=f"{k}:{context.scheduled_execution_time:%Y%m%d}")
                for k in keys]

    sensor = collection_sensor(list(settings.sources), workspace, job, COLLECTIONS, settings.shard_files,
                               settings.sensor_interval_s)
    totals, refresh = workspace_totals_definitions()
    return dg.Definitions(assets=[*assets, totals], asset_checks=checks, jobs=[job], schedules=[nightly],
                          sensors=[sensor, refresh])


@dg.definitions
def defs() -> dg.Definitions:
    """What `dagster dev` loads, when it loads it: the workspace the RAG_* environment variables name."""
    return build_definitions(resources_from_env())
