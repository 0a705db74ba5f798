"""Ingest assets: sources → units → index. Each loads, calls the core in `rag.store.publish`, records metadata."""

import time
import warnings

import dagster as dg
from tqdm import tqdm

from assets import ingest_metadata as say
from assets.workspace_totals import published_elsewhere
from rag.models.embedders import workspace_embedder_name
from rag.query.workspace import shared_ids
from rag.sources.partitions import unpublished
from rag.store import consistency
from rag.store.publish import NothingToPublish, publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings
from rag.store.storage import measure
from rag.store.union_catalog import shared_ids_markdown
from rag.store.url_settings import masked
from rag.text.tables import histogram, markdown_table
from rag.units.linking import LinkTargets, targets_in
from resources import CatalogResource, EmbedderResource, SourceSettings, VectorStoreResource

# Each collection of the sources (or hash shard of a large one) is a partition with a store of its own.
COLLECTIONS = dg.DynamicPartitionsDefinition(name="collections")
NOT_REPLACED = say.NOT_REPLACED


def build_ingest(partitions: dg.PartitionsDefinition | None = None) -> tuple[list, list]:
    """The ingest assets and their checks, for the whole workspace or per partition (one store each)."""
    with warnings.catch_warnings():
        # Partitioned asset checks are a Dagster preview; each partition's checks must read its own store.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _build_ingest(partitions)


