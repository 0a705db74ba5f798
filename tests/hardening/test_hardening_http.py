"""Every error of `rag serve` is one line of `{"error": "…"}`, bodies are capped and
parsed with limits before the framework sees them, and no response names a server path or carries a traceback.
Also the permission property over HTTP on a partitioned workspace."""
import itertools
import json
import re
import socket
import sys

import httpx
import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server import GROUPS, WORDS, assert_readable_only, serving, user_of

from pipelines.http_body import MAX_BODY_BYTES, MAX_DEPTH
from pipelines.ingest_run import run_ingest, run_partitions

Q = b'"question": "How long does the offline cache hold telemetry?", "user": "u-support"'
JSON = {"content-type": "application/json"}

# (name, raw body, extra headers, expected status, words the error must hold)
BODIES = [
    ("invalid utf-8", b'{"question": "caf\xe9", "user": "u-support"}', JSON, 400, "not valid UTF-8"),
    ("overlong utf-8", b'{"question": "\xc0\xaf", "user": "u-support"}', JSON, 400, "not valid UTF-8"),
    ("100,000-deep array", b"[" * 100_000 + b"]" * 100_000, JSON, 413, f"limit of {MAX_BODY_BYTES:,} bytes"),
    ("20,000-deep array under the cap", b"[" * 20_000 + b"]" * 20_000, JSON, 400, f"deeper than {MAX_DEPTH}"),
    ("deep object in a field", b"{" + Q + b', "as_of": ' + b'{"a": ' * 40 + b"1" + b"}" * 40 + b"}", JSON, 400,
     "deeper than"),
    ("5,000-digit budget", b"{" + Q + b', "budget": ' + b"9" * 5000 + b"}", JSON, 400, "number of 5,000 characters"),
    ("5,000-digit float", b"{" + Q + b', "budget": 1.' + b"5" * 5000 + b"}", JSON, 400, "number of 5,002 characters"),
    ("negative 5,000 digits", b"{" + Q + b', "budget": -' + b"1" * 5000 + b"}", JSON, 400, "number of 5,001"),
    ("exponent overflow", b"{" + Q + b', "budget": 1e999999}', JSON, 400, "out of range (1e999999)"),
    ("NaN", b"{" + Q + b', "budget": NaN}', JSON, 400, "NaN is not a JSON number"),
    ("Infinity", b"{" + Q + b', "budget": -Infinity}', JSON, 400, "-Infinity is not a JSON number"),
    ("not JSON", b"{not json", JSON, 400, "not valid JSON"),
    ("trailing garbage", b"{" + Q + b"} x", JSON, 400, "not valid JSON"),
    ("lone surrogate", b'{"question": "\\ud800 cache", "user": "u-support"}', JSON, 400, "lone surrogate"),
    ("surrogate key", b'{"\\udfff": 1, ' + Q + b"}", JSON, 400, "lone surrogate"),
    ("array body", b"[]", JSON, 422, "Input should be a valid dictionary"),
    ("string body", b'"question"', JSON, 422, "valid dictionary"),
    ("null body", b"null", JSON, 422, "valid dictionary"),
    ("empty body", b"", JSON, 422, "Field required"),
    ("whitespace body", b"   \n ", JSON, 422, "Field required"),
    ("text/plain body", b"{" + Q + b"}", {"content-type": "text/plain"}, 422, ""),
    ("json+suffix type", b"{not json", {"content-type": "application/vnd.api+json"}, 400, "not valid JSON"),
    ("over the cap", b"{" + Q + b', "pad": "' + b"x" * MAX_BODY_BYTES + b'"}', JSON, 413, "limit"),
    ("question of wrong type", b'{"question": 5, "user": "u-support"}', JSON, 422, "question"),
    ("budget as bool", b"{" + Q + b', "budget": true}', JSON, 422, "budget"),
    ("duplicate keys", b'{"question": 1, ' + Q + b"}", JSON, 200, ""),
    ("control characters", b'{"question": "cache\\u0000\\u001b[31m", "user": "u-support"}', JSON, 200, ""),
    ("as_of path", b"{" + Q + b', "as_of": "/etc/passwd"}', JSON, 400, "expected an ISO timestamp"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("serve-hardening"), run_ingest, {"u-support": ["support"]}) as s:
        yield s


def leaks(served, raw: bytes) -> list[bytes]:
    """Whatever a response must never carry: a traceback, the workspace's or the installation's folders."""
    marks = [b"Traceback", b'File "', str(served["root"]).encode(), str(served["ws"].resolve()).encode(),
             str(REPO).encode(), sys.prefix.encode(), b"/tmp/", b"/work/", b"site-packages"]
    return [m for m in marks if m in raw]


def assert_error(served, r: httpx.Response, status: int, words: str = "") -> None:
    raw = r.content
    assert r.status_code == status, (status, raw[:300])
    assert not leaks(served, raw), raw[:300]
    if status >= 400:
        assert r.headers["content-type"] == "application/json"
        body = json.loads(raw)
        assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]
        assert "\n" not in body["error"] and raw.count(b"\n") == 0 and len(raw) < 1000
        assert words in body["error"], body["error"]


