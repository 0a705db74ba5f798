"""`rag` as a user runs it: a real subprocess, real files, JSON on stdout, one-line errors on stderr."""
import json
import subprocess
import sys

from conftest import REPO, SAMPLES

from pipelines.cli import main


def rag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_ingest_json_reports_counts_and_a_rerun_embeds_nothing(corpus, workspace, capsys):
    # The first run is the CLI's main in this process (its vectors memoised, tests/conftest.py); the rerun is a
    # process of its own, which knows of the first only what it left on disk.
    assert main(["ingest", "--source", str(corpus), "--workspace", str(workspace), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert {k: counts[k] for k in ("documents", "quarantined", "deleted")} == \
        {"documents": 37, "quarantined": 0, "deleted": 0}
    assert counts["embedded"] == counts["subchunks"] > counts["units"] > 0
    assert counts["checks_passed"] is True

    (corpus / "installation" / "grounding.md").unlink()
    second = json.loads(rag("ingest", "--source", str(corpus), "--workspace", str(workspace), "--json").stdout)
    assert second["deleted"] == 1 and second["documents"] == 36
    assert second["embedded"] == 0


def test_quarantined_inputs_do_not_fail_the_run(workspace):
    result = rag("ingest", "--source", str(SAMPLES / "bad"), "--workspace", str(workspace), "--json")
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert counts["quarantined"] == 23 and counts["documents"] == 5


def test_nothing_readable_exits_nonzero_with_one_line_naming_the_file(workspace):
    result = rag("ingest", "--source", str(SAMPLES / "bad" / "binary.md"), "--workspace", str(workspace))
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("rag ingest: error: no readable documents")
    assert "binary.md: binary file" in line


def test_missing_source_is_a_one_line_error(workspace):
    result = rag("ingest", "--source", "no/such/folder", "--workspace", str(workspace))
    assert result.returncode == 2
    assert result.stderr.strip() == "rag ingest: error: no/such/folder: no such file or folder"


def test_help_explains_every_ingest_flag():
    result = rag("ingest", "--help")
    for flag in ("--source", "--workspace", "--default-acl", "--collection", "--derive-links", "--json"):
        assert flag in result.stdout
