"""`rag serve` under load while an ingest re-publishes 10% of the documents: errors, leaks, latency, throughput.

Builds (once, under .rag/bench/serve-load) a workspace from HotpotQA's docs.jsonl with every document given
one of five groups, starts `rag serve` on 127.0.0.1, and runs N client threads for D seconds, each asking
benchmark questions as a random user through real HTTP (LongRAG and short chunks alternating). The clients start
once every worker is up and idle (a connection made earlier stays, kept alive, with the first worker up). Ten
seconds in, a real `rag ingest` process re-publishes 10% of the documents as new versions with new text. Every
response is checked: each item's document must be readable by the caller's groups and its version must be the
old or the new one, with that version's text. Writes bench/results/serve-load.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from pipelines.ingest_run import run_ingest  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, load_questions  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.store.snapshot_files import pointer_stamp  # noqa: E402

GROUPS = [f"team-{k}" for k in range(5)]


def corpus(bench: Path, ws: Path, seed: int) -> tuple[Path, dict[str, list[str]]]:
    """docs.jsonl with one group per document; returns the source and each document's ACL."""
    rng, src = random.Random(seed), ws / "docs.jsonl"
    docs = [json.loads(line) for line in bench.joinpath("docs.jsonl").open()]
    acls = {d["doc_id"]: [rng.choice(GROUPS)] for d in docs}
    if not src.exists():
        ws.mkdir(parents=True, exist_ok=True)
        src.write_text("".join(json.dumps(d | {"version": "1", "acl": acls[d["doc_id"]]}) + "\n" for d in docs))
    return src, acls


