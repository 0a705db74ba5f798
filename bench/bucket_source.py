"""A bucket source against a folder source holding the same documents, on moto's S3 server on loopback.

`--docs N` generated Markdown documents (front matter with id, version, links; some with an ACL of their own) in
team folders, each with a folder ACL file (and some sub-folders with a narrower one), are written to a folder and
uploaded under a bucket prefix. Each is published once with the real embedder into a workspace of its own; the
published states must be identical (documents, versions, ACLs, unit membership) and so must the rankings
`rag retrieve` gives (`Workspace.retrieve`, its core) for several callers and questions. Then the no-change cost of
a bucket source at `--scan-objects` objects (documents step only: nothing to embed): the sensor's listing and a
run's mirror and scan, each in seconds, S3 requests by kind and bytes of object bodies read (goal 0).
`--latency` also measures a revocation with the sensor on: a folder ACL object's edit (and, on a folder source read
with `--acl-from posix`, a `chgrp`), the real sensor's tick (`build_sensor_context`), the run it requests
(`execute_in_process` of the ingest job), until `rag retrieve` no longer shows the documents. Prints and writes bench/results/bucket_source.json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import topology  # noqa: E402
from bench.results_file import write_results  # noqa: E402
from rag.models.embedders import Embedder  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.query.workspace import Workspace  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.sources import bucket as bucket_source  # noqa: E402
from rag.sources.access import ACCESS_FILE  # noqa: E402
from rag.sources.watch import fingerprint, snapshot  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

WORDS = ("ledger invoice audit quarter revenue margin gateway antenna firmware certificate rotation budget payroll "
         "supplier contract renewal forecast variance approval travel expense policy region north south hiring "
         "onboarding laptop network outage incident review").split()
TEAMS = ("finance", "hr", "ops", "legal", "sales")
QUESTIONS = ("quarter revenue forecast", "supplier contract renewal", "travel expense approval",
             "network outage incident review", "hiring onboarding laptop", "certificate rotation firmware")
CALLERS = ({"finance"}, {"audit"}, {"hr", "staff"}, {"ops"}, {"legal", "sales", "finance"})
BUCKET = "bench-docs"


def corpus(n: int, seed: int) -> dict[str, str]:
    """Relative path → text of `n` documents and their folder ACL files."""
    rng = random.Random(seed)
    files = {}
    for team in TEAMS:
        files[f"{team}/{ACCESS_FILE}"] = f"acl: [{team}, audit, staff]\n"
        files[f"{team}/restricted/{ACCESS_FILE}"] = f"acl: [{team}]\n"
    for i in range(n):
        team = TEAMS[i % len(TEAMS)]
        folder = f"{team}/restricted" if i % 7 == 0 else team
        links = [f"{TEAMS[j % len(TEAMS)]}-{j:05d}" for j in (i - 5, i - 10) if j >= 0 and j % 5 == i % 5 and
                 rng.random() < 0.3]
        own_acl = f"acl: [{team}]\n" if i % 11 == 0 else ""
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 120)))
        files[f"{folder}/{team}-{i:05d}.md"] = (
            f"---\nid: {team}-{i:05d}\ntitle: {team.title()} note {i}\nversion: {1 + i % 3}\n{own_acl}"
            f"links: {json.dumps(links)}\n---\n{team.title()} note {i}: {words}.\n")
    return files


class Counted:
    """The S3 requests the bucket source makes (by operation) and the object body bytes it reads."""

    def __init__(self):
        self.requests: Counter = Counter()
        self.body_bytes = 0
        self._made = bucket_source.client
        bucket_source.client = self._client

    def _client(self):
        s3 = self._made()
        s3.meta.events.register("before-call.s3", self._request)
        s3.meta.events.register("after-call.s3.GetObject", self._body)
        return s3

    def _request(self, model, **_):
        self.requests[model.name] += 1

    def _body(self, parsed, **_):
        self.body_bytes += parsed.get("ContentLength", 0)

    def take(self) -> dict:
        out = {"requests": dict(self.requests), "object_body_bytes": self.body_bytes}
        self.requests, self.body_bytes = Counter(), 0
        return out


def upload(files: dict[str, str], prefix: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    s3 = boto3.session.Session().client("s3")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{kv[0]}", Body=kv[1].encode()),
                      files.items()))


def write_folder(files: dict[str, str], root: Path) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def publish(workspace: Path, source: str, embedder) -> float:
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    settings, counter = IngestSettings(sources=[source]), default_counter()
    started = time.perf_counter()
    publish_documents(catalog, settings)
    publish_units(catalog, counter, settings)
    publish_index(catalog, index, embedder.encode, counter, settings)
    catalog.close()
    return time.perf_counter() - started


def published_state(workspace: Path) -> dict:
    catalog = Catalog(workspace / "catalog.duckdb")
    try:
        return {
            "documents": sorted(catalog.rows("SELECT doc_id, version, list_sort(acl), status, content_hash, title "
                                             "FROM documents")),
            "units": sorted(catalog.rows("SELECT unit_id, unit_version, list_sort(acl), tokens, status FROM units")),
            "members": sorted(catalog.rows("SELECT unit_id, unit_version, position, doc_id, doc_version, part "
                                           "FROM unit_members")),
            "source_paths": sorted(p for (p,) in catalog.rows(
                f"SELECT {catalog.source_path_sql} FROM documents WHERE status = 'current'")),
        }
    finally:
        catalog.close()


def rankings(workspace: Path, embedder) -> list:
    ws = Workspace(workspace, embedder=embedder)
    try:
        return [[(i.doc_id, i.doc_version, i.unit_id, round(i.score, 6))
                 for i in ws.retrieve("longrag", Caller(frozenset(groups)), q, 4000).items]
                for groups in CALLERS for q in QUESTIONS]
    finally:
        ws.close()


def compare(n: int, seed: int, tmp: Path, embedder) -> dict:
    files = corpus(n, seed)
    write_folder(files, tmp / "src")
    upload(files, "compare")
    folder_s = publish(tmp / "ws-folder", str(tmp / "src"), embedder)
    bucket_s = publish(tmp / "ws-bucket", f"s3://{BUCKET}/compare", embedder)
    folder, bucket = published_state(tmp / "ws-folder"), published_state(tmp / "ws-bucket")
    same = {k: folder[k] == bucket[k] for k in ("documents", "units", "members")}
    ranked_folder, ranked_bucket = rankings(tmp / "ws-folder", embedder), rankings(tmp / "ws-bucket", embedder)
    return {"documents": n, "folder_acl_files": sum(k.endswith(ACCESS_FILE) for k in files),
            "current_documents": sum(d[3] == "current" for d in folder["documents"]),
            "units": len(folder["units"]), "first_publish_s": {"folder": round(folder_s, 1),
                                                               "bucket": round(bucket_s, 1)},
            "identical": same, "rankings_identical": ranked_folder == ranked_bucket,
            "rankings_compared": len(ranked_folder), "items_ranked": sum(map(len, ranked_folder)),
            "bucket_source_paths_are_s3": all(p.startswith(f"s3://{BUCKET}/compare/")
                                              for p in bucket["source_paths"])}


def no_change_cost(n: int, seed: int, tmp: Path, counted: Counted) -> dict:
    files = corpus(n, seed)
    upload(files, "scan")
    uri, ws = f"s3://{BUCKET}/scan", tmp / "ws-scan"
    catalog, settings = Catalog(ws / "catalog.duckdb"), IngestSettings(sources=[uri])
    started = time.perf_counter()
    publish_documents(catalog, settings)
    first = {"seconds": round(time.perf_counter() - started, 1), **counted.take()}
    started = time.perf_counter()
    snap = snapshot(uri)
    fingerprint(snap)
    sensor = {"seconds": round(time.perf_counter() - started, 3), **counted.take()}
    started = time.perf_counter()
    bucket_source.mirror(uri, ws)
    mirror = {"seconds": round(time.perf_counter() - started, 3), **counted.take()}
    started = time.perf_counter()
    changes, _ = publish_documents(catalog, settings)
    run = {"seconds": round(time.perf_counter() - started, 3), **counted.take(), "files_read":
           changes.reading["files_read"], "new_versions": len(changes.new)}
    catalog.close()
    per_10k = 10_000 / len(files)   # exact at 10K objects; scaled linearly below it
    return {"objects": len(files), "listed_by_sensor": len(snap), "first_run": first,
            "sensor_tick": sensor, "mirror_only": mirror, "documents_step": run,
            "per_10k_objects": {"sensor_seconds": round(sensor["seconds"] * per_10k, 2),
                                "run_documents_step_seconds": round(run["seconds"] * per_10k, 2),
                                "list_requests": math.ceil(sum(sensor["requests"].values()) * per_10k),
                                "object_body_bytes": run["object_body_bytes"]}}


def revocation_latency(tmp: Path, embedder, interval_s: int) -> dict:
    """A bucket source: from a folder ACL object's edit to the first `rag retrieve` without the documents."""
    files = corpus(200, 7)
    upload(files, "latency")

    def edit():
        import boto3
        boto3.session.Session().client("s3").put_object(Bucket=BUCKET, Key=f"latency/legal/{ACCESS_FILE}",
                                                         Body=b"acl: [legal]\n")

    settings = IngestSettings(workspace=str(tmp / "ws-latency"), sources=[f"s3://{BUCKET}/latency"],
                              sensor_interval_s=interval_s)
    return {"documents": len(files) - 2 * len(TEAMS), "edit": "legal/.access.yaml drops the audit group",
            **_latency(tmp / "dagster-bucket", settings, edit, "audit", embedder, interval_s)}


