"""`rag serve` across many publishes: does its memory (RSS) and its count of open files stay flat?

Copies the sample corpus into a fresh workspace, ingests it, starts `rag serve` on 127.0.0.1 in its own process,
then N times: re-versions one document (a new label and a new sentence), publishes it with a real in-process
`rag ingest` (the same Dagster assets), and asks the server a few questions so that it opens the new snapshot.
After each publish it reads the server's VmRSS from /proc/PID/status and counts /proc/PID/fd: all of them, those
of the read state's mapped arrays, and the arrays the served snapshot's folder holds (how many varies with the
segments and parts a snapshot keeps, so only the other files must stay flat). The baseline is
taken after `--warmup` publishes (the first snapshots fill caches by design). Writes bench/results/serve-memory.json
(or --out) and prints the figures. `--as-of` also asks each question as of the time of asking, so that each round
builds a past state the server must let go of. `--same-size` replaces the last round's added sentence instead of
adding one more, so the current texts keep their size: what still grows is what the server keeps of replaced versions
(by default the edited document grows ~30 characters a round, and so does anything that holds its current text).
`--long-words N` publishes nothing and asks N questions of one distinct 1,990-letter word each instead.

    python bench/serve_memory.py --publishes 200
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import socket
import string
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import results_path, write_json  # noqa: E402
from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

QUESTIONS = ["How long does the offline cache hold telemetry?", "Why does clock drift break TLS on a gateway?",
             "How are gateway certificates rotated?"]
EDITED = Path("operations") / "time-sync.md"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def open_files(pid: int, ws: Path) -> tuple[int, int]:
    """The process's open files, and how many of them are arrays of the workspace's read state (each mapped array
    holds one), from one listing."""
    folder, found, total = str(ws / "read_state"), 0, 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        total += 1
        found += target.startswith(folder) and ".npy" in target
    return total, found


def served_arrays(ws: Path) -> int:
    """The arrays of the newest snapshot's read-state folder (the one the server was just made to serve)."""
    folders = [p for p in (ws / "read_state").iterdir() if p.is_dir()]
    return len(list(max(folders, key=lambda p: p.stat().st_mtime_ns).rglob("*.npy"))) if folders else 0


def files_sample(pid: int, ws: Path) -> dict:
    total, mapped = open_files(pid, ws)
    return {"open_files": total, "mapped_arrays": mapped, "served_arrays": served_arrays(ws)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(ws: Path, users: Path) -> tuple[subprocess.Popen, httpx.Client]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(ws), "--port",
                             str(port), "--users-file", str(users)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if client.get("/healthz").status_code == 200:
                return proc, client
        except httpx.TransportError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("rag serve did not come up")


def revise(corpus: Path, round_: int, same_size: bool = False) -> None:
    """A new version of one document (label 2026.N), one sentence more than the last round (or, `same_size`, the
    last round's sentence replaced by this round's)."""
    path = corpus / EDITED
    head, body = path.read_text().split("\n---\n", 1)
    head = "\n".join(line for line in head.splitlines() if not line.startswith("version:"))
    if same_size:
        body = body.split(" Revision ")[0]
    path.write_text(f"{head}\nversion: \"2026.{round_}\"\n---\n{body.rstrip()} Revision {round_} was published.\n")


def ask(client: httpx.Client, snapshot: int, as_of: bool = False) -> None:
    # As of now: a new past moment each round, so the server builds (and must let go of) a past state per publish.
    at = {"as_of": datetime.now(timezone.utc).isoformat()} if as_of else {}
    for q in QUESTIONS:
        for extra in ({}, at) if as_of else ({},):
            r = client.post("/retrieve", json={"question": q, "user": "bench", "budget": 2000, **extra})
            r.raise_for_status()
    deadline = time.monotonic() + 60  # the questions queued the new read state's parts; the swap follows them
    while (served := client.get("/healthz").json()["snapshot"]) < snapshot and time.monotonic() < deadline:
        time.sleep(0.1)
    if served < snapshot:
        raise RuntimeError(f"the server still serves snapshot {served}, not {snapshot}")


def measure(publishes: int, warmup: int, root: Path, as_of: bool = False, same_size: bool = False) -> dict:
    corpus, ws, users = root / "corpus", root / "ws", root / "users.yaml"
    shutil.copytree(REPO / "samples" / "corpus", corpus)
    users.write_text(yaml.safe_dump({"bench": ["support", "field-engineering", "security-team", "partners"]}))
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    proc, client = start(ws, users)
    samples = []
    try:
        ask(client, 0, as_of)
        samples.append({"publish": 0, "rss_kib": rss_kib(proc.pid), **files_sample(proc.pid, ws), "seconds": 0.0})
        for k in range(1, publishes + 1):
            start_s = time.perf_counter()
            revise(corpus, k, same_size)
            run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
            ask(client, json.loads((ws / "snapshots" / "CURRENT").read_text())["seq"], as_of)
            samples.append({"publish": k, "rss_kib": rss_kib(proc.pid), **files_sample(proc.pid, ws),
                            "seconds": round(time.perf_counter() - start_s, 3)})
            if k % 10 == 0:
                print(f"publish {k}: rss {samples[-1]['rss_kib'] / 1024:.0f} MiB, open files {samples[-1]['open_files']}",
                      flush=True)
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=60)
    base = samples[min(warmup, publishes)]
    last = samples[-1]
    return {"publishes": publishes, "warmup": warmup, "as_of_reads": as_of, "same_size": same_size, "baseline_rss_mib": round(base["rss_kib"] / 1024, 1),
            "final_rss_mib": round(last["rss_kib"] / 1024, 1),
            "peak_rss_mib": round(max(s["rss_kib"] for s in samples[warmup:]) / 1024, 1),
            "rss_growth": round(last["rss_kib"] / base["rss_kib"] - 1, 4),
            "open_files_baseline": base["open_files"], "open_files_final": last["open_files"],
            "open_files_max": max(s["open_files"] for s in samples[warmup:]),
            "other_files_baseline": other(base), "other_files_final": other(last),
            "other_files_max": max(map(other, samples[warmup:])),
            "mapped_beyond_served": max(s["mapped_arrays"] - s["served_arrays"] for s in samples), "samples": samples}


