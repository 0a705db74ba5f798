"""What the ingest assets' metadata says in the Dagster UI is true on a first run, with a quarantined duplicate, on a
run that changed nothing, and per partition: each value checked word for word on a tiny corpus, really materialised."""
from pathlib import Path

import dagster as dg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assets.ingest import ingest_assets, ingest_checks
from assets.ingest_metadata import FIRST_RUN, PATH_CHARS, SAME_EMBEDDER, short_path
from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings

DUPLICATE = "quarantined (a duplicate id with other text, or a refused version)"


def write(folder: Path, name: str, doc_id: str, version: str, text: str, links: tuple[str, ...] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"---\nid: {doc_id}\ntitle: {doc_id.title()} guide\nversion: \"{version}\"\n"
                               f"acl: [staff]\nlinks: [{', '.join(links)}]\n---\n# {doc_id}\n\n{text}\n")


def tiny_corpus(root: Path) -> Path:
    """Two collections: `one` holds two versions of alpha (linking to beta and to nothing), `two` holds beta."""
    write(root / "one", "alpha.1.md", "alpha", "1", "Alpha gateways reboot nightly.")
    write(root / "one", "alpha.2.md", "alpha", "2", "Alpha gateways reboot weekly.", ("beta", "nowhere"))
    write(root / "two", "beta.md", "beta", "1", "Beta gateways keep a local cache.", ("alpha",))
    return root


def materialize(instance, workspace: Path, sources: list[Path]) -> dict[str, dict]:
    result = dg.materialize([*ingest_assets, *ingest_checks], instance=instance,
                            resources=workspace_resources(IngestSettings(workspace=workspace, sources=sources)))
    assert result.success
    return {e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}


@pytest.fixture
def instance(tmp_path):
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as inst:
        yield inst


def test_a_first_run_and_a_run_that_changed_nothing_say_what_they_counted(instance, tmp_path):
    corpus = tiny_corpus(tmp_path / "docs")
    first = materialize(instance, tmp_path / "ws", [corpus])
    docs, units, index = first["source_documents"], first["long_units"], first["subchunk_index"]
    assert docs["counts_explained"] == (
        "3 document versions read from 3 new or changed files: 2 current, 1 older (kept for as-of reads). "
        "2 documents current in the catalog: 2 read in this run, 0 from unchanged files.")
    assert (docs["documents_read"], docs["documents_current"]) == (3, 2)
    assert docs["quarantine"] == "Nothing quarantined."
    assert units["missing_links"] == 1
    assert units["missing_links_by_document"] == ("Links to a document not found:\n\n| document | missing link |\n"
                                                  "|---|---|\n| alpha | nowhere |")
    assert index["embedder_replaced"] == FIRST_RUN == "first run: nothing to replace"
    by_part = {r.data["part"]: r.data for r in index["storage_by_part"].records}
    assert by_part["total"]["mb"] == index["mb_on_disk"] > 0
    assert by_part["total"]["times_raw_text"] == index["storage_ratio_to_raw_text"]
    assert not {"size_on_disk", "storage_shares_of_raw_text"} & set(index)   # one unit (MB), named in the key

    again = materialize(instance, tmp_path / "ws", [corpus])
    assert again["source_documents"]["counts_explained"] == (
        "No new or changed file since the last run, so no document was read. "
        "2 documents current in the catalog: 0 read in this run, 2 from unchanged files.")
    assert again["subchunk_index"]["embedder_replaced"] == SAME_EMBEDDER
    assert again["long_units"]["missing_links_by_document"] == units["missing_links_by_document"]