def chgrp_latency(tmp: Path, embedder, interval_s: int) -> dict:
    """A folder source read with `--acl-from posix`: from a `chgrp` of a folder's files (their ctime alone moves) to
    the first `rag retrieve` without them."""
    rng, src = random.Random(3), tmp / "src-posix"
    for i in range(200):
        path = src / TEAMS[i % len(TEAMS)] / f"note-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{TEAMS[i % len(TEAMS)].title()} note {i}: " + " ".join(rng.choice(WORDS) for _ in range(60)))
        os.chown(path, -1, 0)
        path.chmod(0o640)   # the owning group reads it, the world does not

    def edit():
        for path in (src / "legal").iterdir():
            os.chown(path, -1, 1)

    settings = IngestSettings(workspace=str(tmp / "ws-posix"), sources=[str(src)], acl_from="posix",
                              default_acl=("root", "daemon"), sensor_interval_s=interval_s)
    return {"documents": 200, "edit": "chgrp of legal/'s files from root to daemon",
            **_latency(tmp / "dagster-posix", settings, edit, "root", embedder, interval_s)}


def _latency(home: Path, settings: IngestSettings, edit, group: str, embedder, interval_s: int) -> dict:
    """Publish through the real sensor and job, apply `edit`, and time the tick, the run and the first retrieve that
    shows the group none of legal/'s documents."""
    import dagster as dg

    from pipelines.definitions import build_definitions
    from pipelines.workspace_resources import workspace_resources

    defs = build_definitions(workspace_resources(settings))
    sensor = next(s for s in defs.sensors if s.name.startswith("source_changes_"))
    job = defs.resolve_job_def("ingest")
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        def tick(cursor):
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            return ([], cursor) if isinstance(result, dg.SkipReason) else (result.run_requests, result.cursor)

        def visible() -> int:
            w = Workspace(settings.workspace, embedder=embedder)
            try:
                return sum("legal" in i.doc_id for q in QUESTIONS
                           for i in w.retrieve("longrag", Caller(frozenset({group})), q, 4000).items)
            finally:
                w.close()

        [request], cursor = tick(None)
        assert job.execute_in_process(instance=instance, tags=request.tags).success
        before = visible()
        edit()
        edited = time.perf_counter()
        requests, cursor = tick(cursor)
        ticked = time.perf_counter()
        assert len(requests) == 1, "the sensor saw no change"
        assert job.execute_in_process(instance=instance, tags=requests[0].tags).success
        ran = time.perf_counter()
        after = visible()
        seen = time.perf_counter()
    return {"caller": group, "legal_items_seen_before": before, "legal_items_seen_after": after,
            "sensor_tick_s": round(ticked - edited, 2), "run_s": round(ran - ticked, 2),
            "first_retrieve_s": round(seen - ran, 2), "edit_to_hidden_s": round(seen - edited, 2),
            "worst_case_with_interval_s": round(interval_s + seen - edited, 2), "sensor_interval_s": interval_s,
            "how": "the real sensor's tick (build_sensor_context), then the ingest job it requests "
                   "(execute_in_process), then Workspace.retrieve (rag retrieve's core) as the caller"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=1000)
    p.add_argument("--scan-objects", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latency", action="store_true")
    p.add_argument("--interval", type=int, default=30, help="the sensor interval the latency's worst case adds")
    args = p.parse_args()
    embedder = Embedder(threads=2)
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-bucket-"))
    try:
        with topology.s3_server() as env:
            os.environ.update(env)
            topology.create_bucket(env, BUCKET)
            counted = Counted()
            figures = {"compare": compare(args.docs, args.seed, tmp, embedder)}
            counted.take()
            figures["no_change"] = no_change_cost(args.scan_objects, args.seed + 1, tmp, counted)
            if args.latency:
                figures["revocation_latency"] = revocation_latency(tmp, embedder, args.interval)
                figures["chgrp_latency"] = chgrp_latency(tmp, embedder, args.interval)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures["command"] = (f"python bench/bucket_source.py --docs {args.docs} --scan-objects {args.scan_objects} "
                          f"--seed {args.seed}" + (f" --latency --interval {args.interval}" if args.latency else ""))
    write_results(figures, "bucket_source")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
