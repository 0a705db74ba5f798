import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the sample corpus that a test may edit, delete from and re-version."""
    dest = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", dest)
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture(scope="session")
def embedder():
    from rag.embedding import Embedder

    return Embedder(threads=1)


@pytest.fixture(scope="session")
def multilingual():
    from rag.embedding import MultilingualEmbedder

    return MultilingualEmbedder(threads=1)
