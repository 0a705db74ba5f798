"""A chmod or chgrp changes only a file's ctime, yet it may change who may read it: the real sensors (one per source,
and the partitioned one) request a run for it, and for a folder ACL file's permission change too."""
import os
import time

import dagster as dg
import pytest

from pipelines.sensors import collection_sensor, source_sensor


@dg.asset(partitions_def=dg.DynamicPartitionsDefinition(name="collections"))
def _partitioned():
    return None


@dg.asset
def _whole():
    return None


def corpus(root):
    for collection in ("hr", "ops"):
        (root / collection).mkdir(parents=True)
        (root / collection / "policy.md").write_text(f"---\nid: {collection}\nacl: [staff]\n---\nThe {collection} "
                                                     "policy.\n")
    (root / "hr" / ".access.yaml").write_text("acl: [staff, hr]\n")
    return root


def touch_ctime_only(path, change):
    """Apply `change` (a chmod or chgrp) until the ctime moves (a coarse clock may keep it within one tick); the
    mtime and size stay as they were."""
    before = os.stat(path)
    while True:
        change(path)
        now = os.stat(path)
        if now.st_ctime_ns != before.st_ctime_ns:
            break
        time.sleep(0.005)
    assert (now.st_mtime_ns, now.st_size) == (before.st_mtime_ns, before.st_size)


def chmod(path):
    os.chmod(path, os.stat(path).st_mode ^ 0o004)


def chgrp(path):
    st = os.stat(path)
    os.chown(path, -1, 1 if st.st_gid != 1 else 0)


def whole_tick(sensor, instance, cursor):
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    result = sensor(context)
    if isinstance(result, dg.SkipReason):
        return [], cursor
    return result.run_requests, result.cursor


def partitioned_tick(sensor, instance, cursor):
    result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result.run_requests, result.cursor


@pytest.mark.parametrize("change", [chmod, chgrp])
@pytest.mark.parametrize("target", ["ops/policy.md", "hr/.access.yaml"])
def test_the_source_sensor_requests_a_run_for_a_permission_change_alone(tmp_path, change, target):
    root = corpus(tmp_path / "corpus")
    job = dg.define_asset_job("ingest", selection=[_whole])
    sensor = source_sensor(str(root), str(tmp_path / "ws"), job)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first, cursor = whole_tick(sensor, instance, None)
        assert len(first) == 1
        assert whole_tick(sensor, instance, cursor)[0] == []
        touch_ctime_only(root / target, change)
        requests, cursor = whole_tick(sensor, instance, cursor)
        assert len(requests) == 1 and requests[0].run_key != first[0].run_key
        assert whole_tick(sensor, instance, cursor)[0] == []   # one run per change


@pytest.mark.parametrize("change", [chmod, chgrp])
@pytest.mark.parametrize("target, key", [("ops/policy.md", "corpus/ops"), ("hr/.access.yaml", "corpus/hr")])
def test_the_collection_sensor_requests_a_run_of_exactly_the_partition_whose_permissions_changed(tmp_path, change,
                                                                                                 target, key):
    root = corpus(tmp_path / "corpus")
    partitions = _partitioned.partitions_def
    job = dg.define_asset_job("ingest", selection=[_partitioned])
    sensor = collection_sensor([str(root)], str(tmp_path / "ws"), job, partitions, None)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first, cursor = partitioned_tick(sensor, instance, None)
        assert sorted(r.partition_key for r in first) == ["corpus/hr", "corpus/ops"]
        assert partitioned_tick(sensor, instance, cursor)[0] == []
        touch_ctime_only(root / target, change)
        requests, cursor = partitioned_tick(sensor, instance, cursor)
        assert [r.partition_key for r in requests] == [key]
        assert partitioned_tick(sensor, instance, cursor)[0] == []
