"""A sensor serves one workspace: its cursor and run keys are that workspace's, and a workspace of the other layout
fails the run with its one-line reason, shown first (Dagster's Failure, no wrapped trace)."""
import shutil

import dagster as dg
import pytest

from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings


def definitions(corpus, workspace, partitioned):
    return build_definitions(workspace_resources(IngestSettings(workspace=workspace, sources=[str(corpus)],
                                                                partitioned=partitioned)))


def tick(defs, instance, cursor) -> dg.SensorResult:
    sensor = next(s for s in defs.sensors if s.name.startswith(("source_changes_", "collection_changes")))
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    result = sensor(context)
    if not isinstance(result, dg.SensorResult):   # a SkipReason, or one RunRequest with the cursor set aside
        return dg.SensorResult(run_requests=[result] if isinstance(result, dg.RunRequest) else [],
                               cursor=context.cursor)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_a_new_workspace_on_the_same_dagster_home_gets_its_own_first_runs(tmp_path, corpus, partitioned):
    with dg.instance_for_test() as instance:
        old = tick(definitions(corpus, tmp_path / "old", partitioned), instance, None)
        assert old.run_requests and tick(definitions(corpus, tmp_path / "old", partitioned), instance,
                                         old.cursor).run_requests == []
        new = tick(definitions(corpus, tmp_path / "new", partitioned), instance, old.cursor)
        assert len(new.run_requests) == len(old.run_requests)
        assert not {r.run_key for r in new.run_requests} & {r.run_key for r in old.run_requests}
        assert len({r.tags["rag/workspace_id"] for r in new.run_requests + old.run_requests}) == 2


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_a_run_into_a_workspace_of_the_other_layout_fails_with_its_one_line_reason(tmp_path, corpus, partitioned):
    workspace = tmp_path / "ws"
    with dg.instance_for_test() as instance:
        def ingest(partitioned):
            defs = definitions(corpus, workspace, partitioned)
            if partitioned:
                key = tick(defs, instance, None).run_requests[0].partition_key
                return defs.resolve_job_def("ingest").execute_in_process(instance=instance, partition_key=key,
                                                                         raise_on_error=False)
            return defs.resolve_job_def("ingest").execute_in_process(instance=instance, raise_on_error=False)

        assert ingest(not partitioned).success
        result = ingest(partitioned)
    assert not result.success
    [failure] = result.get_step_failure_events()
    data = failure.step_failure_data
    reason = ("holds a whole (unpartitioned) catalog; ingest partitions into a new workspace" if partitioned
              else "is partitioned by collection; ingest with --partitioned or --partition")
    assert data.user_failure_data.description == f"{workspace}: {reason}"
    assert data.error.cause is None and data.error.message.strip() == f"dagster._core.definitions.events.Failure: " \
                                                                       f"{workspace}: {reason}"


def test_a_plan_the_sources_refuse_skips_the_tick_with_its_one_line(tmp_path, corpus):
    twin = tmp_path / "elsewhere" / corpus.name
    shutil.copytree(corpus, twin)
    defs = build_definitions(workspace_resources(IngestSettings(workspace=tmp_path / "ws", partitioned=True,
                                                                sources=[str(corpus), str(twin)])))
    sensor = defs.get_sensor_def("collection_changes")
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message == "partitioned sources need distinct folder names: corpus, corpus"
