"""An s3://bucket/prefix source against the real moto server: read like a folder through its mirror, changes found by
ETag, a vanished object deleted, folder ACL files as objects, a no-change run reading no object body, and every
failure one line that names no credential."""
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import servers
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

from bench import topology
from rag.models.tokens import default_counter
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.sources import bucket as bucket_source
from rag.sources.bucket import BucketError, BucketUri, split_sources, unsafe_key
from rag.sources.formatted import modified_version
from rag.sources.watch import fingerprint, snapshot
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings

s3_server, s3_env = servers.s3_server, servers.s3_env   # the production tests' moto server and a fresh bucket

OBJECTS = {
    "finance/.access.yaml": "acl: [finance, audit]\n",
    "finance/q1.md": "---\nid: q1\ntitle: Q1 results\nversion: 1\n---\nQuarter revenue margins rose in the first "
                     "quarter.\n",
    "finance/ledger.jsonl": json.dumps({"doc_id": "ledger", "text": "Ledger entries for the gateway firmware "
                                                                    "purchase."}) + "\n",
    "public.md": "The public handbook explains how to ground the gateway.\n",
    "notes/minutes.html": "<html><body><h1>Board minutes</h1><p>The board approved the audit certificate "
                          "rotation.</p></body></html>",
    "images/logo.png": "not a document: never downloaded",
}


class Reads:
    """Counts the object bodies (GetObject calls) that the bucket sources' clients ask for."""

    def __init__(self, monkeypatch):
        self.keys: list[str] = []
        made = bucket_source.client

        def counted():
            s3 = made()
            s3.meta.events.register("before-parameter-build.s3.GetObject",
                                    lambda params, **_: self.keys.append(params["Key"]))
            return s3

        monkeypatch.setattr(bucket_source, "client", counted)

    def take(self) -> list[str]:
        keys, self.keys = sorted(self.keys), []
        return keys


def s3():
    """A client of the environment as it is now (boto3's default session keeps the credentials it first read)."""
    return boto3.session.Session().client("s3")


def put(bucket: str, key: str, body: str) -> None:
    s3().put_object(Bucket=bucket, Key=key, Body=body.encode())


def publish(workspace: Path, uri: str, embedder):
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    try:
        settings = IngestSettings(sources=[uri], default_acl=("staff",))
        changes, loaded = publish_documents(catalog, settings)
        publish_units(catalog, default_counter(), settings)
        report = publish_index(catalog, index, embedder.encode, default_counter(), settings)
        current = {d: (v, tuple(acl), path) for d, v, acl, path in catalog.rows(
            f"SELECT doc_id, version, acl, {catalog.source_path_sql} FROM documents WHERE status = 'current'")}
        return changes, loaded, report, current
    finally:
        catalog.close()


def seen_by(workspace: Path, embedder, groups: set[str]) -> set[str]:
    ws = Workspace(workspace, embedder=embedder)
    try:
        return {i.doc_id for q in ("quarter revenue margins", "ledger firmware purchase", "ground the gateway",
                                   "board audit certificate rotation")
                for i in ws.retrieve("longrag", Caller(frozenset(groups)), q, 4000).items}
    finally:
        ws.close()


