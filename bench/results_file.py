"""Where a bench's figures go: `bench/results/<name>[-<tag>].json`, written the same way by every script."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def results_path(name: str, tag: str | None = None) -> Path:
    """The JSON file for a bench's figures; a tag keeps one run's file beside another's."""
    return RESULTS / f"{name}{'-' + tag if tag else ''}.json"


def write_json(path: Path | str, figures: object) -> Path:
    """Write figures as readable UTF-8 JSON (Chinese stays legible), creating the folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_results(figures: object, name: str, tag: str | None = None) -> Path:
    """Write figures to the results file of `name` (and `tag`) and return its path."""
    return write_json(results_path(name, tag), figures)


def commit(code: str | Path) -> str:
    """The short commit a checkout is at: which code a figure was measured with."""
    return subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
