"""The production topology's scenario on real servers (bench/production.py): Dagster's instance on PostgreSQL, the
daemon's queued run coordinator launching the sensor's partition runs two at a time, the index and the snapshots in
an S3-compatible bucket, and `rag serve` in a folder of its own answering 8 clients throughout; a run killed while
it publishes is failed by the code server, retried by the daemon, and its retry publishes what it was publishing."""
import pytest

from bench import production, topology


@pytest.mark.slow
def test_the_daemon_runs_four_partitions_two_at_a_time_while_serve_answers_from_the_bucket(tmp_path):
    try:
        result = production.run("production", tmp_path / "scenario", clients=8)
    except topology.ServerMissing as err:
        pytest.fail(str(err))
    assert result["partitions"] == ["corpus/installation", "corpus/maintenance", "corpus/operations",
                                    "corpus/security"]
    assert result["failed_runs"] == []
    assert result["max_runs_at_once"] == 2
    assert not result["same_partition_runs_overlap"]
    killed = result["killed_mid_publish"]
    assert killed["killed_in_step"] == ["subchunk_index"]
    assert killed["retry_status"] == "SUCCESS" and killed["retry_strategy"] == "ALL_STEPS"
    assert killed["retry_checks"] > 0 and killed["retry_checks_failed"] == []
    assert killed["served_versions"] == ["2027"]
    serve = result["serve"]
    assert serve["requests"] > 0 and serve["errors"] == 0 and serve["leaks"] == 0, serve["error_examples"]
    assert result["served_partitions"] == result["partitions"]
    stored = result["bytes"]
    assert stored["bucket_index"] > 0 and stored["bucket_snapshots"] > 0 and stored["writer_local_index"] == 0
    assert stored["reader_local_snapshots"] > 0 and stored["postgres_dagster"] > 0