def rag_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.slow
def test_a_bucket_prefix_is_published_like_a_folder_and_kept_in_step_with_its_objects(s3_env, tmp_path, embedder,
                                                                                       monkeypatch):
    bucket, ws = s3_env["bucket"], tmp_path / "ws"
    uri = f"s3://{bucket}/corp"
    for key, body in OBJECTS.items():
        put(bucket, f"corp/{key}", body)
    put(bucket, "elsewhere/outside.md", "Not below the prefix.\n")
    reads = Reads(monkeypatch)

    changes, loaded, report, current = publish(ws, uri, embedder)
    assert reads.take() == sorted(f"corp/{k}" for k in OBJECTS if not k.endswith(".png"))
    assert set(current) == {"q1", "ledger", "public", "notes/minutes"}
    assert current["q1"] == ("1", ("audit", "finance"), f"{uri}/finance/q1.md")
    assert current["ledger"][1:] == (("audit", "finance"), f"{uri}/finance/ledger.jsonl:1")
    assert current["public"][1:] == (("staff",), f"{uri}/public.md")
    modified = s3().head_object(Bucket=bucket, Key="corp/notes/minutes.html")["LastModified"]
    assert current["notes/minutes"][0] == modified_version(int(modified.timestamp() * 1e9))   # as a folder's mtime
    assert all(str(ws) not in r.source_path for r in loaded.skipped + loaded.rejected)

    changes, _, report, _ = publish(ws, uri, embedder)   # nothing changed: the listing alone, no body read
    assert reads.take() == []
    assert (changes.new, changes.deleted, report.embedded) == ([], [], 0)
    assert changes.reading["files_read"] == 0

    put(bucket, "corp/finance/q1.md", OBJECTS["finance/q1.md"].replace("version: 1", "version: 2")
        .replace("rose", "fell"))
    changes, _, report, current = publish(ws, uri, embedder)
    assert reads.take() == ["corp/finance/q1.md"]
    assert (changes.new, changes.superseded) == ([("q1", "2")], [("q1", "1")])
    assert current["q1"][0] == "2" and report.embedded > 0

    s3().delete_object(Bucket=bucket, Key="corp/public.md")
    changes, _, _, current = publish(ws, uri, embedder)
    assert reads.take() == [] and changes.deleted == [("public", "1")] and "public" not in current
    out = rag_cli("retrieve", "public handbook ground the gateway", "--workspace", str(ws), "--groups", "staff",
                  "--budget", "4000", "--json")
    assert out.returncode == 0, out.stderr
    assert "public" not in {i["doc_id"] for i in json.loads(out.stdout)["items"]}

    assert {"q1", "ledger"} <= seen_by(ws, embedder, {"audit"})
    put(bucket, "corp/finance/.access.yaml", "acl: [finance]\n")   # a revocation: ACLs re-published, no re-embedding
    changes, _, report, current = publish(ws, uri, embedder)
    assert reads.take() == ["corp/finance/.access.yaml"]
    assert report.embedded == 0 and changes.new == []
    assert sorted(d for d, _ in changes.updated_in_place) == ["ledger", "q1"]
    assert current["q1"][1] == ("finance",)
    assert not {"q1", "ledger"} & seen_by(ws, embedder, {"audit"})
    assert {"q1", "ledger"} <= seen_by(ws, embedder, {"finance"})

    mirror = next((ws / "buckets").iterdir()) / "files"
    (mirror / "finance" / "q1.md").unlink()   # a cache lost its copy: fetched again, nothing re-versioned
    changes, _, report, _ = publish(ws, uri, embedder)
    assert reads.take() == ["corp/finance/q1.md"] and (changes.new, changes.deleted, report.embedded) == ([], [], 0)


@pytest.mark.slow
def test_keys_that_would_leave_the_mirror_are_refused_with_one_line_and_the_rest_is_published(s3_env, tmp_path):
    bucket, ws = s3_env["bucket"], tmp_path / "ws"
    for key in ("corp/ok.md", "corp/../escape.md", "corp//absolute.md", "corp/a/./b.md", "corp/both.md",
                "corp/both.md/inner.md"):
        put(bucket, key, "---\nacl: [staff]\n---\nA readable text.\n")
    ws.mkdir()
    catalog = Catalog(ws / "catalog.duckdb")
    try:
        changes, loaded = publish_documents(catalog, IngestSettings(sources=[f"s3://{bucket}/corp"]))
        reasons = {r.source_path: r.reason for r in loaded.rejected}
        assert set(current_ids(catalog)) == {"ok", "both.md/inner"}
    finally:
        catalog.close()
    assert "refused: it could name a file outside the mirror" in reasons[f"s3://{bucket}/corp/../escape.md"]
    assert "absolute key" in reasons[f"s3://{bucket}/corp//absolute.md"]
    assert "'.'" in reasons[f"s3://{bucket}/corp/a/./b.md"]
    assert "is also the folder of other keys" in reasons[f"s3://{bucket}/corp/both.md"]
    assert all("\n" not in r for r in reasons.values())
    assert not list((ws / "buckets").rglob("escape.md")) and not (tmp_path / "escape.md").exists()


