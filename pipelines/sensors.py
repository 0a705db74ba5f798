"""Sensors that request ingest runs: one per source, or one for all collections of a partitioned workspace."""
from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from assets.ingest_metadata import any_of
from rag.sources.bucket import BucketError
from rag.sources.partitions import PartitionError, discover, retire_store, retired_keys, store, vanished
from rag.sources.watch import Changes, fingerprint, scope_id, snapshot

VANISHED = "vanished"   # the cursor's fingerprint of a collection gone from its source
WORKSPACE_ID = "rag/workspace_id"   # which workspace a sensor's run serves (not a concurrency key)


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


def source_sensor(source: str, workspace: str, job: dg.UnresolvedAssetJobDefinition, interval_s: int = 30,
                  name: str | None = None) -> dg.SensorDefinition:
    """One run per change of the source's files (rag.sources.watch.Changes): a burst of edits is run once, and a
    folder that returns to an earlier state is run again."""
    name = name or sensor_names([source])[source]
    slug = name.removeprefix("source_changes_")

    @dg.sensor(name=name, job=job, minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"ON by default: every {interval_s} s, watches {source} for new, changed and deleted "
                           "documents and requests an ingest run when something changed.")
    def _sensor(context: dg.SensorEvaluationContext):
        try:   # a store that is down or refuses the credentials is the tick's one line, not a trace
            snap = snapshot(source)
        except BucketError as err:
            return dg.SkipReason(f"{err}; the next tick tries again")
        seen = Changes.load(context.cursor, workspace)
        now = seen.after({slug: fingerprint(snap)})
        if not seen.changed(now.prints):
            return dg.SkipReason(f"{source}: no change since the last run request")
        return dg.SensorResult(cursor=now.dump(), run_requests=[dg.RunRequest(
            run_key=now.run_key(slug), tags={"rag/source": source, "rag/fingerprint": now.prints[slug],
                                             "rag/files": str(len(snap)), WORKSPACE_ID: scope_id(workspace)})])

    return _sensor


def collection_sensor(sources: list[str], workspace: str, job: dg.UnresolvedAssetJobDefinition,
                      partitions: dg.DynamicPartitionsDefinition, shard_files: int | None,
                      interval_s: int = 30) -> dg.SensorDefinition:
    """Adds a partition for each new collection (or shard) and runs exactly the partitions whose files changed.

    One run per change of a partition's files (rag.sources.watch.Changes). A published collection that vanished
    from its source is run once to delete its documents, then its store is retired.
    """

    @dg.sensor(name="collection_changes", job=job, minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"ON by default: every {interval_s} s, discovers the sources' collections as partitions "
                           "and requests an ingest run for each new or changed one.")
    def _sensor(context: dg.SensorEvaluationContext):
        try:   # the tick shows a plan the sources or the layout refuse as its one line, not as a trace
            specs = discover(sources, workspace, shard_files)
            gone = vanished(sources, workspace, shard_files)
        except PartitionError as err:
            return dg.SkipReason(str(err))
        seen = Changes.load(context.cursor, workspace)
        prints = {s.key: fingerprint(snapshot(s.folder, s.selection)) for s in specs}
        retired = []
        for key in gone:
            if seen.prints.get(key) == VANISHED and _deleted(context.instance, key, workspace):
                retire_store(store(workspace, key))
                retired.append(key)
            else:
                prints[key] = VANISHED
        for key in set(prints) & retired_keys(workspace):   # a retired collection came back
            retire_store(store(workspace, key), retired=False)
        known = set(context.instance.get_dynamic_partitions(partitions.name))
        new = sorted(set(prints) - known)
        now = seen.after(prints)
        runs = [dg.RunRequest(partition_key=key, run_key=now.run_key(key),
                              tags={"rag/fingerprint": prints[key], WORKSPACE_ID: scope_id(workspace)}
                              | ({"rag/vanished": "1"} if prints[key] == VANISHED else {}))
                for key in seen.changed(prints)]
        # A tick that requests nothing still keeps its cursor (a retired store leaves it), and says why on the tick.
        return dg.SensorResult(run_requests=runs, cursor=now.dump(),
                               skip_reason=None if runs else quiet_reason(sources, prints, retired),
                               dynamic_partitions_requests=[partitions.build_add_request(new)] if new else [])

    return _sensor


def quiet_reason(sources: list[str], prints: dict[str, str], retired: list[str]) -> str:
    """Why a tick of the collection sensor requests no run, in one line for the tick's page."""
    if not prints and not retired:
        return f"no collection in {', '.join(sources)}: nothing to ingest"
    reason = (f"no change since the last run request in {any_of(len(prints), 'collection')}"
              if prints else "no collection left in the sources")
    return reason + (f"; retired the store of {', '.join(retired)}, whose deletion is published" if retired else "")


def _deleted(instance: dg.DagsterInstance, key: str, workspace: str) -> bool:
    """Whether a run deleting the vanished partition's documents from this workspace has succeeded."""
    tags = {"dagster/partition": key, "rag/vanished": "1", WORKSPACE_ID: scope_id(workspace)}
    return bool(instance.get_run_records(dg.RunsFilter(tags=tags,
                                                       statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1))
