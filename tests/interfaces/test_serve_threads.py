"""A `rag serve` worker runs one BLAS thread: workers are sized one per core, and a threaded product of a query with
the snapshot's vectors spun on the other, busy core (bench note in pipelines/serve_cli.py)."""
from pathlib import Path

from threadpoolctl import threadpool_info, threadpool_limits


def blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_a_serve_worker_limits_blas_to_one_thread(published_sample):
    from pipelines.serve_cli import build_app

    catalog, _ = published_sample
    before = threadpool_limits(limits=2, user_api="blas")  # as a 2-core machine starts a process
    try:
        assert blas_threads() == {2}
        build_app({"workspace": str(Path(catalog.path).parent), "lance_uri": None, "users_file": None,
                   "groups_header": None, "user_header": None, "build_on_request": False,
                   "reader": "extractive"}, warm=False)
        assert blas_threads() == {1}
    finally:
        before.restore_original_limits()