def test_a_quarantined_duplicate_is_counted_as_one_never_as_an_older_version(instance, tmp_path):
    folder = tmp_path / "docs"
    write(folder, "gamma.md", "gamma", "1", "Gamma gateways sit in rack A.")
    write(folder, "gamma-copy.md", "gamma", "1", "Gamma gateways sit in rack B.")
    write(folder, "delta.md", "delta", "1", "Delta gateways sit in rack C.")
    docs = materialize(instance, tmp_path / "ws", [folder])["source_documents"]
    assert docs["counts_explained"] == (
        f"3 document versions read from 3 new or changed files: 2 current, 1 {DUPLICATE}. "
        "2 documents current in the catalog: 2 read in this run, 0 from unchanged files.")
    assert "older" not in docs["counts_explained"]
    # The reason first, paths below the source folder: no column holds the server's absolute paths.
    header, _, row = docs["quarantine"].splitlines()
    assert header == "| reason | file | last good version served |"
    assert row == ("| duplicate document id 'gamma' (version 1) with different content; first seen in "
                   "docs/gamma-copy.md | docs/gamma.md | gamma v1 |")
    again = materialize(instance, tmp_path / "ws", [folder])["source_documents"]
    assert again["quarantined"] == 1 and again["counts_explained"].endswith(
        "1 other quarantined input: files not readable as documents, or refusals decided again from unchanged files.")


@pytest.mark.slow
def test_each_partition_and_the_workspace_totals_say_what_they_counted(tmp_path):
    corpus = tiny_corpus(tmp_path / "docs")
    defs = build_definitions(workspace_resources(IngestSettings(workspace=tmp_path / "ws", sources=[corpus],
                                                                partitioned=True)))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        tick = defs.get_sensor_def("collection_changes")(dg.build_sensor_context(instance=instance))
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        meta = {}
        for key in sorted(r.partition_key for r in tick.run_requests):
            result = defs.resolve_job_def("ingest").execute_in_process(instance=instance, partition_key=key)
            meta[key] = {e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
                         for e in result.get_asset_materialization_events()}
        totals_job = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection={dg.AssetKey("workspace_totals")})
        (event,) = totals_job.execute_in_process(instance=instance).get_asset_materialization_events()
        totals = {k: v.value for k, v in event.materialization.metadata.items()}

    one, two = meta["docs/one"], meta["docs/two"]
    assert one["source_documents"]["counts_explained"] == (
        "2 document versions read from 2 new or changed files: 1 current, 1 older (kept for as-of reads). "
        "1 document current in the catalog: 1 read in this run, 0 from unchanged files.")
    assert two["source_documents"]["counts_explained"] == (
        "1 document version read from 1 new or changed file: 1 current. "
        "1 document current in the catalog: 1 read in this run, 0 from unchanged files.")
    assert (one["long_units"]["missing_links"], one["long_units"]["cross_collection_links"]) == (1, 1)
    assert one["long_units"]["missing_links_by_document"].startswith(
        "Links to a document not found (in no collection of the sources):")
    assert one["long_units"]["missing_links_by_document"].endswith("| alpha | nowhere |")
    assert two["long_units"]["missing_links_by_document"] == "No link points to a missing document."
    assert {m["subchunk_index"]["embedder_replaced"] for m in meta.values()} == {FIRST_RUN}
    rows = {r.data["partition"]: dict(r.data) for r in totals["by_partition"].records}
    for table in ("links_by_partition", "storage_by_partition", "published_by_partition"):
        for r in totals[table].records:
            rows[r.data["partition"]] |= r.data
    assert {k: (r["documents"], r["superseded"], r["missing"], r["across"]) for k, r in rows.items()} \
        == {"docs/one": (1, 1, 1, 1), "docs/two": (1, 0, 0, 1)}
    assert totals["mb_on_disk"] == pytest.approx(sum(r["mb"] for r in rows.values()), abs=0.02)
    assert "size_on_disk" not in totals


@given(st.lists(st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1,
                        max_size=30), min_size=1, max_size=8))
def test_a_path_cell_is_at_most_its_column_and_ends_as_the_path_does(parts):
    path = "/srv/sources/" + "/".join(parts)
    shown = short_path(path, ["/srv/sources"])
    assert len(shown) <= PATH_CHARS
    assert ("sources/" + "/".join(parts)).endswith(shown.removeprefix("…"))
    assert shown.endswith(parts[-1][-(PATH_CHARS - 1):])   # the file's name, or as much of it as fits, is kept
