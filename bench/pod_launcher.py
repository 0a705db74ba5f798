"""A Dagster run launcher that starts each run as a pod would: in an empty folder of its own, with its own HOME.

`dagster api execute_run` in a new folder under `root` (its workspace `ws/`, its `home/`, nothing else), the model
cache only from `model_cache` (the image's, built once before any run, as the Dockerfile does). Nothing a run
writes is seen by another: the bucket and Postgres are all they share. The daemon's run monitoring asks it for a
run's health (its process, by pid), so a run whose process is killed is failed and retried, as a lost pod is.
Used by tests/production and bench/production.py through the instance's `run_launcher` setting.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from dagster import Field, Noneable
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, RunLauncher, WorkerStatus
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData, serialize_value

PID_TAG = "rag/pod_pid"
FOLDER_TAG = "rag/pod_folder"


class EmptyFolderRunLauncher(RunLauncher, ConfigurableClass):
    """Each run in a fresh folder with a fresh HOME; health from its process."""

    def __init__(self, root: str, model_cache: str | None = None, inst_data: ConfigurableClassData | None = None):
        self.root, self.model_cache, self._inst_data = Path(root), model_cache, inst_data
        self._procs: dict[int, subprocess.Popen] = {}
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return {"root": Field(str), "model_cache": Field(Noneable(str), is_required=False, default_value=None)}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: dict) -> "EmptyFolderRunLauncher":
        return cls(inst_data=inst_data, **config_value)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        self.root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"run-{run.run_id[:8]}-", dir=self.root))
        (folder / "home").mkdir()
        env = {**os.environ, "HOME": str(folder / "home"), "RAG_WORKSPACE": str(folder / "ws"),
               "XDG_CACHE_HOME": str(folder / "home" / ".cache")}
        env.pop("RAG_MODEL_CACHE", None)
        if self.model_cache:
            env["RAG_MODEL_CACHE"] = self.model_cache
        args = ExecuteRunArgs(job_origin=run.job_code_origin, run_id=run.run_id,
                              instance_ref=self._instance.get_ref(), set_exit_code_on_failure=True)
        command = [sys.executable, "-m", "dagster", "api", "execute_run", serialize_value(args)]
        with open(folder / "run.log", "w") as log:
            proc = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._procs[proc.pid] = proc
        threading.Thread(target=proc.wait, daemon=True).start()   # reaped at once: a dead pid is gone, not a zombie
        self._instance.add_run_tags(run.run_id, {PID_TAG: str(proc.pid), FOLDER_TAG: str(folder)})
        self._instance.report_engine_event(f"Started process for run (pid: {proc.pid}) in {folder}.", run,
                                           cls=self.__class__)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run) -> CheckRunHealthResult:
        pid = int(run.tags.get(PID_TAG, "0"))
        proc = self._procs.get(pid)
        if proc is not None and proc.poll() is not None:
            return CheckRunHealthResult(WorkerStatus.SUCCESS if proc.returncode == 0 else WorkerStatus.FAILED,
                                        f"run process exited with status {proc.returncode}")
        if proc is None and not (pid and Path(f"/proc/{pid}").exists()):
            return CheckRunHealthResult(WorkerStatus.NOT_FOUND, f"no process {pid}")
        return CheckRunHealthResult(WorkerStatus.RUNNING)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        proc = self._procs.get(int(run.tags.get(PID_TAG, "0"))) if run else None
        if proc is None or proc.poll() is not None:
            return False
        self._instance.report_run_canceling(run)
        proc.terminate()
        return True
