"""The CLI contract: every command, given bad input, exits 2 with exactly one line on stderr and no traceback."""
import os
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLES

from pipelines.ingest_run import run_ingest
from rag.store.settings import IngestSettings

Q = "How long does the offline cache hold telemetry?"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    run_ingest(IngestSettings(workspace=str(root / "ws"), sources=[str(SAMPLES / "corpus")]))
    files = {
        "list.yaml": "- alice\n- bob\n", "null.yaml": "alice: null\n", "numbers.yaml": "alice: [1, 2]\n",
        "nested.yaml": "alice: [[support]]\n", "mapping.yaml": "alice: {group: support}\n",
        "scalar.yaml": "just a string\n", "broken.yaml": "alice: [support\n", "ok.yaml": "alice: [support]\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "a-file").write_text("not a folder")
    (root / "corrupt").mkdir()
    (root / "corrupt" / "catalog.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    corrupt_snapshot = root / "corrupt-snapshot"
    run_ingest(IngestSettings(workspace=str(corrupt_snapshot), sources=[str(SAMPLES / "corpus" / "security")]))
    for snap in (corrupt_snapshot / "snapshots" / "segments").glob("*.parquet"):
        snap.write_bytes(b"garbage" * 1000)
    (root / "not-a-benchmark").mkdir()
    return root


def rag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")})


CASES = {
    "ingest: missing source": ("ingest", "--source", "{root}/nope", "--workspace", "{root}/new"),
    "ingest: workspace is a file": ("ingest", "--source", str(SAMPLES / "corpus"), "--workspace", "{root}/a-file"),
    "ingest: corrupt catalog": ("ingest", "--source", str(SAMPLES / "corpus"), "--workspace", "{root}/corrupt"),
    "ingest: no source flag": ("ingest", "--workspace", "{root}/new"),
    "retrieve: nothing published": ("retrieve", Q, "--workspace", "{root}/empty", "--groups", "support"),
    "retrieve: workspace is a file": ("retrieve", Q, "--workspace", "{root}/a-file", "--groups", "support"),
    "retrieve: corrupt catalog": ("retrieve", Q, "--workspace", "{root}/corrupt", "--groups", "support"),
    "retrieve: corrupt snapshot": ("retrieve", Q, "--workspace", "{root}/corrupt-snapshot", "--groups", "support"),
    "retrieve: zero budget": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "support", "--budget", "0"),
    "retrieve: budget not a number": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "x", "--budget", "k"),
    "retrieve: empty groups": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", " , "),
    "retrieve: bad as-of": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "support", "--as-of", "soon"),
    "retrieve: unknown publish": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "support", "--as-of",
                                  "publish:999"),
    "retrieve: as-of for elite": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "support", "--method",
                                  "elite", "--as-of", "publish:1"),
    "retrieve: unknown method": ("retrieve", Q, "--workspace", "{root}/ws", "--groups", "support", "--method", "x"),
    "retrieve: question too long": ("retrieve", "why " * 800, "--workspace", "{root}/ws", "--groups", "support"),
    "retrieve: user without users file": ("retrieve", Q, "--workspace", "{root}/ws", "--user", "alice"),
    "retrieve: unknown user": ("retrieve", Q, "--workspace", "{root}/ws", "--user", "bob", "--users-file",
                               "{root}/ok.yaml"),
    "retrieve: users file missing": ("retrieve", Q, "--workspace", "{root}/ws", "--user", "a", "--users-file",
                                     "{root}/none.yaml"),
    **{f"retrieve: users file {kind}": ("retrieve", Q, "--workspace", "{root}/ws", "--user", "alice",
                                        "--users-file", f"{{root}}/{kind}.yaml")
       for kind in ("list", "null", "numbers", "nested", "mapping", "scalar", "broken")},
    "ask: nothing published": ("ask", Q, "--workspace", "{root}/empty", "--groups", "support",
                               "--reader", "extractive"),
    "ask: endpoint without a URL": ("ask", Q, "--workspace", "{root}/ws", "--groups", "support", "--reader",
                                    "endpoint"),
    "history: unknown document": ("history", "no-such-doc", "--workspace", "{root}/ws"),
    "history: workspace is a file": ("history", "x", "--workspace", "{root}/a-file"),
    "eval: not a folder": ("eval", "--benchmark", "{root}/nope", "--workspace", "{root}/e", "--out", "{root}/o"),
    "eval: not a benchmark": ("eval", "--benchmark", "{root}/not-a-benchmark", "--workspace", "{root}/e",
                              "--out", "{root}/o"),
    "eval: bad budgets": ("eval", "--benchmark", "{root}", "--workspace", "{root}/e", "--out", "{root}/o",
                          "--budgets", "1k"),
    "serve: no way to know callers": ("serve", "--workspace", "{root}/ws"),
    "serve: users file a list": ("serve", "--workspace", "{root}/ws", "--users-file", "{root}/list.yaml"),
    "serve: nothing published": ("serve", "--workspace", "{root}/empty", "--users-file", "{root}/ok.yaml"),
    "demo: workspace is a file": ("demo", "--workspace", "{root}/a-file"),
    "no command": (),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line(ws, case):
    args = [a.replace("{root}", str(ws)) for a in CASES[case]]
    result = rag(*args)
    assert result.returncode == 2, (result.stdout[-300:], result.stderr[-300:])
    lines = result.stderr.strip().splitlines()
    if not args:  # no command: the help goes to stdout
        assert "COMMAND" in result.stdout
        return
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rag {args[0]}: error: ") and "Traceback" not in result.stderr
