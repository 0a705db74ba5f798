"""The production topology's scenario on real servers (bench/production.py): Dagster's instance on PostgreSQL, the
daemon's queued run coordinator launching the sensor's partition runs two at a time, each in an empty folder with its
own HOME (bench/pod_launcher.py), the code server and its sensor in another, the index, the snapshots and each
store's checkpoint in an S3-compatible bucket, and `rag serve` in a folder of its own answering 8 clients
throughout; a run launched for a partition whose sensor run is still queued or running waits for it; a run killed
while it publishes is failed by the daemon's run monitoring, retried, and its retry (in another empty folder)
publishes what it was publishing.

The clients pause two seconds between requests: the rule is that every answer is readable by its caller while
publishes swap snapshots, not how many answers a saturated server gives (bench/production.py measures that with no
pause); unpaced, they took a core from the runs the scenario waits for."""
import pytest

from bench import production, topology


@pytest.mark.slow
def test_the_daemon_runs_four_partitions_two_at_a_time_while_serve_answers_from_the_bucket(tmp_path):
    try:
        result = production.run("production", tmp_path / "scenario", clients=8, think_s=2.0)
    except topology.ServerMissing as err:
        pytest.fail(str(err))
    assert result["partitions"] == ["corpus/installation", "corpus/maintenance", "corpus/operations",
                                    "corpus/security"]
    assert result["twice_partitions"] == [production.TWICE] * 2 and result["twice_contended"]
    assert result["failed_runs"] == []
    assert result["max_runs_at_once"] == 2
    assert not result["same_partition_runs_overlap"]
    killed = result["killed_mid_publish"]
    assert killed["killed_in_step"] == ["subchunk_index"]
    assert killed["retry_status"] == "SUCCESS" and killed["retry_strategy"] == "ALL_STEPS"
    assert killed["retry_checks"] > 0 and killed["retry_checks_failed"] == []
    assert killed["served_versions"] == ["2027"]
    assert killed["requests_answered_meanwhile"] > 0   # serve answered between the kill and the retry's publish
    serve = result["serve"]
    assert serve["requests"] > 0 and serve["errors"] == 0 and serve["leaks"] == 0, serve["error_examples"]
    assert result["served_partitions"] == result["partitions"]
    stored = result["bytes"]
    assert stored["bucket_index"] > 0 and stored["bucket_snapshots"] > 0 and stored["writer_local_index"] == 0
    assert stored["reader_local_snapshots"] > 0 and stored["postgres_dagster"] > 0
    # Every run checkpointed its store; a partition's later runs (the launched one, the retry) restored theirs.
    assert len(stored["runs_checkpointed_bytes"]) >= 6 and sum(b > 0 for b in stored["runs_restored_bytes"]) >= 2
