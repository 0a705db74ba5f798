"""`rag serve` through real HTTP on 127.0.0.1: the CLI's JSON shapes, callers, 4xx reasons, publishes, permissions."""
import itertools
import json
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import pytest
import yaml
from conftest import REPO, SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.ingest_run import run_ingest
from rag.query.workspace import Workspace
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings

GROUPS = ["field-engineering", "support", "partners", "security-team", "everyone", "nobody-else"]
WORDS = ["cache", "firmware", "certificate", "rotation", "log", "reconnect", "antenna", "grounding", "incident",
         "modbus", "error", "ssh", "boot", "commissioning", "partition", "eviction", "batch", "alarm"]


def user_of(groups) -> str:
    return "u-" + "+".join(sorted(groups))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(ws, *flags: str) -> tuple[subprocess.Popen, httpx.Client]:
    """`rag serve` in its own process on a free loopback port, once /healthz answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(ws), "--port",
                             str(port), *flags], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
    deadline = time.monotonic() + 300
    while True:
        try:
            if client.get("/healthz").status_code == 200:
                return proc, client
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "rag serve did not come up"
        time.sleep(0.5)


@contextmanager
def serving(root, ingest, users: dict):
    """A copy of the sample corpus ingested by `ingest` into root/ws, and `rag serve` over it with these users; `reader`
    is the test's own view of the workspace (it follows each publish, as the server does)."""
    corpus, ws = root / "corpus", root / "ws"
    shutil.copytree(SAMPLES / "corpus", corpus)
    ingest(IngestSettings(workspace=ws, sources=[corpus]))
    (root / "users.yaml").write_text(yaml.safe_dump(users))
    proc, client = start_server(ws, "--users-file", str(root / "users.yaml"))
    try:
        yield {"client": client, "ws": ws, "corpus": corpus, "proc": proc, "root": root, "reader": Workspace(ws)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A workspace, a users file with one user per set of up to three groups, and `rag serve` over it."""
    users = {user_of(c): list(c) for n in (1, 2, 3) for c in itertools.combinations(GROUPS, n)}
    with serving(tmp_path_factory.mktemp("serve"), run_ingest, users) as s:
        yield s


def post(served, path, **body):
    return served["client"].post(path, json=body)


def test_retrieve_answers_in_the_cli_json_shape(served):
    r = post(served, "/retrieve", question="How long does the offline cache hold telemetry?", user="u-support",
             budget=1500)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"method", "budget", "tokens", "items", "trace"} and body["budget"] == 1500
    assert body["items"][0]["doc_id"] == "edge-offline-cache" and body["tokens"] <= 1500
    cli = subprocess.run([sys.executable, "-m", "pipelines.cli", "retrieve", "How long does the offline cache hold "
                          "telemetry?", "--workspace", str(served["ws"]), "--groups", "support", "--budget", "1500",
                          "--json"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert [i["doc_id"] for i in json.loads(cli.stdout)["items"]] == [i["doc_id"] for i in body["items"]]


def test_ask_answers_with_the_reader_it_names_and_checks_citations(served):
    body = post(served, "/ask", question="Which error code means the gateway cache is full?", user="u-support",
                method="elite").json()
    assert body["answer"]["reader"] == "extractive" and body["retrieval"]["method"] == "elite"
    assert body["answer"]["short_answer"]


@pytest.mark.parametrize("body, status, reason", [
    ({"question": "q", "user": "u-support", "method": "bm25"}, 400, "unknown method 'bm25'"),
    ({"question": "q", "user": "u-support", "budget": 0}, 422, "budget: Input should be greater than 0"),
    ({"question": "q"}, 401, "name the asking user"),
    ({"question": "q", "user": "mallory"}, 403, "unknown user 'mallory'"),
    ({"question": "x" * 5000, "user": "u-support"}, 422, "question: String should have at most 2000 characters"),
    ({"user": "u-support"}, 422, "question: Field required"),
    ({"question": "q", "user": "u-support", "method": "elite", "as_of": "publish:1"}, 400, "as-of reads are not"),
    ({"question": "q", "user": "u-support", "as_of": "yesterday"}, 400, "expected an ISO timestamp"),
])
def test_bad_requests_get_a_4xx_with_a_one_line_reason(served, body, status, reason):
    r = post(served, "/retrieve", **body)
    assert r.status_code == status
    error = r.json()["error"]
    assert reason in error and "\n" not in error and "Traceback" not in r.text


def test_malformed_json_and_the_openapi_document(served):
    r = served["client"].post("/retrieve", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "\n" not in r.json()["error"]
    spec = served["client"].get("/openapi.json").json()
    assert {"/retrieve", "/ask", "/healthz"} <= set(spec["paths"])


WORD_LISTS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS), min_size=1, max_size=3), words=WORD_LISTS,
       budget=st.integers(min_value=50, max_value=9000), method=st.sampled_from(["longrag", "shortchunk", "elite"]))
def test_no_byte_served_over_http_is_unreadable_by_the_caller(served, groups, words, budget, method):
    r = post(served, "/retrieve", question=" ".join(words), user=user_of(groups), budget=budget, method=method)
    assert_readable_only(served["reader"], groups, budget, r)


def assert_readable_only(reader: Workspace, groups, budget: int, r: httpx.Response) -> None:
    """Every item is a document the groups may read, within budget, and its ranges are the document's text."""
    assert r.status_code == 200, r.text
    snap = reader.snapshot()
    acls, body = snap.current.acls, r.json()
    assert body["tokens"] <= budget
    texts = snap.catalog.document_texts([(i["doc_id"], i["doc_version"]) for i in body["items"]])
    for item in body["items"]:
        assert not set(groups).isdisjoint(acls[item["doc_id"]])
        for start, end in item["ranges"]:
            assert texts[(item["doc_id"], item["doc_version"])][1][start:end] in item["text"]


def test_a_deletion_is_hidden_at_once_and_a_publish_is_served_once_its_read_state_is_built(served):
    question, before = "Which error code means the gateway cache is full?", served["client"].get("/healthz").json()
    ids = lambda: {i["doc_id"] for i in post(served, "/retrieve", question=question, user="u-support").json()["items"]}  # noqa: E731
    assert "error-codes-reference" in ids()
    (served["corpus"] / "operations" / "error-codes.md").unlink()
    catalog = Catalog(served["ws"] / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(served["corpus"])]))  # documents step only
    catalog.close()
    assert "error-codes-reference" not in ids()
    run_ingest(IngestSettings(workspace=str(served["ws"]), sources=[str(served["corpus"])]))
    after, deadline = served["client"].get("/healthz").json(), time.monotonic() + 60
    while after["snapshot"] < before["snapshot"] + 2 and time.monotonic() < deadline:  # built between requests
        time.sleep(0.2)
        after = served["client"].get("/healthz").json()
    assert after["snapshot"] >= before["snapshot"] + 2 and after["publish_id"] > before["publish_id"]
    assert "building" not in after
    assert "error-codes-reference" not in ids()


def test_behind_a_proxy_the_groups_come_from_its_header_only(served):
    proc, client = start_server(served["ws"], "--groups-header", "X-Forwarded-Groups")
    try:
        question = {"question": "How are gateway certificates rotated?"}
        assert client.post("/retrieve", json=question).status_code == 401
        assert client.post("/retrieve", json=question | {"user": "u-security-team"},
                           headers={"X-Forwarded-Groups": "support"}).status_code == 400
        r = client.post("/retrieve", json=question, headers={"X-Forwarded-Groups": "partners, nobody-else"})
        acls = Workspace(served["ws"]).snapshot().current.acls
        assert r.status_code == 200 and all("partners" in acls[i["doc_id"]] for i in r.json()["items"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_refuses_to_start_without_a_way_to_know_callers(served):
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(served["ws"])], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "rag serve: error: say who callers are: --users-file, or --groups-header behind an authenticating proxy"]