def current_ids(catalog) -> list[str]:
    return [d for (d,) in catalog.rows("SELECT doc_id FROM documents WHERE status = 'current'")]


@pytest.mark.slow
def test_the_sensor_fingerprints_the_listing_and_reads_no_object_body(s3_env, tmp_path, monkeypatch):
    import dagster as dg

    from pipelines.sensors import source_sensor

    bucket = s3_env["bucket"]
    uri = f"s3://{bucket}/corp"
    for key, body in OBJECTS.items():
        put(bucket, f"corp/{key}", body)
    reads = Reads(monkeypatch)
    assert set(snapshot(uri)) == {k for k in OBJECTS if not k.endswith(".png")}
    before = fingerprint(snapshot(uri))
    put(bucket, "corp/images/logo.png", "another picture")   # not a document: no run
    assert fingerprint(snapshot(uri)) == before

    @dg.asset
    def documents():
        return None

    sensor = source_sensor(uri, str(tmp_path / "ws"), dg.define_asset_job("ingest", selection=[documents]))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        def tick(cursor):
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            return ([], cursor) if isinstance(result, dg.SkipReason) else (result.run_requests, result.cursor)

        first, cursor = tick(None)
        assert len(first) == 1 and first[0].tags["rag/source"] == uri
        assert tick(cursor)[0] == []
        put(bucket, "corp/finance/.access.yaml", "acl: [finance]\n")
        assert len(tick(cursor)[0]) == 1
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{topology.free_port()}")   # the store is down
        skipped = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        assert isinstance(skipped, dg.SkipReason) and "cannot reach the object store" in skipped.skip_message
        assert "\n" not in skipped.skip_message
    assert reads.take() == []


