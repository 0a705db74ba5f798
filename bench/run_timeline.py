"""Where a Dagster run's seconds go, read from its event log: queued, process start-up (the run worker's imports and
code location load), resource set-up, each step, and the end; with the scenario's own marks, bench/production.py's
breakdown of its wall time."""
from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import dagster as dg

# Event names as the log stores them (a run's events keep their old PIPELINE_* values).
STARTING = [dg.DagsterEventType[n].value for n in ("RUN_DEQUEUED", "RUN_STARTING")]
STARTED = dg.DagsterEventType.RUN_START.value
ENDED = [dg.DagsterEventType[n].value for n in ("RUN_SUCCESS", "RUN_FAILURE", "RUN_CANCELED")]


class Marks:
    """Seconds since the scenario started at each named moment, and CPU seconds by process (this one, its children)."""

    def __init__(self):
        self.wall0, self.start, self.marks = time.time(), time.monotonic(), {}
        self.load_start = os.getloadavg()[0]
        self.cpu: dict[str, float] = {}   # CPU seconds by what used them (serve, the daemon's tree, launches)

    def __call__(self, name: str) -> None:
        self.marks[name] = round(time.monotonic() - self.start, 1)

    def summary(self) -> dict:
        """The marks, and CPU seconds of this process and of the children it waited for (servers, daemon tree)."""
        me = resource.getrusage(resource.RUSAGE_SELF)
        return {"marks_s": self.marks, "cpu_s": self.cpu, "cpu_s_this_process": round(me.ru_utime + me.ru_stime, 1),
                "cpu_s_children_reaped": round(children_cpu_s(), 1),
                "load_average_start_end": [round(self.load_start, 2), round(os.getloadavg()[0], 2)]}


def cpu_s(pids: list[int]) -> float:
    """CPU seconds of these live processes and of the children each has reaped (a code server's finished runs)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue   # exited meanwhile
        ticks += sum(int(f) for f in fields[11:15])   # utime, stime, cutime, cstime
    return round(ticks / os.sysconf("SC_CLK_TCK"), 1)


def cpu_by_child() -> dict[str, float]:
    """CPU seconds of each live child of this process with all its descendants, named by the start of its command."""
    from bench.topology import process_tree

    out: dict[str, float] = {}
    for pid in process_tree(os.getpid())[1:]:
        try:
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        name = " ".join(Path(a).name for a in argv[:3] if a)
        out[name] = round(out.get(name, 0.0) + cpu_s(process_tree(pid)), 1)
    return out


def cpu_by_process(pids: list[int]) -> dict[str, dict[str, float]]:
    """Each live process's own CPU seconds and those of the children it has reaped (a code server's finished runs),
    keyed by its command's start and pid: where a process tree's CPU went."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        name = " ".join(Path(a).name for a in argv[:4] if a)
        out[f"{name} [{pid}]"] = {"own": round((int(fields[11]) + int(fields[12])) / tick, 1),
                                  "reaped_children": round((int(fields[13]) + int(fields[14])) / tick, 1)}
    return out


def children_cpu_s() -> float:
    """CPU seconds of the child processes this process has waited for so far."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def run_phases(instance, record, wall0: float) -> dict:
    """One run's phases in seconds: created (since the scenario started), queued, start-up, resources, steps, end."""
    run = record.dagster_run
    at: dict[str, float] = {}
    steps: dict[str, list[float]] = {}
    resources = 0.0
    for entry in instance.all_logs(run.run_id):
        if not entry.is_dagster_event:
            continue
        kind, key = entry.dagster_event.event_type_value, entry.dagster_event.step_key
        at.setdefault(kind, entry.timestamp)
        if kind == "STEP_START":
            steps[key] = [entry.timestamp, entry.timestamp]
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and key in steps:
            steps[key][1] = entry.timestamp
        elif kind == "RESOURCE_INIT_STARTED":
            resources -= entry.timestamp
        elif kind == "RESOURCE_INIT_SUCCESS":
            resources += entry.timestamp
    created = record.create_timestamp.timestamp()
    launched = next((at[k] for k in STARTING if k in at), created)
    ended = next((at[k] for k in ENDED if k in at), None)
    last_step = max((end for _, end in steps.values()), default=at.get(STARTED, launched))
    span = lambda a, b: round(b - a, 1) if a is not None and b is not None else None  # noqa: E731
    return {"partition": run.tags.get("dagster/partition"), "status": run.status.value,
            "retry_of": run.parent_run_id and run.parent_run_id[:8], "created_s": span(wall0, created),
            "queued_s": span(created, launched), "startup_s": span(launched, at.get(STARTED)),
            "resources_s": round(resources, 1) if resources > 0 else None,
            "steps_s": {k: span(a, b) for k, (a, b) in steps.items()},
            "end_s": span(last_step, ended), "total_s": span(created, ended)}


def timeline(instance, records, wall0: float) -> list[dict]:
    """Every run's phases, oldest first."""
    return [run_phases(instance, r, wall0) for r in sorted(records, key=lambda r: r.create_timestamp)]
