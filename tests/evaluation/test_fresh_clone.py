"""The promise of the README: a clone of this repository alone passes its tests, with nothing beside it.

The current commit is cloned into an empty temporary folder (no sibling folders to read by accident) and the evaluation
tests run there on the installed environment (this interpreter, PYTHONPATH = the clone), all but the workspace
question set (it reads samples/ only and costs minutes) and the local-LLM sample (the outer run has it).
Uncommitted changes are not in a clone: this checks what was committed.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def git(*args: str, cwd=REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist has nothing to clone)")
    alone = tmp_path_factory.mktemp("alone")
    git("clone", "--quiet", "--no-hardlinks", str(REPO), str(alone / "repo"), cwd=alone)
    git("checkout", "--quiet", git("rev-parse", "HEAD"), cwd=alone / "repo")
    return alone / "repo"


def clone_env(clone) -> dict[str, str]:
    # RAG_TEST_EMBEDDINGS: the clone's run embeds for itself, not from this run's shared vectors (tests/conftest.py).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "RAG_BENCHMARKS", "RAG_TEST_EMBEDDINGS", "DAGSTER_HOME"))}
    return env | {"PYTHONPATH": str(clone), "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_clone_stands_alone_and_imports_its_own_code(clone):
    assert [p.name for p in clone.parent.iterdir()] == ["repo"]
    found = subprocess.run([sys.executable, "-c", "import rag.sources.benchmarks as b; print(b.__file__); print(b.benchmarks_root())"],
                           cwd=clone, env=clone_env(clone), capture_output=True, text=True, check=True).stdout.split()
    assert found == [str(clone / "rag" / "sources" / "benchmarks.py"), str(clone / "samples" / "benchmarks")]
    assert sorted(p.name for p in (clone / "samples" / "benchmarks").iterdir() if p.is_dir()) == \
        ["2wikimultihopqa", "cmrc2018", "drcd", "hotpotqa", "musique"]


def test_the_evaluation_tests_pass_in_a_clone_with_nothing_beside_it(clone):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/evaluation",
                           "--ignore", "tests/evaluation/test_fresh_clone.py",
                           "--ignore", "tests/evaluation/test_eval_workspace_set.py", "-k", "not local_llm"],
                          cwd=clone, env=clone_env(clone), capture_output=True, text=True, timeout=3000)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and not re.search(r"failed|error", summary), tail
    assert "FileNotFoundError" not in done.stdout + done.stderr
