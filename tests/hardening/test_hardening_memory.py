"""Memory stays flat. One embedder per process and settings, whoever asks for it; many
in-process CLI calls (a notebook, an orchestrator task) do not keep a model each; `rag serve` across publishes
keeps its RSS and open files (bench/serve_memory.py, here with fewer publishes)."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO

from pipelines.cli import main
from pipelines.ingest_run import run_ingest
from rag.elite import _default_embedder
from rag.models.embedders import load_embedder
from rag.store.settings import IngestSettings


def rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_one_embedder_per_process_and_settings_even_when_threads_race():
    got = []
    threads = [threading.Thread(target=lambda: got.append(load_embedder("minilm", threads=1))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(e) for e in got}) == 1
    assert _default_embedder() is got[0]   # ELITE's importance encoder is the same instance
    assert load_embedder("minilm", batch_size=8, threads=1) is not got[0]   # other settings, another instance


@pytest.mark.slow
def test_repeated_in_process_cli_calls_keep_memory_flat(corpus, workspace, capsys):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    argv = ["retrieve", "How long does the offline cache hold telemetry?", "--workspace", str(workspace),
            "--groups", "support", "--json"]
    for _ in range(10):   # warm: the model, the snapshot's caches, the allocator's arenas
        assert main(argv) == 0
    capsys.readouterr()
    base = rss_mib()
    calls = 50   # each a whole CLI retrieve (~0.35 CPU s; 100 cost ~17 s more); the bound scales with the calls
    for i in range(calls):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["items"][0]["doc_id"] == "edge-offline-cache"
    # Before the fix each call kept its own ~90 MB model: 300 calls grew by tens of GB (the 78th failed to mmap).
    # The bound fails for anything that keeps more than 1.5 MiB a call.
    assert rss_mib() - base < 1.5 * calls, f"RSS grew {rss_mib() - base:.0f} MiB over {calls} calls"


@pytest.mark.slow
def test_serve_memory_and_open_files_stay_flat_across_publishes(tmp_path):
    out = tmp_path / "serve-memory.json"
    subprocess.run([sys.executable, "bench/serve_memory.py", "--publishes", "25", "--warmup", "5", "--out", str(out)],
                   cwd=REPO, check=True, timeout=1800, capture_output=True)
    result = json.loads(out.read_text())
    assert result["rss_growth"] <= 0.10, result
    assert result["other_files_final"] == result["other_files_baseline"], result
    assert result["other_files_max"] <= result["other_files_baseline"] + 2, result
    assert result["mapped_beyond_served"] <= 0, result  # every array it maps is one of the snapshot it serves
