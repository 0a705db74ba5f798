"""`rag ingest` as a Dagster run in-process: the whole workspace, one partition, or every partition in turn."""
from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from assets.ingest import COLLECTIONS, build_ingest, ingest_assets, ingest_checks
from pipelines.errors import CliError
from pipelines.workspace import workspace_resources
from rag.partitions import DEFAULT_SHARD_FILES, PartitionError, check_layout, discover, resolve, store
from rag.writer import WriterLock

_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def run_ingest(workspace: str, sources: list[str], default_acl: list[str] | None = None,
               collection: str | None = None, derive_links: bool = False, lance_uri: str | None = None,
               wait_s: float | None = None, embedder: str | None = None, allow_empty: bool = False) -> dict:
    """Materialise the ingest assets and their checks as the workspace's one writer; return the counts."""
    ws = _folder(workspace)
    try:
        check_layout(ws, partitioned=False)
    except PartitionError as err:
        raise CliError(str(err)) from None
    resources = workspace_resources(workspace, sources, default_acl, collection, derive_links, lance_uri, wait_s,
                                    embedder, allow_empty)
    # Held across all steps (the catalog resource re-enters it), so no other writer interleaves between them.
    with WriterLock(ws, "rag ingest", wait_s):
        result = dg.materialize([*ingest_assets, *ingest_checks], resources=resources, instance=_instance(),
                                raise_on_error=False, tags={"rag/workspace": str(ws.resolve())}, run_config=_QUIET)
    return {**_counts(result), "workspace": str(ws.resolve())}


def run_partitions(workspace: str, sources: list[str], partitions: list[str] | None = None,
                   default_acl: list[str] | None = None, collection: str | None = None, derive_links: bool = False,
                   lance_uri: str | None = None, wait_s: float | None = None, embedder: str | None = None,
                   allow_empty: bool = False, shard_files: int = DEFAULT_SHARD_FILES) -> dict:
    """Materialise the named partitions (default: every collection the sources hold), one run each, in turn.

    Each run is its partition's one writer; runs of other partitions, in other processes, proceed meanwhile.
    """
    ws = _folder(workspace)
    try:
        check_layout(ws, partitioned=True)
        keys = partitions or [s.key for s in discover(sources, ws, shard_files)]
        for key in keys:
            resolve(sources, key)
    except PartitionError as err:
        raise CliError(str(err)) from None
    resources = workspace_resources(workspace, sources, default_acl, collection, derive_links, lance_uri, wait_s,
                                    embedder, allow_empty, partitioned=True)
    assets, checks = build_ingest(COLLECTIONS)
    instance = _instance()
    instance.add_dynamic_partitions(COLLECTIONS.name, [k for k in keys if not instance.has_dynamic_partition(
        COLLECTIONS.name, k)])
    runs = {}
    for key in keys:
        with WriterLock(store(ws, key, lance_uri).folder, f"rag ingest {key}", wait_s):
            result = dg.materialize([*assets, *checks], resources=resources, instance=instance, partition_key=key,
                                    raise_on_error=False, run_config=_QUIET)
        runs[key] = _counts(result, key)
    totals = {k: sum(r[k] for r in runs.values()) for k in ("documents", "units", "subchunks", "embedded",
                                                             "quarantined", "deleted")}
    return {**totals, "embedder": next(iter(runs.values()))["embedder"] if runs else embedder,
            "embedder_replaced": None, "checks_passed": all(r["checks_passed"] for r in runs.values()),
            "partitions": runs, "workspace": str(ws.resolve())}


def _folder(workspace: str) -> Path:
    ws = Path(workspace)
    if ws.exists() and not ws.is_dir():
        raise CliError(f"{ws}: is a file, not a workspace folder")
    return ws


def _instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def _counts(result, partition: str | None = None) -> dict:
    if not result.success:
        raise CliError((f"partition {partition}: " if partition else "") + _failure_message(result))
    meta = {str(e.asset_key.path[-1]): {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    docs, units, index = meta["source_documents"], meta["long_units"], meta["subchunk_index"]
    return {"documents": docs["documents_current"], "units": units["units"], "subchunks": index["subchunks"],
            "embedded": index["embedded"], "quarantined": docs["quarantined"], "deleted": docs["deleted"],
            "embedder": index["embedder"], "embedder_replaced": index["embedder_replaced"] or None,
            "checks_passed": bool(checks) and all(checks.values())}


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error.cause and error.cls_name == "DagsterExecutionStepExecutionError":
                error = error.cause
            return error.message.strip().splitlines()[0].split(": ", 1)[-1]
    return "the ingest run failed"
