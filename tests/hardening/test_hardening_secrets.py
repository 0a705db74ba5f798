"""No secret in any message, log or Dagster event: every URL setting carries a password or key, is broken in several
ways, and each real command (ingest, retrieve, ask, serve) and a real Dagster materialisation is searched for it.

Every secret below contains SECRET, which no other output holds: any leak of any of them is a hit."""
import os
import subprocess
import sys
import time

import dagster as dg
import httpx
import pytest
import yaml
from conftest import REPO
from dagster._serdes import serialize_value
from hardening_helpers import good, write
from hypothesis import example, given
from hypothesis import strategies as st
from servers import postgres  # noqa: F401 (fixture)
from test_server import free_port

from assets.ingest import ingest_assets, ingest_checks
from pipelines.ingest_run import run_ingest
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings
from rag.store.url_settings import UrlSettingError, masked, redact

SECRET = "S3CRET"
KEYS = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID", "AWS_SECRET_ACCESS_KEY": f"{SECRET}-aws-key",
        "OPENAI_API_KEY": f"sk-{SECRET}-openai-key"}
URL_SETTINGS = ("RAG_WRITER_LOCK_URL", "RAG_LANCE_URI", "RAG_SNAPSHOT_URI", "OPENAI_BASE_URL", "AWS_ENDPOINT_URL")

# setting -> {breakage: value}; each is refused (or, where it is well formed, fails) without its secret in any output.
BROKEN = {
    "RAG_WRITER_LOCK_URL": {
        "bad percent escape": f"postgresql://dagster:{SECRET}PW%zz@127.0.0.1:1/dagster",
        "one slash": f"postgresql:/dagster:{SECRET}PW@127.0.0.1:1/dagster",
        "no scheme": f"dagster:{SECRET}PW@127.0.0.1:1/dagster",
        "port out of range": f"postgresql://dagster:{SECRET}PW@127.0.0.1:99999/dagster",
        "port not a number": f"postgresql://dagster:{SECRET}PW@127.0.0.1:5x/dagster",
        "password where the port goes": f"postgresql://dagster:{SECRET}PW",
    },
    "RAG_LANCE_URI": {
        "credentials in the URI": f"s3://AKIAEXAMPLEKEYID:{SECRET}-lance@bucket/index",
        "one slash": f"s3:/AKIAEXAMPLEKEYID:{SECRET}-lance@bucket/index",
        "another scheme": f"postgresql://dagster:{SECRET}-lance@127.0.0.1:1/index",
        "key in the query": f"s3://bucket/index?secret_access_key={SECRET}-lance",
        "bad port": f"s3://AKIAEXAMPLEKEYID:{SECRET}-lance@bucket:99999/index",
    },
    "RAG_SNAPSHOT_URI": {
        "credentials in the URI": f"s3://AKIAEXAMPLEKEYID:{SECRET}-snap@bucket/snapshots",
        "one slash": f"s3:/AKIAEXAMPLEKEYID:{SECRET}-snap@bucket/snapshots",
        "no scheme": f"AKIAEXAMPLEKEYID:{SECRET}-snap@bucket/snapshots",
        "bad percent escape": f"s3://AKIAEXAMPLEKEYID:{SECRET}%zz@bucket/snapshots",
    },
    "OPENAI_BASE_URL": {
        "no scheme": f"user:{SECRET}-llm@127.0.0.1:1/v1",
        "one slash": f"http:/user:{SECRET}-llm@127.0.0.1:1/v1",
        "port out of range": f"http://user:{SECRET}-llm@127.0.0.1:70000/v1",
        "bad percent escape": f"http://user:{SECRET}%zz@127.0.0.1:1/v1",
    },
    "AWS_ENDPOINT_URL": {
        "no scheme": f"AKIAEXAMPLEKEYID:{SECRET}-endpoint@127.0.0.1:1",
        "port out of range": f"http://AKIAEXAMPLEKEYID:{SECRET}-endpoint@127.0.0.1:99999",
    },
}
# Well formed, but nothing answers on 127.0.0.1:1.
UNREACHABLE = {"RAG_WRITER_LOCK_URL": f"postgresql://dagster:{SECRET}PW@127.0.0.1:1/dagster",
               "OPENAI_BASE_URL": f"http://user:{SECRET}-llm@127.0.0.1:1/v1?api_key={SECRET}-query-key"}