def auth_server(tmp_path):
    """A second moto server that checks signatures: an IAM user's key may read, a wrong secret may not."""
    port = topology.free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "moto_s3.py"), "127.0.0.1", str(port)],
                            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    topology.wait_for_port(port, proc, "moto server")
    url = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=url, aws_access_key_id="setup",
                       aws_secret_access_key="setup")
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    iam.put_user_policy(UserName="reader", PolicyName="s3", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    return proc, {"AWS_ENDPOINT_URL": url, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                  "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


@pytest.mark.slow
def test_a_refused_credential_an_unknown_bucket_or_a_store_down_is_one_line_naming_no_credential_and_loses_nothing(
        tmp_path, monkeypatch):
    proc, env = auth_server(tmp_path)
    try:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        s3().create_bucket(Bucket="docs")
        put("docs", "corp/q1.md", "---\nid: q1\nacl: [finance]\n---\nQuarter revenue margins.\n")
        (ws := tmp_path / "ws").mkdir()
        catalog = Catalog(ws / "catalog.duckdb")
        try:
            publish_documents(catalog, IngestSettings(sources=["s3://docs/corp"]))
            secret = "wrong-secret-" + env["AWS_SECRET_ACCESS_KEY"][:8]
            cases = {
                "refused the credentials (SignatureDoesNotMatch)": {"AWS_SECRET_ACCESS_KEY": secret},
                "refused the credentials (InvalidAccessKeyId)": {"AWS_ACCESS_KEY_ID": "AKIAWRONGKEY0001"},
                "no such bucket": {"RAG_TEST_URI": "s3://nobucket/corp"},
                "cannot reach the object store": {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{topology.free_port()}"},
            }
            for expected, change in cases.items():
                with monkeypatch.context() as m:
                    for name, value in change.items():
                        m.setenv(name, value)
                    uri = change.get("RAG_TEST_URI", "s3://docs/corp")
                    with pytest.raises(BucketError) as caught:
                        publish_documents(catalog, IngestSettings(sources=[uri]))
                    message = str(caught.value)
                    assert expected in message and "\n" not in message and message.startswith(uri)
                    for credential in {env["AWS_SECRET_ACCESS_KEY"], secret, os.environ["AWS_ACCESS_KEY_ID"]}:
                        assert credential not in message
                    assert current_ids(catalog) == ["q1"]   # nothing already published is lost
            with monkeypatch.context() as m:   # the command line: exit status 1, one line, no credential
                m.setenv("AWS_SECRET_ACCESS_KEY", secret)
                done = rag_cli("ingest", "--source", "s3://docs/corp", "--workspace", str(tmp_path / "other"))
            assert done.returncode != 0
            said = (done.stdout + done.stderr).strip()
            assert len(said.splitlines()) == 1 and "SignatureDoesNotMatch" in said and secret not in said
            assert env["AWS_SECRET_ACCESS_KEY"] not in said
        finally:
            catalog.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@given(st.lists(st.sampled_from(["a", "b.md", "..", ".", "", "/", "\x00", "é", "c" * 300]), min_size=1, max_size=6))
def test_a_key_the_mirror_accepts_names_a_file_inside_the_mirror(parts):
    rel = "/".join(parts)
    root = Path("/mirror/files")
    if unsafe_key(rel) is None:
        assert (root / rel).resolve().is_relative_to(root) and (root / rel).resolve() != root


def test_a_bucket_uri_is_parsed_or_refused_with_one_line_that_shows_no_credential():
    assert BucketUri.parse("s3://docs/corp/2026/") == BucketUri("docs", "corp/2026")
    assert BucketUri.parse("s3://docs").key_prefix == ""
    for bad, problem in [("s3://", "names no bucket"), ("s3://AKIA:hunter2secret@docs/p", "holds credentials"),
                         ("s3://docs/a/../b", "'..' part"), ("s3://docs/p?x=1", "query"),
                         ("s3://docs/p q", "white space"), ("s3://d/p", "names a bucket S3 does not allow")]:
        with pytest.raises(BucketError, match=problem) as caught:
            BucketUri.parse(bad)
        assert "hunter2secret" not in str(caught.value) and "\n" not in str(caught.value)


def test_rag_sources_keeps_an_s3_uri_whole():
    sep = os.pathsep
    assert split_sources(f"docs{sep}s3://bucket/corp{sep}/srv/more") == ["docs", "s3://bucket/corp", "/srv/more"]
    assert IngestSettings.from_env({"RAG_SOURCES": f"s3://b1/x{sep}s3://b2"}, ".", []).sources == ["s3://b1/x",
                                                                                                   "s3://b2"]


def test_a_partitioned_workspace_over_a_bucket_is_refused_with_one_line(tmp_path):
    done = rag_cli("ingest", "--source", "s3://docs/corp", "--partitioned", "--workspace", str(tmp_path))
    assert done.returncode != 0
    assert "not partitioned by collection" in done.stdout + done.stderr


@pytest.mark.slow
def test_an_object_deleted_between_the_listing_and_its_download_is_left_out_not_a_failed_run(s3_env, tmp_path,
                                                                                               monkeypatch):
    bucket, ws = s3_env["bucket"], tmp_path / "ws"
    for name in ("kept", "gone"):
        put(bucket, f"corp/{name}.md", f"---\nid: {name}\nacl: [staff]\n---\nThe {name} text.\n")
    made = bucket_source.client

    def racing():   # another writer deletes the object just before this run fetches it
        client = made()
        client.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **_: params[
            "Key"].endswith("gone.md") and s3().delete_object(Bucket=bucket, Key=params["Key"]))
        return client

    monkeypatch.setattr(bucket_source, "client", racing)
    ws.mkdir()
    catalog = Catalog(ws / "catalog.duckdb")
    try:
        publish_documents(catalog, IngestSettings(sources=[f"s3://{bucket}/corp"]))
        assert current_ids(catalog) == ["kept"]
    finally:
        catalog.close()


def test_the_dagster_definitions_watch_a_bucket_source_from_rag_sources_and_refuse_one_partitioned(tmp_path,
                                                                                                  monkeypatch):
    from pipelines.definitions import build_definitions
    from pipelines.workspace_resources import resources_from_env

    monkeypatch.setenv("RAG_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RAG_SOURCES", f"s3://docs/corp{os.pathsep}{tmp_path}")
    defs = build_definitions(resources_from_env())   # builds without reaching any store
    assert "source_changes_corp" in {s.name for s in defs.sensors}
    assert defs.resolve_sensor_def("source_changes_corp").description.count("s3://docs/corp") == 1
    monkeypatch.setenv("RAG_PARTITIONS", "collections")
    with pytest.raises(BucketError, match="not partitioned by collection"):
        resources_from_env()
