"""A partitioned workspace on one page: totals over every partition's published snapshot, a row per partition.

A partitioned asset's own page shows one partition at a time; this unpartitioned asset is where a team reads the
whole workspace, and where links are counted against every partition's published documents at once.
"""
import dagster as dg

from rag.query.workspace import Workspace, WorkspaceError
from rag.sources.partitions import store
from rag.store import doc_partitions
from rag.store.storage import measure
from rag.units.linking import LinkTargets, count_links
from resources import SourceSettings, VectorStoreResource

SUBCHUNK_INDEX = dg.AssetKey("subchunk_index")
# Per-partition tables narrow enough for the UI's value column at a 1,440 px screen (about 400 px: the key and
# timestamp columns take the rest of the metadata box), each led by the partition key.
PARTITION = ("partition", "string", "the collection (or shard) key")
TABLES = {
    "by_partition": (("documents", "int", "current documents"), ("units", "int", "current long units"),
                     ("sub_chunks", "int", "rows of the published index")),
    "links_by_partition": (("missing", "int", "links to a document no partition publishes"),
                           ("across", "int", "links to a document another partition publishes"),
                           ("within", "int", "links to a document of the same partition")),
    "storage_by_partition": (("mb", "float", "megabytes (10^6 bytes) of catalog, read state and index"),
                             ("superseded", "int", "older versions kept for as-of reads"),
                             ("deleted", "int", "documents deleted from the source")),
    "published_by_partition": (("last_published", "string", "UTC"),),
}


def published_elsewhere(workspace: str | None, partition: str, links: list[tuple[str, str]]) -> LinkTargets:
    """The targets of these (doc id, link) pairs that partitions other than `partition` have published, looked up in
    the workspace's id and title record (rag.store.doc_partitions), never in their snapshots."""
    if not workspace or not links:
        return LinkTargets()
    return doc_partitions.link_targets(workspace, partition, [link for _, link in links])


def workspace_totals_definitions() -> tuple[dg.AssetsDefinition, dg.SensorDefinition]:
    """The totals asset and the sensor that refreshes it after any partition publishes."""

    @dg.asset(group_name="workspace", deps=[SUBCHUNK_INDEX], kinds={"duckdb"},
              automation_condition=dg.AutomationCondition.eager(),
              description="The whole workspace: totals over every partition's published snapshot, with one row per "
                          "partition, and links counted across partitions (refreshed after any partition publishes).")
    def workspace_totals(source_settings: SourceSettings, vector_store: VectorStoreResource) -> dg.MaterializeResult:
        workspace = source_settings.workspace
        try:
            reader = Workspace(workspace)
            snapshot = reader.snapshot()
        except WorkspaceError as err:
            raise dg.Failure(str(err)) from None
        try:
            totals = snapshot.catalog.partition_totals()
            links = count_links(snapshot.catalog.current_links())
            subchunks = {key: index.count() for key, index in snapshot.index.parts.items()}
        finally:
            reader.close()
        sizes = {t.partition: measure(store(workspace, t.partition).catalog_path, vector_store.uri_of(t.partition),
                                      0).total() for t in totals}
        rows = [{
            "partition": t.partition, "documents": t.current, "superseded": t.superseded, "deleted": t.deleted,
            "units": t.units, "sub_chunks": subchunks.get(t.partition, 0), "within": links[t.partition].within,
            "across": links[t.partition].cross_collection, "missing": links[t.partition].missing,
            "mb": round(sizes[t.partition] / 1e6, 2),
            "last_published": f"{t.last_published:%Y-%m-%d %H:%M:%S}" if t.last_published else "never"}
            for t in totals]
        return dg.MaterializeResult(metadata={
            "partitions": len(totals),
            "documents_current": sum(t.current for t in totals),
            "documents_superseded": sum(t.superseded for t in totals),
            "documents_deleted": sum(t.deleted for t in totals),
            "units": sum(t.units for t in totals),
            "subchunks": sum(subchunks.values()),
            "cross_collection_links": sum(c.cross_collection for c in links.values()),
            "missing_links": sum(c.missing for c in links.values()),
            "mb_on_disk": dg.MetadataValue.float(round(sum(sizes.values()) / 1e6, 2)),
            **{name: _table(rows, (PARTITION, *columns)) for name, columns in TABLES.items()},
        })

    sensor = dg.AutomationConditionSensorDefinition(
        "workspace_totals_after_ingest", target=[workspace_totals], default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=60,
        description="ON by default: refreshes workspace_totals once any partition of subchunk_index has published.")
    return workspace_totals, sensor


def _table(rows: list[dict], columns: tuple) -> dg.TableMetadataValue:
    return dg.MetadataValue.table([dg.TableRecord({name: row[name] for name, _, _ in columns}) for row in rows],
                                  dg.TableSchema(columns=[dg.TableColumn(*column) for column in columns]))