def other(sample: dict) -> int:
    """Open files that are not arrays of the read state."""
    return sample["open_files"] - sample["mapped_arrays"]


def measure_words(requests: int, root: Path) -> dict:
    """RSS while the server is asked `requests` questions of one distinct 1,990-letter word each (no publishes)."""
    corpus, ws, users = root / "corpus", root / "ws", root / "users.yaml"
    shutil.copytree(REPO / "samples" / "corpus", corpus)
    users.write_text(yaml.safe_dump({"bench": ["support"]}))
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    proc, client = start(ws, users)
    rng, samples = random.Random(7), []
    try:
        ask(client, 0)
        for k in range(requests + 1):
            if k % 250 == 0:
                samples.append({"requests": k, "rss_kib": rss_kib(proc.pid)})
                print(f"{k} requests: rss {samples[-1]['rss_kib'] / 1024:.1f} MiB", flush=True)
            word = "".join(rng.choice(string.ascii_lowercase) for _ in range(1990))
            client.post("/retrieve", json={"question": word, "user": "bench", "budget": 2000}).raise_for_status()
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=60)
    first, last = samples[1] if len(samples) > 1 else samples[0], samples[-1]
    return {"long_word_requests": requests, "rss_mib_after_250": round(first["rss_kib"] / 1024, 1),
            "final_rss_mib": round(last["rss_kib"] / 1024, 1),
            "kib_a_request_after_250": round((last["rss_kib"] - first["rss_kib"]) / max(requests - 250, 1), 2),
            "samples": samples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publishes", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5, help="publishes before the baseline is taken")
    ap.add_argument("--as-of", action="store_true", help="also ask each question as of the time of asking")
    ap.add_argument("--same-size", action="store_true", help="each version replaces the last one's added sentence")
    ap.add_argument("--long-words", type=int, metavar="N",
                    help="instead of publishing, ask N questions of one distinct 1,990-letter word each")
    ap.add_argument("--out", type=Path, default=results_path("serve-memory"))
    args = ap.parse_args()
    command = shlex.join(["python", "bench/serve_memory.py", *sys.argv[1:]])   # the figures table cites it
    if args.long_words:
        with tempfile.TemporaryDirectory(prefix="serve-memory-") as tmp:
            result = measure_words(args.long_words, Path(tmp))
        write_json(args.out, result | {"command": command})
        print(f"{args.long_words} long-word requests: RSS {result['rss_mib_after_250']} MiB after 250 → "
              f"{result['final_rss_mib']} MiB, {result['kib_a_request_after_250']} KiB a request")
        return
    with tempfile.TemporaryDirectory(prefix="serve-memory-") as tmp:
        result = measure(args.publishes, args.warmup, Path(tmp), args.as_of, args.same_size)
    write_json(args.out, result | {"command": command})
    print(f"{result['publishes']} publishes: RSS {result['baseline_rss_mib']} MiB after {result['warmup']} → "
          f"{result['final_rss_mib']} MiB ({result['rss_growth']:+.1%}), peak {result['peak_rss_mib']} MiB; open files "
          f"{result['open_files_baseline']} → {result['open_files_final']} (max {result['open_files_max']})")


if __name__ == "__main__":
    main()