def republish_tenth(src: Path, seed: int) -> set[str]:
    """Rewrite 10% of the lines as their next version with one more sentence; return their ids."""
    rng, lines = random.Random(seed + 1), src.read_text().splitlines()
    chosen = set(rng.sample(range(len(lines)), len(lines) // 10))
    out, ids = [], set()
    for i, line in enumerate(lines):
        doc = json.loads(line)
        if i in chosen:
            doc = doc | {"version": str(int(doc["version"]) + 1), "text": doc["text"] + " This paragraph was revised."}
            ids.add(doc["doc_id"])
        out.append(json.dumps(doc))
    src.write_text("\n".join(out) + "\n")
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(body: dict, groups: set[str], acls: dict[str, list[str]], texts: dict[tuple[str, str], str]) -> list[str]:
    """Leaks in one response: items the caller may not read, or whose text is not a published version's."""
    bad = []
    for item in body["items"]:
        text = texts.get((item["doc_id"], item["doc_version"]))
        readable = not groups.isdisjoint(acls.get(item["doc_id"], []))
        if not readable or text is None or any(text[a:b] not in item["text"] for a, b in item["ranges"]):
            bad.append(f"{item['doc_id']} v{item['doc_version']} to {sorted(groups)}")
    return bad


def family_cpu(root: int) -> dict[int, float]:
    """CPU seconds of a process and of every process under it, read from /proc."""
    parent, cpu = {}, {}
    for folder in Path("/proc").iterdir():
        if not folder.name.isdigit():
            continue
        try:
            fields = (folder / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(folder.name)] = int(fields[1])
        cpu[int(folder.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    family, grown = {root}, True
    while grown:
        more = {pid for pid, ppid in parent.items() if ppid in family} - family
        family, grown = family | more, bool(more)
    return {pid: cpu[pid] for pid in family if pid in cpu}


def family_rss_mib(root: int) -> list[float]:
    """Resident memory (MiB) of a process and of every process under it, largest first: what each worker holds."""
    out = []
    for pid in family_cpu(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        out.append(round(kib / 1024, 1))
    return sorted(out, reverse=True)


def timeline(results: list[tuple[float, float, int, str]], start: float, bucket_s: float = 1.0) -> list[dict]:
    """Requests by the second they started in (from the clients' start): count, errors, p50, p99 and max ms."""
    buckets: dict[int, list[tuple[float, int]]] = {}
    for t0, s, status, _ in results:
        buckets.setdefault(int((t0 - start) // bucket_s), []).append((s, status))
    out = []
    for k in sorted(buckets):
        ms = np.array([s for s, status in buckets[k] if status == 200]) * 1000
        out.append({"s": k, "requests": len(buckets[k]), "errors": sum(st != 200 for _, st in buckets[k])}
                   | ({p: round(float(np.percentile(ms, int(p[1:]))), 1) for p in ("p50", "p99")}
                      | {"max": round(float(ms.max()), 1)} if len(ms) else {}))
    return out


def watch_publishes(workspace: Path, stop: threading.Event, seen: list[float]) -> None:
    """Note when the snapshot pointer changes (each publish), polling every 20 ms."""
    stamp = pointer_stamp(workspace)
    while not stop.wait(0.02):
        now = pointer_stamp(workspace)
        if now != stamp:
            seen.append(time.perf_counter())
            stamp = now


START_S = 300  # a cold server loads its model and read state; more than this is a failure


def start_serve(ws: Path, code: Path, workers: int = 1, flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """`rag serve` of the checkout `code` on the bench workspace `ws` (with more `flags`), on a free loopback port,
    once /healthz answers: the process and its base URL."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(ws / "workspace"),
                               "--port", str(port), "--users-file", str(ws / "users.yaml"),
                               *(["--workers", str(workers)] if workers > 1 else []), *flags], cwd=code,
                              env=os.environ | {"PYTHONPATH": str(code)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    while True:
        try:
            if httpx.get(base + "/healthz").status_code == 200:
                return server, base
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.terminate()
                raise SystemExit(f"rag serve did not start: {server.stderr.read()[-500:]}") from None
            time.sleep(0.5)


def wait_until_idle(pid: int, deadline: float) -> float:
    """Seconds until the server and all its workers stop using CPU: every worker has built its read state. A client
    connecting earlier keeps its connection (keep-alive) with the first worker up, which then serves everything."""
    start, before = time.monotonic(), family_cpu(pid)
    while time.monotonic() < deadline:
        time.sleep(1)
        now = family_cpu(pid)
        if now.keys() == before.keys() and sum(now.values()) - sum(before.values()) < 0.05:
            return round(time.monotonic() - start, 1)
        before = now
    raise SystemExit("rag serve's workers did not settle within the start-up deadline")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--seed", type=int, default=1)
    add_benchmarks_option(p)
    p.add_argument("--workers", type=int, default=1, help="rag serve --workers (one per core)")
    p.add_argument("--code", type=Path, default=REPO, help="the checkout whose `rag serve` answers (e.g. a git "
                   "worktree of the commit before a change); the workspace and the ingest are this checkout's")
    p.add_argument("--build-on-request", action="store_true", help="rag serve --build-on-request: the request "
                   "that first sees a publish builds its read state (as older checkouts always do)")
    p.add_argument("--tag", default="", help="suffix of the results file (e.g. before, after)")
    p.add_argument("--timeline", action="store_true", help="also print and store latency per second of the run")
    args = p.parse_args()
    bench = benchmarks_option(p, args) / "hotpotqa"
    ws = REPO / ".rag" / "bench" / "serve-load"
    src, acls = corpus(bench, ws, args.seed)
    run_ingest(IngestSettings(workspace=str(ws / "workspace"), sources=[str(src)], derive_links=True))
    users = {f"user-{k}": sorted(random.Random(k).sample(GROUPS, 2)) for k in range(10)}
    (ws / "users.yaml").write_text(yaml.safe_dump(users))
    server, base = start_serve(ws, args.code, args.workers,
                               ("--build-on-request",) if args.build_on_request else ())
    try:
        warm_s = wait_until_idle(server.pid, time.monotonic() + START_S)
    except BaseException:
        server.terminate()
        raise
    questions = [q.question for q in load_questions(bench)]
    results: list[tuple[float, float, int, str]] = []   # (start, seconds, status, method)
    bodies: list[tuple[dict, set[str]]] = []
    lock, stop = threading.Lock(), time.monotonic() + args.seconds

    def client(k: int) -> None:
        rng, http = random.Random(k), httpx.Client(base_url=base, timeout=60)
        n = 0
        while time.monotonic() < stop:
            user = rng.choice(list(users))
            method = ("longrag", "shortchunk")[n % 2]
            t = time.perf_counter()
            try:
                r = http.post("/retrieve", json={"question": rng.choice(questions), "user": user, "method": method,
                                                 "budget": 2000})
                status, body = r.status_code, (r.json() if r.status_code == 200 else None)
            except httpx.HTTPError:
                status, body = 0, None
            with lock:
                results.append((t, time.perf_counter() - t, status, method))
                if body is not None:
                    bodies.append((body, set(users[user])))
            n += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    cpu_before = family_cpu(server.pid)
    publishes: list[float] = []
    watching = threading.Event()
    watcher = threading.Thread(target=watch_publishes, args=(ws / "workspace", watching, publishes))
    watcher.start()
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(min(10, args.seconds / 4))
    changed = republish_tenth(src, args.seed)
    t_ingest = time.perf_counter()
    ingest = subprocess.run([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(src), "--workspace",
                             str(ws / "workspace"), "--derive-links", "titles", "--json"], cwd=REPO,
                            capture_output=True, text=True)
    ingest_seconds = time.perf_counter() - t_ingest
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    watching.set()
    watcher.join()
    snapshot_after = httpx.get(base + "/healthz").json()
    cpu_after = family_cpu(server.pid)
    # How the work spread over the server's processes: one busy worker and one idle means the clients' kept-alive
    # connections all went to one of them.
    busy = sorted((round(s - cpu_before.get(pid, 0.0), 1) for pid, s in cpu_after.items()), reverse=True)
    rss = family_rss_mib(server.pid)
    server.terminate()
    server.wait(timeout=60)

    # Every version the catalog published (the loader normalises text, so the source lines are not the bytes).
    catalog = Workspace(ws / "workspace").snapshot().catalog
    texts = {k: t for k, (_, t) in catalog.document_texts(catalog.rows("SELECT doc_id, version FROM documents")).items()}
    leaks = [leak for body, groups in bodies for leak in check(body, groups, acls, texts)]
    ok = [s for _, s, status, _ in results if status == 200]
    ms = np.array(ok) * 1000
    during = [s for t0, s, status, _ in results if status == 200 and t_ingest <= t0 <= t_ingest + ingest_seconds]
    # The slowest request that started once the ingest had begun: the read-state rebuild after its publishes.
    after_ingest = [s for t0, s, status, _ in results if status == 200 and t0 >= t_ingest]
    figures = {
        "clients": args.clients, "workers": args.workers, "seconds": round(wall, 1), "requests": len(results),
        "errors": sum(status != 200 for *_, status, _ in results), "leaks": len(leaks), "leak_examples": leaks[:10],
        "requests_per_s": round(len(results) / wall, 2),
        "server_cpu_ms_per_request": round(1000 * sum(busy) / max(len(results), 1), 1),  # robust to other jobs' load
        "latency_ms": {p: round(float(np.percentile(ms, int(p[1:]))), 1) for p in ("p50", "p95", "p99")}
        | {"max": round(float(ms.max()), 1)},
        "worst_ms_from_ingest_start": round(1000 * max(after_ingest), 1) if after_ingest else None,
        "latency_ms_during_ingest": {p: round(float(np.percentile(np.array(during) * 1000, int(p[1:]))), 1)
                                     for p in ("p50", "p95", "p99")} if during else None,
        "ingest": {"returncode": ingest.returncode, "seconds": round(ingest_seconds, 1), "republished": len(changed),
                   "documents": len(acls), "result": json.loads(ingest.stdout) if ingest.returncode == 0
                   else ingest.stderr.strip()[-300:]},
        "ingest_at_s": [round(t_ingest - start, 2), round(t_ingest + ingest_seconds - start, 2)],
        "publishes_at_s": [round(t - start, 2) for t in publishes],
        "snapshot_after": snapshot_after, "workers_settled_s": warm_s, "server_cpu_s_by_process": busy,
        "server_rss_mib_by_process": rss,  # the supervisor and each worker, after the re-publish
        "command": "python bench/serve_load.py " + " ".join(sys.argv[1:]), "code": str(args.code),
        "load_average": os.getloadavg(),
    }
    if args.timeline:
        figures["timeline"] = timeline(results, start)
    write_results(figures, "serve-load", args.tag)
    print(json.dumps({k: v for k, v in figures.items() if k != "timeline"}, indent=2))
    for row in figures.get("timeline", ()):
        mark = " <- publish" if any(row["s"] <= t < row["s"] + 1 for t in figures["publishes_at_s"]) else ""
        print(f"{row['s']:4d} s  {row['requests']:3d} req  p50 {row.get('p50', 0):7.1f}  p99 {row.get('p99', 0):7.1f}"
              f"  max {row.get('max', 0):7.1f} ms{mark}")


if __name__ == "__main__":
    main()
