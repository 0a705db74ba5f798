"""Every sensor tick and schedule tick that requests no run says why on the tick (a skip reason), and keeps its cursor."""
from dataclasses import dataclass
from datetime import datetime, timezone

import dagster as dg
import pytest
from test_ui_metadata import tiny_corpus

from assets.evaluation import evaluation_definitions
from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings

NIGHT = datetime(2026, 12, 2, 4, tzinfo=timezone.utc)
EMPTY = "Sensor function returned an empty result"   # what Dagster shows when a sensor gives no reason


def definitions(tmp_path, sources, partitioned: bool) -> dg.Definitions:
    settings = IngestSettings(workspace=tmp_path / "ws", sources=sources, partitioned=partitioned)
    return build_definitions(workspace_resources(settings))


@dataclass
class Tick:
    run_requests: list
    skip_message: str | None
    cursor: str | None


def tick(defs, sensor_name: str, instance, cursor=None) -> Tick:
    """The sensor's own answer (called directly: the partitions it adds are not validated before they exist)."""
    with dg.build_sensor_context(instance=instance, cursor=cursor) as ctx:
        result = defs.get_sensor_def(sensor_name)(ctx)
    if isinstance(result, dg.SkipReason):
        return Tick([], result.skip_message, cursor)
    assert isinstance(result, dg.SensorResult), result   # never None, a bare list or an empty result
    skip = result.skip_reason.skip_message if result.skip_reason else None
    return Tick(list(result.run_requests or []), skip, result.cursor)


@pytest.mark.parametrize("partitioned", [False, True])
def test_every_tick_that_requests_nothing_gives_its_reason(tmp_path, partitioned):
    (empty := tmp_path / "empty").mkdir()
    defs = definitions(tmp_path, [empty], partitioned)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for sensor in defs.sensors:
            if isinstance(sensor, dg.AutomationConditionSensorDefinition):
                continue   # Dagster's own: it evaluates automation conditions, not our code
            first = tick(defs, sensor.name, instance)
            again = tick(defs, sensor.name, instance, first.cursor)
            for result in (first, again):
                if not result.run_requests:
                    assert result.skip_message and result.skip_message != EMPTY, sensor.name
        for schedule in defs.schedules:
            result = schedule.evaluate_tick(dg.build_schedule_context(instance=instance,
                                                                      scheduled_execution_time=NIGHT))
            if not result.run_requests:
                assert result.skip_message, schedule.name


def test_a_quiet_collection_tick_keeps_its_cursor_and_says_nothing_changed(tmp_path):
    corpus = tiny_corpus(tmp_path / "docs")
    defs = definitions(tmp_path, [corpus], partitioned=True)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first = tick(defs, "collection_changes", instance)
        assert sorted(r.partition_key for r in first.run_requests) == ["docs/one", "docs/two"]
        assert first.skip_message is None
        quiet = tick(defs, "collection_changes", instance, first.cursor)
        assert quiet.run_requests == [] and quiet.cursor == first.cursor
        assert quiet.skip_message == "no change since the last run request in any of the 2 collections"
        (corpus / "two" / "beta.md").write_text((corpus / "two" / "beta.md").read_text() + "\nMore text.\n")
        changed = tick(defs, "collection_changes", instance, quiet.cursor)
        assert [r.partition_key for r in changed.run_requests] == ["docs/two"] and changed.skip_message is None


def test_an_empty_source_and_a_quiet_source_say_so(tmp_path):
    (empty := tmp_path / "empty").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = tick(definitions(tmp_path, [empty], True), "collection_changes", instance)
        assert result.skip_message == f"no collection in {empty}: nothing to ingest"
        corpus = tiny_corpus(tmp_path / "docs")
        defs = definitions(tmp_path, [corpus], partitioned=False)
        first = tick(defs, "source_changes_docs", instance)
        assert len(first.run_requests) == 1
        assert tick(defs, "source_changes_docs", instance, first.cursor).skip_message == \
            f"{corpus}: no change since the last run request"


def test_the_benchmark_sensor_and_the_nightly_evaluation_say_why_they_request_nothing(tmp_path):
    definitions_ = evaluation_definitions(benchmarks=tmp_path / "benchmarks")
    (sensor,), nightly = definitions_.sensors, definitions_.schedules[0]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        defs = dg.Definitions(sensors=[sensor], jobs=definitions_.jobs)
        result = tick(defs, sensor.name, instance)
        assert result.skip_message == \
            f"no benchmark folder (docs.jsonl and questions.jsonl) under {tmp_path / 'benchmarks'}"
        folder = tmp_path / "benchmarks" / "tiny"
        folder.mkdir(parents=True)
        (folder / "docs.jsonl").write_text("")
        (folder / "questions.jsonl").write_text("")
        first = tick(defs, sensor.name, instance)
        assert [r.partition_key for r in first.run_requests] == ["tiny"]
        quiet = tick(defs, sensor.name, instance, first.cursor)
        assert quiet.skip_message == "no change since the last run request in its one benchmark folder"
        assert quiet.cursor == first.cursor
        skipped = nightly.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=NIGHT))
        assert "start the benchmark_folders sensor" in skipped.skip_message
