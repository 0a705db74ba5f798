"""Small summaries shown to people: size histograms and Markdown tables."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def histogram(values: list[int], edges: tuple[int, ...] = (0, 500, 1000, 2000, 3000, 4000)) -> dict[str, int]:
    """Counts per half-open bucket [a, b), the last bucket open-ended."""
    counts = np.histogram(values, bins=[*edges, max([edges[-1] + 1, *values]) + 1])[0] if values else []
    labels = [f"{a}–{b}" for a, b in zip(edges, edges[1:])] + [f"≥{edges[-1]}"]
    return {label: int(c) for label, c in zip(labels, counts)} if values else {label: 0 for label in labels}


def markdown_table(header: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def bytes_on_disk(*paths: str | Path) -> int:
    total = 0
    for p in map(Path, paths):
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def human_size(n: int) -> str:
    """Bytes as a size a person reads at a glance: 5977025 → '5.7 MiB'."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
