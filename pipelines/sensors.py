"""Sensors that request ingest runs: one per source, or one for all collections of a partitioned workspace."""
from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg

from rag.sources.partitions import discover, retire_store, retired_keys, store, vanished
from rag.sources.watch import fingerprint, snapshot

VANISHED = "vanished"   # the cursor's fingerprint of a collection gone from its source


def sensor_names(sources: list[str]) -> dict[str, str]:
    """A readable, unique sensor name per source: `source_changes_<folder>`, the parent added where folders clash."""
    def slug(parts: tuple[str, ...]) -> str:
        return re.sub(r"[^A-Za-z0-9_]+", "_", "_".join(parts)).strip("_").lower() or "root"

    names: dict[str, str] = {}
    for source in sources:
        parts = Path(source).resolve().parts[1:] or ("root",)
        for depth in range(1, len(parts) + 1):
            name = f"source_changes_{slug(parts[-depth:])}"
            if name not in names.values():
                break
        else:
            name = f"{name}_{len(names)}"
        names[source] = name
    return names


def source_sensor(source: str, job: dg.UnresolvedAssetJobDefinition, interval_s: int = 30,
                  name: str | None = None) -> dg.SensorDefinition:
    """Cursor = the source's fingerprint; run_key = source + fingerprint, so a burst of edits is never run twice."""
    name = name or sensor_names([source])[source]
    slug = name.removeprefix("source_changes_")

    @dg.sensor(name=name, job=job, minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"ON by default: every {interval_s} s, watches {source} for new, changed and deleted "
                           "documents and requests an ingest run when something changed.")
    def _sensor(context: dg.SensorEvaluationContext):
        snap = snapshot(source)
        fp = fingerprint(snap)
        if fp == context.cursor:
            return dg.SkipReason(f"{source}: no change since the last run request")
        context.update_cursor(fp)
        return dg.RunRequest(run_key=f"{slug}:{fp}",
                             tags={"rag/source": source, "rag/fingerprint": fp, "rag/files": str(len(snap))})

    return _sensor


def collection_sensor(sources: list[str], workspace: str, job: dg.UnresolvedAssetJobDefinition,
                      partitions: dg.DynamicPartitionsDefinition, shard_files: int | None,
                      interval_s: int = 30) -> dg.SensorDefinition:
    """Adds a partition for each new collection (or shard) and runs exactly the partitions whose files changed.

    Cursor = each partition's fingerprint; run_key = partition + fingerprint, so an edit is run once. A published
    collection that vanished from its source is run once to delete its documents, then its store is retired.
    """

    @dg.sensor(name="collection_changes", job=job, minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"ON by default: every {interval_s} s, discovers the sources' collections as partitions "
                           "and requests an ingest run for each new or changed one.")
    def _sensor(context: dg.SensorEvaluationContext):
        specs = discover(sources, workspace, shard_files)
        seen = json.loads(context.cursor) if context.cursor else {}
        prints = {s.key: fingerprint(snapshot(s.folder, s.selection)) for s in specs}
        for key in vanished(sources, workspace, shard_files):
            if seen.get(key) == VANISHED and _deleted(context.instance, key):
                retire_store(store(workspace, key))
            else:
                prints[key] = VANISHED
        for key in set(prints) & retired_keys(workspace):   # a retired collection came back
            retire_store(store(workspace, key), retired=False)
        known = set(context.instance.get_dynamic_partitions(partitions.name))
        new = sorted(set(prints) - known)
        # A vanished key's run_key carries the fingerprint it had, so a collection that returns and vanishes again
        # is deleted again.
        runs = [dg.RunRequest(partition_key=key, run_key=f"{key}:{fp}" + (f":{seen.get(key)}" if gone else ""),
                              tags={"rag/fingerprint": fp} | ({"rag/vanished": "1"} if gone else {}))
                for key, fp in sorted(prints.items()) if seen.get(key) != fp for gone in [fp == VANISHED]]
        return dg.SensorResult(run_requests=runs, cursor=json.dumps(prints, sort_keys=True),
                               dynamic_partitions_requests=[partitions.build_add_request(new)] if new else [])

    return _sensor


def _deleted(instance: dg.DagsterInstance, key: str) -> bool:
    """Whether a run deleting the vanished partition's documents has succeeded."""
    return bool(instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": key, "rag/vanished": "1"},
                                                       statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1))
