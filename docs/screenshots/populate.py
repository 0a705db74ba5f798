"""Fill a Dagster instance the way a team's first night would, for docs/screenshots/take.sh.

The partitioned layout (RAG_PARTITIONS=collections) on the sample corpus: the sensor's first tick, one ingest run per
collection, then the nightly sweep of every collection (each now sees the others published), the workspace totals,
then one bundled benchmark slice ingested and evaluated. Run with DAGSTER_HOME and
the RAG_* variables set as for `make ui`.
"""
import sys

import dagster as dg

from pipelines.definitions import defs


def main(benchmark: str = "hotpotqa") -> None:
    definitions = defs()
    instance = dg.DagsterInstance.get()
    tick = definitions.get_sensor_def("collection_changes")(dg.build_sensor_context(instance=instance))
    for request in tick.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    for request in [*tick.run_requests, *tick.run_requests]:   # the sensor's runs, then the nightly sweep
        result = definitions.resolve_job_def("ingest").execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags)
        assert result.success, request.partition_key
    totals = definitions.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection={dg.AssetKey("workspace_totals")})
    assert totals.execute_in_process(instance=instance).success
    instance.add_dynamic_partitions("benchmarks", [benchmark])
    assert definitions.resolve_job_def("benchmark_workspaces").execute_in_process(
        instance=instance, partition_key=benchmark).success
    config = {"methods": ["longrag", "shortchunk", "elite"], "budgets": [1000, 2000, 4000]}
    assert definitions.resolve_job_def("evaluation").execute_in_process(
        instance=instance, partition_key=benchmark,
        run_config={"ops": {"retrieval_evaluation": {"config": config}}}).success


if __name__ == "__main__":
    main(*sys.argv[1:])
