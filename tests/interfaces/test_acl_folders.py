"""A folder ACL file's revocation through the real interfaces: `rag retrieve` and `rag history` in a process of
their own, and `rag serve` over HTTP on 127.0.0.1, each seeing it from the next publish on."""
import json
import subprocess
import sys

import pytest
from conftest import REPO
from test_acl_changes import publish, source
from test_server import start_server

from pipelines.cli import _parser as build_parser
from rag.sources.access import ACCESS_FILE
from rag.store.settings import IngestSettings
from resources.sources import SourceSettings


def cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", *args, "--json"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def retrieved(ws, groups: str) -> set[str]:
    out = cli("retrieve", "quarter revenue margins audit ledger", "--workspace", str(ws), "--groups", groups,
              "--budget", "4000")
    return {item["doc_id"] for item in out["items"]}


def test_rag_retrieve_and_rag_history_in_a_process_of_their_own_see_the_revocation(tmp_path, embedder):
    src, ws = source(tmp_path), tmp_path / "ws"
    publish(ws, src, embedder)[0].close()
    assert "finance/q1" in retrieved(ws, "audit")
    (src / "finance" / ACCESS_FILE).write_text("acl: [finance]\n")
    catalog, _, changes, report = publish(ws, src, embedder)
    catalog.close()
    assert report.embedded == 0 and changes.new == []
    assert retrieved(ws, "audit") == set()
    assert "finance/q1" in retrieved(ws, "finance")
    history = cli("history", "finance/q1", "--workspace", str(ws))
    assert [v["acl"] for v in history["versions"]] == [["finance"]]
    [change] = history["acl_changes"]
    assert (change["acl_before"], change["acl"]) == (["audit", "finance"], ["finance"])


def test_rag_serve_hides_a_revoked_folder_from_the_next_request_after_the_publish(tmp_path, embedder):
    src, ws = source(tmp_path), tmp_path / "ws"
    publish(ws, src, embedder)[0].close()
    proc, client = start_server(ws, "--groups-header", "X-Groups")
    try:
        def ids(groups: str) -> set[str]:
            r = client.post("/retrieve", json={"question": "quarter revenue margins audit ledger", "budget": 4000},
                            headers={"X-Groups": groups})
            assert r.status_code == 200, r.text
            return {i["doc_id"] for i in r.json()["items"]}

        assert "finance/q1" in ids("audit")
        (src / "finance" / ACCESS_FILE).write_text("acl: [finance]\n")
        publish(ws, src, embedder)[0].close()
        assert ids("audit") == set()
        assert "finance/q1" in ids("finance")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_acl_from_setting_reaches_every_run_from_the_environment_the_cli_and_the_dagster_resource(tmp_path):
    settings = IngestSettings.from_env({"RAG_ACL_FROM": "posix,everyone"}, str(tmp_path), [str(tmp_path)])
    assert settings.acl_from == "posix,everyone"
    assert SourceSettings.of(settings).settings().acl_from == "posix,everyone"
    assert build_parser().parse_args(["ingest", "--source", ".", "--acl-from", "posix"]).acl_from == "posix"
    with pytest.raises(ValueError, match="RAG_ACL_FROM='groups': expected 'posix' or 'posix,everyone'"):
        IngestSettings(acl_from="groups")
