"""What a team finds in the Dagster UI before anything ran: which schedules and sensors are on, under readable names."""
import re
from datetime import datetime, timezone

import dagster as dg
import pytest
from conftest import SAMPLES

from assets.evaluation import evaluation_definitions
from pipelines.definitions import build_definitions
from pipelines.sensors import sensor_names
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings

NIGHTLY = {"nightly_reindex", "nightly_evaluation", "nightly_workspace_evaluation"}


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_nightly_schedules_start_on_and_every_schedule_and_sensor_says_how_it_starts(tmp_path, partitioned):
    settings = IngestSettings(workspace=tmp_path / "ws", sources=[SAMPLES / "corpus"], partitioned=partitioned)
    defs = build_definitions(workspace_resources(settings))
    schedules = {s.name: s for s in defs.schedules}
    assert set(schedules) == NIGHTLY
    assert all(s.default_status == dg.DefaultScheduleStatus.RUNNING for s in schedules.values())
    for item in [*schedules.values(), *defs.sensors]:
        on = item.default_status.value == "RUNNING"
        assert item.description.startswith("ON by default" if on else "OFF by default"), item.name


@pytest.mark.parametrize("partitioned", [False, True])
def test_sensor_names_are_words_a_person_reads_not_hashes(tmp_path, partitioned):
    settings = IngestSettings(workspace=tmp_path / "ws", sources=[SAMPLES / "corpus"], partitioned=partitioned)
    defs = build_definitions(workspace_resources(settings))
    names = {s.name for s in defs.sensors}
    assert names == ({"collection_changes", "workspace_totals_after_ingest", "benchmark_folders"} if partitioned
                     else {"source_changes_corpus", "benchmark_folders"})
    assert not any(re.search(r"[0-9a-f]{8}", n) for n in names)


def test_two_sources_in_folders_of_the_same_name_get_distinct_readable_sensor_names(tmp_path):
    a, b, c = tmp_path / "hr" / "docs", tmp_path / "eng" / "docs", tmp_path / "wiki pages"
    assert sensor_names([str(a), str(b), str(c)]) == {
        str(a): "source_changes_docs", str(b): "source_changes_eng_docs", str(c): "source_changes_wiki_pages"}


def test_the_benchmark_sensor_starts_off_whatever_the_folder(tmp_path):
    for definitions in (evaluation_definitions(), evaluation_definitions(benchmarks=tmp_path)):
        (sensor,) = definitions.sensors
        assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
        assert "start it here" in sensor.description and str(definitions.assets[0].partitions_def.name) == "benchmarks"


def test_the_nightly_workspace_evaluation_skips_with_a_reason_when_no_question_set_exists(tmp_path):
    (source := tmp_path / "docs").mkdir()
    schedule = next(s for s in evaluation_definitions(sources=[str(source)]).schedules
                    if s.name == "nightly_workspace_evaluation")
    night = datetime(2026, 12, 2, 4, tzinfo=timezone.utc)
    with dg.instance_for_test() as instance:
        skipped = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=night))
        assert not skipped.run_requests and "no questions.jsonl beside the sources" in skipped.skip_message
        (tmp_path / "questions.jsonl").write_text("")
        ran = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=night))
        assert len(ran.run_requests) == 1
