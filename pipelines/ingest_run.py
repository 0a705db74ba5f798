"""`rag ingest` as a Dagster run in-process: the whole workspace, one partition, or every partition in turn."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import dagster as dg

from assets.ingest import COLLECTIONS, NOT_REPLACED, build_ingest, ingest_assets, ingest_checks
from pipelines.errors import CliError
from pipelines.workspace_resources import workspace_resources
from rag.query.workspace import shared_ids
from rag.sources.partitions import (
    PartitionError,
    check_layout,
    discover,
    resolve,
    retire_store,
    retired_keys,
    store,
    vanished,
)
from rag.store.settings import IngestSettings
from rag.store.writer_lock import WriterLock

_QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def run_ingest(settings: IngestSettings) -> dict:
    """Materialise the ingest assets and their checks as the workspace's one writer; return the counts."""
    ws = _folder(settings.workspace)
    try:
        check_layout(ws, partitioned=False)
    except PartitionError as err:
        raise CliError(str(err)) from None
    resources = workspace_resources(replace(settings, partitioned=False))
    # Held across all steps (the catalog resource re-enters it), so no other writer interleaves between them.
    with WriterLock(ws, "rag ingest", settings.wait_s):
        result = dg.materialize([*ingest_assets, *ingest_checks], resources=resources, instance=_instance(),
                                raise_on_error=False, tags={"rag/workspace": str(ws.resolve())}, run_config=_QUIET)
    return {**_counts(result), "workspace": str(ws.resolve())}


def run_partitions(settings: IngestSettings, partitions: list[str] | None = None) -> dict:
    """Materialise the named partitions (default: every collection the sources hold), one run each, in turn.

    Each run is its partition's one writer; runs of other partitions, in other processes, proceed meanwhile.
    Without names, a published collection that vanished from its source is run too: its documents are deleted.
    """
    ws, sources, shard_files, lance_uri = (_folder(settings.workspace), settings.sources, settings.shard_files,
                                           settings.lance_uri)
    try:
        check_layout(ws, partitioned=True)
        if partitions:   # every key is checked before any store is touched
            specs = [resolve(sources, key, ws, shard_files) for key in partitions]
            keys, gone = list(dict.fromkeys(s.key for s in specs)), {s.key for s in specs if s.selection.vanished}
        else:
            gone = set(vanished(sources, ws, shard_files))
            keys = [s.key for s in discover(sources, ws, shard_files)] + sorted(gone)
    except PartitionError as err:
        raise CliError(str(err)) from None
    resources = workspace_resources(replace(settings, partitioned=True))
    assets, checks = build_ingest(COLLECTIONS)
    instance = _instance()
    instance.add_dynamic_partitions(COLLECTIONS.name, [k for k in keys if not instance.has_dynamic_partition(
        COLLECTIONS.name, k)])
    runs, retired = {}, retired_keys(ws)
    for key in keys:
        with WriterLock(store(ws, key, lance_uri).folder, f"rag ingest {key}", settings.wait_s):
            result = dg.materialize([*assets, *checks], resources=resources, instance=instance, partition_key=key,
                                    raise_on_error=False, run_config=_QUIET)
        runs[key] = _counts(result, key) | ({"vanished": True} if key in gone else {})
        if key in gone or key in retired:   # retired once its deletion is published; back if it reappeared
            retire_store(store(ws, key, lance_uri), key in gone)
    totals = {k: sum(r[k] for r in runs.values()) for k in ("documents", "units", "subchunks", "embedded",
                                                             "quarantined", "deleted", "rows_rekeyed")}
    shared = shared_ids(ws)   # hidden from readers: an error, never silent
    for key, run in runs.items():
        run["shared_ids"] = [{"doc_id": d, "partitions": [p for p, _, _ in places]}
                             for d, places in shared.items() if key in {p for p, _, _ in places}]
    return {**totals, "embedder": next(iter(runs.values()))["embedder"] if runs else settings.embedder,
            "embedder_replaced": None, "checks_passed": all(r["checks_passed"] for r in runs.values()),
            "vanished": sorted(gone), "shared_ids": [{"doc_id": d, "places": [
                {"partition": p, "version": v, "source_path": path} for p, v, path in places]}
                for d, places in shared.items()],
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
    replaced = index["embedder_replaced"]  # the UI's sentence when nothing was replaced; None for the CLI's JSON
    return {"documents": docs["documents_current"], "units": units["units"], "subchunks": index["subchunks"],
            "embedded": index["embedded"], "rows_rekeyed": index.get("rows_rekeyed", 0),
            "sibling_indexes": index.get("sibling_indexes_opened", 0), "quarantined": docs["quarantined"],
            "deleted": docs["deleted"],
            "embedder": index["embedder"], "embedder_replaced": None if replaced in NOT_REPLACED else replaced,
            "checks_passed": bool(checks) and all(checks.values()), "quarantine_lines": docs["quarantine_lines"]}


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error.cause and error.cls_name == "DagsterExecutionStepExecutionError":
                error = error.cause
            return error.message.strip().splitlines()[0].split(": ", 1)[-1]
    return "the ingest run failed"
