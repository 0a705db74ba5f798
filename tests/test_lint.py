"""The code passes pyflakes' rules (unused or undefined names) and isort's import order, as ruff checks them."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO

CHECKED = ["rag", "assets", "resources", "pipelines", "tests", "bench"]


def test_the_code_has_no_unused_or_undefined_names_and_sorted_imports():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F,I", "--no-cache", *CHECKED],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
