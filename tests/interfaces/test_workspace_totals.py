"""A partitioned workspace in the Dagster UI: links across collections are counted as such, never as missing, and
one unpartitioned asset gives the whole workspace's totals with a row per partition."""
from pathlib import Path

import dagster as dg
import pytest
import yaml

from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings
from rag.units.linking import LinkTargets, count_links


def front_matter(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])


def current_documents(corpus: Path) -> dict[str, dict]:
    """Each document's newest version's front matter, with its collection folder."""
    current: dict[str, dict] = {}
    for path in sorted(corpus.rglob("*.md")):
        meta = front_matter(path) | {"folder": f"{corpus.name}/{path.parent.name}"}
        kept = current.get(meta["id"])
        if kept is None or str(meta["version"]) > str(kept["version"]):
            current[meta["id"]] = meta
    return current


def expected_links(corpus: Path) -> dict[str, tuple[int, int, int]]:
    """Per collection folder, from the files' front matter alone: links (within, across, to nothing)."""
    current = current_documents(corpus)
    names = {folder: {m["id"] for m in current.values() if m["folder"] == folder}
             | {m["title"] for m in current.values() if m["folder"] == folder}
             for folder in {m["folder"] for m in current.values()}}
    counts = {folder: [0, 0, 0] for folder in names}
    for meta in current.values():
        for link in meta.get("links") or ():
            slot = 0 if link in names[meta["folder"]] else 1 if any(link in n for n in names.values()) else 2
            counts[meta["folder"]][slot] += 1
    return {folder: tuple(c) for folder, c in counts.items()}


def test_links_split_into_those_to_another_partition_and_those_to_nothing():
    elsewhere = LinkTargets(frozenset({"b-1"}), frozenset({"Beta guide"}))
    cross, missing = elsewhere.split([("a", "b-1"), ("a", "Beta guide"), ("a", "nowhere")])
    assert cross == [("a", "b-1"), ("a", "Beta guide")] and missing == [("a", "nowhere")]
    counts = count_links({"p": [("a", "A", ["b-1", "a2", "nowhere"]), ("a2", "A two", [])],
                          "q": [("b-1", "Beta guide", ["A two"])]})
    assert (counts["p"].within, counts["p"].cross_collection, counts["p"].missing) == (1, 1, 1)
    assert (counts["q"].within, counts["q"].cross_collection, counts["q"].missing) == (0, 1, 0)


@pytest.mark.slow
def test_the_partitioned_sample_corpus_has_no_missing_links_and_one_page_of_totals(tmp_path, corpus):
    expected = expected_links(corpus)
    assert sum(c[1] for c in expected.values()) > 0 and sum(c[2] for c in expected.values()) == 0
    settings = IngestSettings(workspace=tmp_path / "ws", sources=[corpus], partitioned=True)
    defs = build_definitions(workspace_resources(settings))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        tick = defs.get_sensor_def("collection_changes")(dg.build_sensor_context(instance=instance))
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        keys = sorted(r.partition_key for r in tick.run_requests)
        assert keys == sorted(expected)

        def ingest(key: str) -> dict:
            result = defs.resolve_job_def("ingest").execute_in_process(instance=instance, partition_key=key)
            assert result.success
            (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key.path == ["long_units"]]
            return {k: v.value for k, v in event.materialization.metadata.items()}

        first = {key: ingest(key) for key in keys}      # serial: each sees only the partitions before it
        nightly = {key: ingest(key) for key in keys}    # the nightly sweep: every partition has published
        totals_job = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection={dg.AssetKey("workspace_totals")})
        result = totals_job.execute_in_process(instance=instance)
        (event,) = result.get_asset_materialization_events()
        totals = {k: v.value for k, v in event.materialization.metadata.items()}

    # A partition's first run finds links into collections not published yet in their source files.
    for runs in (first, nightly):
        assert {k: (m["missing_links"], m["cross_collection_links"]) for k, m in runs.items()} == {
            k: (0, c[1]) for k, c in expected.items()}
    assert totals["missing_links"] == 0
    assert totals["cross_collection_links"] == sum(c[1] for c in expected.values())
    assert totals["partitions"] == len(keys)
    rows = {r.data["partition"]: dict(r.data) for r in totals["by_partition"].records}
    for table in ("links_by_partition", "storage_by_partition", "published_by_partition"):   # narrow tables
        for r in totals[table].records:
            rows[r.data["partition"]] |= r.data
    assert {k: (r["within"], r["across"], r["missing"]) for k, r in rows.items()} \
        == expected
    assert totals["documents_current"] == sum(r["documents"] for r in rows.values()) \
        == len(current_documents(corpus))
    assert totals["units"] == sum(m["units"] for m in nightly.values())
    assert all(r["sub_chunks"] > 0 and r["units"] > 0 and r["last_published"] != "never" for r in rows.values())