def _build_ingest(partitions: dg.PartitionsDefinition | None) -> tuple[list, list]:

    @dg.asset(group_name="sources", kinds={"duckdb"}, partitions_def=partitions,
              description="Every version of every source document in the catalog; bad inputs quarantined.")
    def source_documents(context: dg.AssetExecutionContext, catalog: CatalogResource,
                         source_settings: SourceSettings) -> dg.MaterializeResult:
        part = _partition(context)
        settings = source_settings.settings(part)   # before the store is opened: an unknown key creates none
        with catalog.open(part) as cat:
            try:
                changes, loaded = publish_documents(cat, settings)
            except NothingToPublish as err:
                raise dg.Failure(str(err), metadata={"quarantine": dg.MetadataValue.md(
                    say.quarantine_md(err.rejected, settings.sources))})
            served = cat.current_versions_of([r.doc_id for r in changes.rejected if r.doc_id])
            current = cat.current_versions_of(sorted({d.doc_id for d in loaded.documents}))
            for r in changes.rejected + changes.warnings:
                context.log.warning(f"{r.source_path}: {r.reason}")
            return dg.MaterializeResult(metadata={
                "documents_current": changes.current,
                "documents_read": len(loaded.documents),
                "new_versions": len(changes.new),
                "superseded": len(changes.superseded),
                "deleted": len(changes.deleted),
                "updated_in_place": len(changes.updated_in_place),
                "quarantined": len(changes.rejected),
                "warnings": len(changes.warnings),
                "skipped": len(loaded.skipped),
                **changes.reading,
                "counts_explained": say.counts_line(changes, loaded.documents, current),
                "quarantine": dg.MetadataValue.md(say.quarantine_md(
                    changes.rejected + changes.warnings + loaded.skipped, settings.sources, served)),
                "last_good_served": sum(r.doc_id in served for r in changes.rejected),
                "quarantined_by_kind": dg.MetadataValue.md(say.kinds_md(changes.rejected)),
                "quarantine_lines": dg.MetadataValue.json([say.quarantine_line(r, served)
                                                           for r in changes.rejected[:QUARANTINE_LINES]]),
                "formats_read": dg.MetadataValue.md(say.formats_md(loaded.formats)),
                "catalog": dg.MetadataValue.path(cat.path),
                **_shared_ids_metadata(source_settings, part),
                **({"collection_vanished": True} if settings.select is not None and settings.select.vanished else {}),
            })

    @dg.asset(group_name="units", deps=[source_documents], kinds={"duckdb"}, partitions_def=partitions,
              description="LongRAG long units: linked documents grouped under the token cap, same ACL and collection.")
    def long_units(context: dg.AssetExecutionContext, catalog: CatalogResource, embedder: EmbedderResource,
                   source_settings: SourceSettings) -> dg.MaterializeResult:
        part = _partition(context)
        settings = source_settings.settings(part)
        elsewhere = (lambda links: _link_targets(source_settings, settings, part, links)) if part else None
        with catalog.open(part) as cat:
            plan, changes = publish_units(cat, embedder.counter(), settings, elsewhere)
        units = plan.sizes()
        sizes = [t for t, _ in units]
        for doc_id, link in plan.missing_links:
            context.log.warning(f"{doc_id}: link to missing document '{link}'"
                                + (" (in no collection of the sources)" if part else ""))
        return dg.MaterializeResult(metadata={
            "units": len(units),
            "published": len(changes.published),
            "retired": len(changes.retired),
            "unchanged": changes.unchanged,
            "unit_cap_tokens": settings.unit_cap,
            "mean_members_per_unit": round(sum(n for _, n in units) / max(len(units), 1), 2),
            "max_unit_tokens": max(sizes, default=0),
            "missing_links": len(plan.missing_links),
            "missing_links_by_document": dg.MetadataValue.md(say.missing_links_md(plan.missing_links, bool(part))),
            **({"cross_collection_links": len(plan.cross_links)} if part else {}),
            "components": plan.components,
            "components_replanned": plan.replanned,
            "documents_tokenised": plan.facts_computed,
            "unit_size_histogram": dg.MetadataValue.md(
                markdown_table(["tokens", "units"], [[k, v] for k, v in histogram(sizes).items()])),
        })

    @dg.asset(group_name="index", deps=[long_units], kinds={"lancedb"}, partitions_def=partitions,
              description="LanceDB sub-chunk index of the current units (ACL list column, MaxP over sub-chunks).")
    def subchunk_index(context: dg.AssetExecutionContext, catalog: CatalogResource, vector_store: VectorStoreResource,
                       embedder: EmbedderResource, source_settings: SourceSettings) -> dg.MaterializeResult:
        part = _partition(context)
        settings = source_settings.settings(part)
        with catalog.open(part) as cat:
            name = workspace_embedder_name(cat, settings.embedder)
        model = embedder.embedder(name)   # the workspace's embedder, as its catalog names it

        def embed(texts: list[str]):
            with tqdm(total=len(texts), desc=f"embedding sub-chunks ({name})", unit="chunk", disable=None) as bar:
                return model.encode(texts, progress=bar.update)

        with catalog.open(part) as cat:
            index = vector_store.open(part)
            first_run = index.count() == 0   # nothing indexed yet: no embedder to replace
            report = publish_index(cat, index, embed, embedder.counter(), settings, name,
                                   lambda doc_ids: vector_store.siblings(part, doc_ids))
            stored = measure(cat.path, vector_store.uri_of(part), cat.raw_text_bytes())
        if report.replaced_embedder:
            context.log.warning(f"embedder changed from {report.replaced_embedder} to {name}: the index was emptied "
                                f"and all {report.embedded} sub-chunks were embedded again")
        if report.rekeyed:
            context.log.warning(f"the index's {report.rekeyed} rows were keyed by unit version: re-written keyed by "
                                "document version, with their stored vectors (once)")
        context.log.info(f"embedded {report.embedded} sub-chunks, re-used {report.reused} cached vectors")
        return dg.MaterializeResult(metadata={
            "subchunks": report.subchunks,
            "embedded": report.embedded,
            "embedder": name,
            "embedder_replaced": say.embedder_replaced(report.replaced_embedder, first_run),
            "reused_vectors": report.reused,
            "sibling_indexes_opened": report.sibling_indexes,
            "units_indexed": report.units_indexed,
            "rows_removed": report.rows_removed,
            "rows_rekeyed": report.rekeyed,
            "foreign_rows_removed": report.foreign_rows_removed,
            "lance_version": report.lance_version,
            "mb_on_disk": dg.MetadataValue.float(round(stored.total() / 1e6, 2)),
            "storage_ratio_to_raw_text": stored.ratio(),
            "storage_by_part": say.storage_table(stored),
            "table_uri": dg.MetadataValue.path(masked(vector_store.uri_of(part))),
        })

    @dg.asset_check(asset=subchunk_index, partitions_def=partitions,
                    description="Every current document version is in exactly one current unit.")
    def every_document_in_one_unit(context: dg.AssetCheckExecutionContext,
                                   catalog: CatalogResource) -> dg.AssetCheckResult:
        with catalog.open(_partition(context)) as cat:
            return _finding(consistency.documents_in_exactly_one_unit(cat))

    index_checks = [
        _index_check(subchunk_index, partitions, name, description, finding) for name, description, finding in (
            ("index_matches_current_units", "The index holds exactly the current units' sub-chunks.",
             consistency.index_matches_current_units),
            ("no_stale_versions_in_index", "No index row carries a superseded or deleted document version.",
             consistency.no_stale_rows),
            ("index_rows_match_catalog",
             "Each index row carries its document's ACL, offsets inside its member and its text's hash.",
             consistency.index_rows_match_catalog))]

    return [source_documents, long_units, subchunk_index], [every_document_in_one_unit, *index_checks]


