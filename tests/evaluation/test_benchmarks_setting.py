"""Where benchmarks come from: one setting (--benchmarks DIR, else RAG_BENCHMARKS, else the slices in the repository)."""
import hashlib
import json
import subprocess
import sys

import pytest
from conftest import REPO

from rag.sources.benchmarks import BUNDLED, BenchmarksError, benchmark_dir, benchmarks_root, load_questions

NAMES = ("hotpotqa", "musique", "2wikimultihopqa", "cmrc2018", "drcd")


def test_without_a_setting_the_slices_in_the_repository_are_used(monkeypatch):
    monkeypatch.delenv("RAG_BENCHMARKS", raising=False)
    assert benchmarks_root() == BUNDLED == REPO / "samples" / "benchmarks"
    assert benchmark_dir("hotpotqa") == BUNDLED / "hotpotqa"


def test_the_option_wins_over_the_environment_which_wins_over_the_slices(monkeypatch, tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "option").mkdir()
    monkeypatch.setenv("RAG_BENCHMARKS", str(tmp_path / "env"))
    assert benchmarks_root() == tmp_path / "env"
    assert benchmarks_root(tmp_path / "option") == tmp_path / "option"


@pytest.mark.parametrize("origin", ["--benchmarks", "RAG_BENCHMARKS"])
def test_a_named_folder_that_is_missing_is_a_one_line_error_naming_it(monkeypatch, tmp_path, origin):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv("RAG_BENCHMARKS", str(missing) if origin == "RAG_BENCHMARKS" else str(tmp_path))
    with pytest.raises(BenchmarksError) as err:
        benchmarks_root(missing if origin == "--benchmarks" else None)
    assert str(err.value) == f"{missing}: no such benchmarks folder (named by {origin})"
    with pytest.raises(BenchmarksError, match="not a benchmark folder"):
        benchmark_dir("hotpotqa", tmp_path)


def test_a_bench_script_given_a_missing_folder_stops_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "incremental.py"), "--benchmarks", str(tmp_path / "x")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"incremental.py: error: {tmp_path / 'x'}: no such benchmarks folder (named by --benchmarks)\n"


@pytest.mark.parametrize("name", NAMES)
def test_each_slice_has_50_questions_whose_gold_documents_it_carries(name):
    questions = load_questions(BUNDLED / name)
    docs = [json.loads(line) for line in (BUNDLED / name / "docs.jsonl").open(encoding="utf-8")]
    ids = [d["doc_id"] for d in docs]
    assert len(questions) == 50 and len(ids) == len(set(ids))
    assert all(set(q.gold_doc_ids) <= set(ids) for q in questions)


def test_the_slices_are_the_files_their_manifest_names():
    manifest = json.loads((BUNDLED / "MANIFEST.json").read_text())
    for name in NAMES:
        for file, sha in manifest[name]["output_sha256"].items():
            assert hashlib.sha256((BUNDLED / name / file).read_bytes()).hexdigest() == sha, (name, file)


def test_making_slices_twice_from_the_same_folder_gives_the_same_bytes(tmp_path):
    """bench/make_slices.py on the bundled slices themselves (a full folder in the same layout), twice."""
    outs = []
    for run in ("a", "b"):
        subprocess.run([sys.executable, str(REPO / "bench" / "make_slices.py"), str(BUNDLED), "--out", str(tmp_path / run),
                        "--questions", "7", "--zh-questions", "5"], check=True, capture_output=True, timeout=300)
        outs.append({p.relative_to(tmp_path / run): p.read_bytes() for p in (tmp_path / run).rglob("*.jsonl")})
    assert outs[0] == outs[1] and len(outs[0]) == 2 * len(NAMES)
    hotpot = load_questions(tmp_path / "a" / "hotpotqa")
    docs = {json.loads(line)["doc_id"] for line in (tmp_path / "a" / "hotpotqa" / "docs.jsonl").open()}
    assert len(hotpot) == 7 and all(set(q.gold_doc_ids) <= docs for q in hotpot)
