"""One sensor per source: a changed fingerprint requests an ingest run, which re-publishes only what changed."""
from __future__ import annotations

import hashlib

import dagster as dg

from rag.watch import fingerprint, snapshot


def source_sensor(source: str, job: dg.UnresolvedAssetJobDefinition, interval_s: int = 30) -> dg.SensorDefinition:
    """Cursor = the source's fingerprint; run_key = source + fingerprint, so a burst of edits is never run twice."""
    slug = hashlib.sha1(source.encode()).hexdigest()[:8]

    @dg.sensor(name=f"source_changes_{slug}", job=job, minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"Watches {source} for new, changed and deleted documents.")
    def _sensor(context: dg.SensorEvaluationContext):
        snap = snapshot(source)
        fp = fingerprint(snap)
        if fp == context.cursor:
            return dg.SkipReason(f"{source}: no change since the last run request")
        context.update_cursor(fp)
        return dg.RunRequest(run_key=f"{slug}:{fp}",
                             tags={"rag/source": source, "rag/fingerprint": fp, "rag/files": str(len(snap))})

    return _sensor
