"""What a team finds in the Dagster UI before anything ran: which schedules and sensors are on, under readable names."""
import re
import shutil
from datetime import datetime, timezone

import dagster as dg
import pytest
from conftest import REPO, SAMPLES

from assets.evaluation import evaluation_definitions, in_words
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


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_source_sensors_look_as_often_as_rag_sensor_interval_s_says_and_say_so(tmp_path, partitioned):
    environ = {"RAG_WORKSPACE": str(tmp_path / "ws"), "RAG_SENSOR_INTERVAL_S": "7",
               "RAG_PARTITIONS": "collections" if partitioned else ""}
    defs = build_definitions(workspace_resources(IngestSettings.from_env(environ, "", [str(SAMPLES / "corpus")])))
    watching = [s for s in defs.sensors if s.name in ("collection_changes", "source_changes_corpus")]
    assert [s.minimum_interval_seconds for s in watching] == [7]
    assert watching[0].description.startswith("ON by default: every 7 s")


@pytest.mark.parametrize("value", ["0", "soon", "-5"])
def test_a_sensor_interval_that_is_not_whole_seconds_is_a_one_line_error_naming_the_variable(value):
    with pytest.raises(ValueError, match=f"RAG_SENSOR_INTERVAL_S={value!r}: expected a whole number of seconds"):
        IngestSettings.from_env({"RAG_SENSOR_INTERVAL_S": value}, "ws", [])


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


def test_the_instance_config_loads_and_opens_the_ui_without_the_community_dialog(tmp_path):
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(tmp_path))   # validated against Dagster's instance schema
    try:
        assert instance.nux_enabled is False and instance.telemetry_enabled is False
    finally:
        instance.dispose()


def test_schedule_descriptions_say_when_in_words_not_cron(tmp_path):
    for partitioned in (False, True):
        settings = IngestSettings(workspace=tmp_path / "ws", sources=[SAMPLES / "corpus"], partitioned=partitioned)
        for schedule in build_definitions(workspace_resources(settings)).schedules:
            assert "every day at" in schedule.description and "*" not in schedule.description, schedule.name
    assert in_words("30 23 * * *") == "every day at 23:30 UTC"
