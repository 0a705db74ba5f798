"""Where a bench's figures go: `bench/results/<name>[-<tag>].json`, written the same way by every script, with the
machine they were measured on (docs/figures.md states each figure with it)."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def mean_of(values) -> float | None:
    """The mean of the values that are not None, to four places; None when there are none."""
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def results_path(name: str, tag: str | None = None) -> Path:
    """The JSON file for a bench's figures; a tag keeps one run's file beside another's."""
    return RESULTS / f"{name}{'-' + tag if tag else ''}.json"


def write_json(path: Path | str, figures: object) -> Path:
    """Write figures as readable UTF-8 JSON (Chinese stays legible), creating the folder if needed; a results file
    also records the machine."""
    path = Path(path)
    if isinstance(figures, dict) and "machine" not in figures and RESULTS in path.resolve().parents:
        figures = {**figures, "machine": machine()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def machine() -> dict:
    """The cores and CPU model of this machine, as /proc/cpuinfo names it."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), "")
    return {"cores": os.cpu_count(), "cpu": model}


def write_results(figures: object, name: str, tag: str | None = None) -> Path:
    """Write figures, with the machine they were measured on, to the results file of `name` (and `tag`)."""
    return write_json(results_path(name, tag), figures)


def commit(code: str | Path) -> str:
    """The short commit a checkout is at: which code a figure was measured with."""
    return subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