USES = {"RAG_WRITER_LOCK_URL": ["ingest"], "RAG_LANCE_URI": ["ingest", "retrieve", "serve"],
        "RAG_SNAPSHOT_URI": ["ingest", "retrieve"], "OPENAI_BASE_URL": ["ask", "serve"],
        "AWS_ENDPOINT_URL": ["ingest", "retrieve"]}
CASES = [(command, name, breakage) for name, values in BROKEN.items() for breakage in values
         for command in USES[name]]
QUESTION = "How long does the offline cache hold telemetry?"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A small published workspace and a users file, made without any secret-bearing setting."""
    root = tmp_path_factory.mktemp("secrets")
    corpus = root / "corpus"
    write(corpus, "cache.md", good("edge-offline-cache", "The offline cache holds telemetry for 72 hours."))
    write(corpus, "boot.md", good("gateway-boot", "The gateway boots from its second partition after an update."))
    run_ingest(IngestSettings(workspace=root / "ws", sources=[corpus]))
    (root / "users.yaml").write_text(yaml.safe_dump({"u-support": ["support"]}))
    return root


def _env(**settings: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in URL_SETTINGS}
    return {**env, **KEYS, **settings}


def _command(command: str, root, env: dict) -> subprocess.CompletedProcess:
    ws = str(root / "ws")
    argv = {"ingest": ["ingest", "--source", str(root / "corpus"), "--workspace", str(root / "ws-new")],
            "retrieve": ["retrieve", QUESTION, "--workspace", ws, "--groups", "support"],
            "ask": ["ask", QUESTION, "--workspace", ws, "--groups", "support", "--reader", "endpoint"],
            "serve": ["serve", "--workspace", ws, "--users-file", str(root / "users.yaml"), "--port",
                      str(free_port()), "--reader", "endpoint" if "OPENAI_BASE_URL" in env else "extractive"]}
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *argv[command]], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("command, name, breakage", CASES)
def test_a_malformed_url_setting_is_refused_by_name_without_its_secret(published, command, name, breakage):
    r = _command(command, published, _env(**{name: BROKEN[name][breakage]}))
    assert SECRET not in r.stdout + r.stderr, r.stderr
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"rag {command}: error: {name}: "), r.stderr
    assert "unexpected" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command, name", [("ingest", "RAG_WRITER_LOCK_URL"), ("ask", "OPENAI_BASE_URL")])
def test_an_unreachable_service_is_reported_without_its_secret(published, command, name):
    r = _command(command, published, _env(**{name: UNREACHABLE[name]}))
    assert SECRET not in r.stdout + r.stderr, r.stderr
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unexpected" not in r.stderr, r.stderr
    assert "127.0.0.1:1" in r.stderr and ":***@" in r.stderr
    if name == "RAG_WRITER_LOCK_URL":
        assert r.stderr.startswith(f"rag ingest: error: {name}: cannot connect to "), r.stderr


@pytest.mark.slow
def test_a_real_postgres_refusing_the_lease_is_reported_without_its_secret(published, request):
    url = request.getfixturevalue("postgres").replace("postgresql://rag@", f"postgresql://rag:{SECRET}PW@").rsplit("/", 1)[0] + "/no_such_db"
    r = _command("ingest", published, _env(RAG_WRITER_LOCK_URL=url))
    assert SECRET not in r.stdout + r.stderr, r.stderr
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("rag ingest: error: RAG_WRITER_LOCK_URL: cannot connect to postgresql://rag:***@")
    assert 'database "no_such_db" does not exist' in r.stderr


@pytest.mark.slow
def test_a_server_with_secrets_in_its_settings_answers_and_logs_none_of_them(published):
    port = free_port()
    env = _env(OPENAI_BASE_URL=UNREACHABLE["OPENAI_BASE_URL"], RAG_WRITER_LOCK_URL=UNREACHABLE["RAG_WRITER_LOCK_URL"])
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "serve", "--workspace", str(published / "ws"),
                             "--users-file", str(published / "users.yaml"), "--port", str(port), "--reader",
                             "endpoint"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bodies = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            deadline = time.monotonic() + 300
            while not _up(client):
                assert proc.poll() is None and time.monotonic() < deadline, "rag serve did not come up"
                time.sleep(0.5)
            asked = client.post("/ask", json={"question": QUESTION, "user": "u-support"})
            found = client.post("/retrieve", json={"question": QUESTION, "user": "u-support"})
            bodies = [asked.text, found.text, client.get("/healthz").text]
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert asked.status_code == 502 and ":***@127.0.0.1:1" in asked.json()["error"], asked.text
    assert found.status_code == 200
    assert SECRET not in "".join(bodies) + out + err


def _up(client: httpx.Client) -> bool:
    try:
        return client.get("/healthz").status_code == 200
    except httpx.TransportError:
        return False


DAGSTER_CASES = {
    "keys and an endpoint URL": ({"OPENAI_BASE_URL": UNREACHABLE["OPENAI_BASE_URL"]}, None),
    "lease URL with a bad escape": ({"RAG_WRITER_LOCK_URL": BROKEN["RAG_WRITER_LOCK_URL"]["bad percent escape"]},
                                    "RAG_WRITER_LOCK_URL"),
    "unreachable lease": ({"RAG_WRITER_LOCK_URL": UNREACHABLE["RAG_WRITER_LOCK_URL"]}, "RAG_WRITER_LOCK_URL"),
    "snapshot URI with credentials": ({"RAG_SNAPSHOT_URI": BROKEN["RAG_SNAPSHOT_URI"]["credentials in the URI"]},
                                      "RAG_SNAPSHOT_URI"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DAGSTER_CASES))
def test_no_dagster_event_or_run_record_carries_a_secret(published, tmp_path, monkeypatch, capfd, case):
    settings_env, failing = DAGSTER_CASES[case]
    for key, value in {**KEYS, **settings_env}.items():
        monkeypatch.setenv(key, value)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        resources = workspace_resources(IngestSettings(workspace=tmp_path / "ws", sources=[published / "corpus"]))
        result = dg.materialize([*ingest_assets, *ingest_checks], resources=resources, instance=instance,
                                raise_on_error=False)
        records = "\n".join(serialize_value(r) for r in instance.all_logs(result.run_id))
        run = serialize_value(instance.get_run_by_id(result.run_id))
    printed = capfd.readouterr()
    assert SECRET not in records + run + printed.out + printed.err
    assert result.success is (failing is None)
    if failing:
        assert f"{failing}: " in records
    else:
        assert "table_uri" in records


@pytest.mark.parametrize("value", BROKEN["RAG_LANCE_URI"].values())
def test_ingest_settings_refuse_a_malformed_index_uri_by_name(value):
    with pytest.raises(UrlSettingError) as caught:
        IngestSettings(lance_uri=value)
    assert str(caught.value).startswith("RAG_LANCE_URI: ") and SECRET not in str(caught.value)


SHAPES = ["postgresql://dagster:{pw}@127.0.0.1:5432/dagster", "postgresql:/dagster:{pw}@db/dagster",
          "dagster:{pw}@127.0.0.1:1/dagster", "http://{pw}@127.0.0.1:1/v1", "s3://AKIAEXAMPLEKEYID:{pw}@bucket/x",
          "http://127.0.0.1:1/v1?api_key={pw}&model=m"]


@given(password=st.text(st.characters(exclude_characters="@/?#&=", exclude_categories=["Cs"]), min_size=4),
       shape=st.sampled_from(SHAPES))
@example(password="000:", shape="dagster:{pw}@127.0.0.1:1/dagster")  # a colon in the password of a URL without "//"
@example(password="000:", shape="http://{pw}@127.0.0.1:1/v1")  # a lone token ending in a colon is all secret
@example(password="00:0", shape="http://{pw}@127.0.0.1:1/v1")  # user "00", secret "0": quoted whole, masked whole
def test_a_url_shown_masked_or_redacted_never_holds_its_password(password, shape):
    url = shape.format(pw=password)
    if password in shape.replace("{pw}", ""):
        return   # the password is also a user or host name, shown as such
    assert password not in masked(url)
    message = f"invalid dsn: invalid percent-encoded token: {password!r}, from {url}"
    assert password not in redact(message, {"RAG_WRITER_LOCK_URL": url})