def _index_check(asset, partitions, name: str, description: str, finding) -> dg.AssetChecksDefinition:
    """A check comparing the partition's index with its catalog through one `rag.store.consistency` finding."""

    @dg.asset_check(asset=asset, partitions_def=partitions, name=name, description=description)
    def check(context: dg.AssetCheckExecutionContext, catalog: CatalogResource,
              vector_store: VectorStoreResource) -> dg.AssetCheckResult:
        part = _partition(context)
        with catalog.open(part) as cat:
            return _finding(finding(cat, vector_store.open(part)))

    return check


def _shared_ids_metadata(source_settings: SourceSettings, part: str | None) -> dict:
    """Ids this partition publishes that another one publishes too: error rows naming both places."""
    if not part or not source_settings.workspace:
        return {}
    shared = {d: places for d, places in shared_ids(source_settings.workspace).items()
              if part in {p for p, _, _ in places}}
    return {"shared_ids": len(shared), "shared_ids_errors": dg.MetadataValue.md(shared_ids_markdown(shared))}


def _link_targets(source_settings: SourceSettings, settings: IngestSettings, part: str,
                  links: list[tuple[str, str]]) -> LinkTargets:
    """The targets of these links that other partitions' documents are: the published ones', then, for what is still
    unfound, those in the files of partitions never published (a first run comes before them). A run reads no other
    partition's files once every partition has published."""
    published = published_elsewhere(source_settings.workspace, part, links)
    rest = published.split(links)[1]
    if not rest:
        return published
    others = [s for s in unpublished(list(source_settings.sources), source_settings.workspace,
                                     source_settings.shard_files) if s.key != part]
    return published | targets_in(others, rest, settings.default_acl, settings.collection)


def _partition(context) -> str | None:
    return context.partition_key if context.has_partition_key else None


def _finding(finding: consistency.Finding) -> dg.AssetCheckResult:
    # The UI's check "Timestamp" is when the run was planned, before it waited in the queue; this is when it ran.
    return dg.AssetCheckResult(passed=finding.passed, description=finding.summary,
                               metadata={"examples": dg.MetadataValue.json(finding.examples),
                                         "checked_at": dg.MetadataValue.timestamp(time.time())})


QUARANTINE_LINES = 20  # the run's output names this many refused inputs; the metadata table and catalog hold all

ingest_assets, ingest_checks = build_ingest()