@pytest.mark.parametrize("name, raw, headers, status, words", BODIES, ids=[b[0] for b in BODIES])
def test_every_malformed_body_gets_the_one_line_json_error(served, name, raw, headers, status, words):
    r = served["client"].post("/retrieve", content=raw, headers=headers)
    assert_error(served, r, status, words)


def test_a_chunked_body_over_the_cap_is_refused_while_it_is_read(served):
    def chunks():
        for _ in range(MAX_BODY_BYTES // 1024 + 8):
            yield b" " * 1024
    r = served["client"].post("/retrieve", content=chunks(), headers=JSON)
    assert "content-length" not in r.request.headers
    assert_error(served, r, 413, "limit")


def test_a_lying_content_length_is_refused_without_waiting_for_the_body(served):
    host, port = served["client"].base_url.host, served["client"].base_url.port
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {10 * MAX_BODY_BYTES}\r\n\r\n{{}}".encode())
        raw = b""
        while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < int(
                re.search(rb"content-length: (\d+)", raw.lower()).group(1)):
            raw += s.recv(65536)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and json.loads(body)["error"].startswith("the body is larger than")
    assert not leaks(served, raw)


@pytest.mark.parametrize("method, path, status", [("GET", "/nope", 404), ("GET", "/retrieve", 405),
                                                   ("DELETE", "/ask", 405), ("PUT", "/healthz", 405),
                                                   ("POST", "/../../etc/passwd", 404)])
def test_unknown_routes_and_methods_get_the_same_shape(served, method, path, status):
    assert_error(served, served["client"].request(method, path, content=b"{}"), status)


def test_a_damaged_snapshot_pointer_serves_no_data_and_names_no_path(served):
    pointer = served["ws"] / "snapshots" / "CURRENT"
    good = pointer.read_bytes()
    damages = [b"garbage", b"", b"\xff\xfe\x00", b"[1, 2]", b'"CURRENT"', b"{}", b'{"seq": 1}',
               b"[" * 50_000 + b"]" * 50_000, json.dumps(json.loads(good) | {"file": "99999999.duckdb"}).encode(),
               json.dumps(json.loads(good) | {"extra": 1}).encode()]
    try:
        for damage in damages:
            pointer.write_bytes(damage)
            for r in (served["client"].post("/retrieve", json={"question": "cache", "user": "u-support"}),
                      served["client"].get("/healthz")):
                assert r.status_code in (500, 503), (damage[:20], r.content[:300])
                assert_error(served, r, r.status_code)
                assert "the workspace" in r.json()["error"] or "internal error" in r.json()["error"]
        pointer.unlink()
        pointer.mkdir()
        assert_error(served, served["client"].get("/healthz"), 503, "unreadable snapshot pointer")
        pointer.rmdir()
    finally:
        pointer.write_bytes(good)
    assert served["client"].get("/healthz").status_code == 200


def test_the_pointer_message_names_what_is_wrong(served):
    pointer = served["ws"] / "snapshots" / "CURRENT"
    good = pointer.read_bytes()
    try:
        pointer.write_bytes(b"garbage")
        error = served["client"].get("/healthz").json()["error"]
    finally:
        pointer.write_bytes(good)
    assert error == ("the workspace: unreadable snapshot pointer snapshots/CURRENT (JSONDecodeError); nothing is "
                     "served until the next publish")


@pytest.fixture(scope="module")
def served_partitioned(tmp_path_factory):
    """The sample corpus as a partitioned workspace (one store per collection) behind `rag serve`."""
    users = {user_of(c): list(c) for n in (1, 2) for c in itertools.combinations(GROUPS, n)}
    with serving(tmp_path_factory.mktemp("serve-partitioned"), run_partitions, users) as s:
        yield s


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS), min_size=1, max_size=2),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
       budget=st.integers(min_value=50, max_value=9000), method=st.sampled_from(["longrag", "shortchunk", "elite"]))
def test_no_byte_served_from_a_partitioned_workspace_is_unreadable_by_the_caller(served_partitioned, groups, words,
                                                                                   budget, method):
    assert len(served_partitioned["reader"].snapshot().parts) == 3
    r = served_partitioned["client"].post("/retrieve", json={"question": " ".join(words), "user": user_of(groups),
                                                             "budget": budget, "method": method})
    assert_readable_only(served_partitioned["reader"], groups, budget, r)
