"""The Dagster code location: `dagster dev` loads this through workspace.yaml."""
from __future__ import annotations

import dagster as dg

from assets.evaluation import evaluation_definitions
from assets.ingest import ingest_assets, ingest_checks
from pipelines.ask_job import ask
from pipelines.sensors import source_sensor
from pipelines.workspace import resources_from_env

evaluation = evaluation_definitions()


def build_definitions(resources: dict) -> dg.Definitions:
    sources = resources["source_settings"].sources
    workspace = resources["read_side"].workspace
    # In-process: the run's resources (and so the writer lock) are set up once and held across its steps.
    # The tag carries the workspace, so dagster.yaml's per-value limit queues a second run of the same one.
    ingest_job = dg.define_asset_job(
        "ingest", selection=dg.AssetSelection.groups("sources", "units", "index"),
        executor_def=dg.in_process_executor, tags={"rag/workspace": workspace},
        description="Load sources, re-group affected units and bring the sub-chunk index up to date.")
    nightly_reindex = dg.ScheduleDefinition(
        name="nightly_reindex", job=ingest_job, cron_schedule="0 2 * * *",
        description="Sweep every source and repair drift; the asset checks run after it.")
    return dg.Definitions(
        assets=[*ingest_assets, *evaluation.assets],
        asset_checks=ingest_checks,
        jobs=[ingest_job, ask, *evaluation.jobs],
        schedules=[nightly_reindex, *evaluation.schedules],
        sensors=[*(source_sensor(s, ingest_job) for s in sources), *evaluation.sensors],
        resources=resources,
    )


defs = build_definitions(resources_from_env())
