"""How `make test` spreads tests over xdist workers (tests/conftest.py), checked on a toy suite in a real `-n 2` run."""
import os
import subprocess
import sys

from conftest import REPO

TOY = '''
import os, pytest

def worker():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.fixture(scope="module")
def shared():
    return worker()

@pytest.mark.parametrize("i", range(4))
def test_shares(shared, i):
    assert shared == worker(), "a module fixture was used on another worker than the one that built it"

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    print("ran on", worker())

@pytest.mark.slow
def test_heavy():
    pass
'''


def toy_pytest(folder, *args: str) -> subprocess.CompletedProcess:
    (folder / "test_toy.py").write_text(TOY)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *args,
                           "test_toy.py"], cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])})


def test_tests_sharing_a_module_fixture_share_a_worker_and_the_others_spread(tmp_path):
    run = toy_pytest(tmp_path, "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-v")
    assert run.returncode == 0, run.stdout[-2000:]
    ran = {line.split()[-1]: line.split()[0] for line in run.stdout.splitlines()
           if line.startswith("[gw") and "PASSED" in line}
    assert len(ran) == 11
    assert len({gw for nodeid, gw in ran.items() if "test_shares" in nodeid}) == 1
    assert len(set(ran.values())) == 2   # the tests that share nothing use both workers


def test_groups_with_slow_tests_are_handed_out_first(tmp_path):
    run = toy_pytest(tmp_path, "--collect-only", "-q")
    assert run.returncode == 0, run.stdout[-2000:]
    assert run.stdout.splitlines()[0] == "test_toy.py::test_heavy"
