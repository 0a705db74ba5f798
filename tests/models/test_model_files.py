"""The embedder's weights are checked by sha256 before anything loads them."""
import hashlib
import shutil

import pytest

from rag.models.files import WEIGHTS_FILE, ModelIntegrityError, model_dir, verified_model_dir


@pytest.fixture
def model_copy(tmp_path):
    """The installed model folder without its weights (the small files only)."""
    folder = tmp_path / "model"
    shutil.copytree(model_dir(), folder, ignore=shutil.ignore_patterns(WEIGHTS_FILE))
    return folder


def test_installed_model_passes_the_integrity_check():
    folder = verified_model_dir()
    assert folder == model_dir()
    assert (folder / WEIGHTS_FILE).is_file()


def test_tampered_weights_are_refused_naming_the_file(model_copy):
    (model_copy / WEIGHTS_FILE).write_bytes(b"not the real weights")
    with pytest.raises(ModelIntegrityError) as err:
        verified_model_dir(model_copy)
    assert str(model_copy / WEIGHTS_FILE) in str(err.value)
    assert "refusing" in str(err.value)


def test_missing_weights_are_refused_naming_the_file(model_copy):
    with pytest.raises(ModelIntegrityError, match="weights not found") as err:
        verified_model_dir(model_copy)
    assert str(model_copy / WEIGHTS_FILE) in str(err.value)


def test_weights_matching_the_expected_digest_pass(model_copy):
    (model_copy / WEIGHTS_FILE).write_bytes(b"stand-in weights")
    assert verified_model_dir(model_copy, hashlib.sha256(b"stand-in weights").hexdigest()) == model_copy

