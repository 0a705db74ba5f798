"""Loaded at start-up by every Python process a test starts (tests/conftest.py puts this folder on PYTHONPATH):
once `rag.models.embedders` is imported, its `minilm` loads share document vectors through the run's files
(shared_vectors.py). Nothing else is imported before that, so processes that never embed pay nothing."""
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

MODULE = "rag.models.embedders"


class _ShareVectorsOnImport:
    def find_spec(self, name, path=None, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                _share(module)
            spec.loader.exec_module = exec_module
        return spec


def _share(embedders) -> None:
    # By its path, not its name: a script's own folder comes first on sys.path (bench/ has a shared_vectors.py too).
    here = Path(__file__).with_name("shared_vectors.py")
    spec = importlib.util.spec_from_file_location("_test_shared_vectors", here)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    SharedVectorsEmbedder = module.SharedVectorsEmbedder

    real = embedders._load_embedder

    def load(name, batch_size, threads):
        if name == "minilm":
            return SharedVectorsEmbedder(batch_size=batch_size, threads=threads)
        return real(name, batch_size, threads)
    embedders._load_embedder = load


sys.meta_path.insert(0, _ShareVectorsOnImport())
