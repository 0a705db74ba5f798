"""The three publishing steps behind the assets: documents → units → index, each safe to re-run."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from rag.models.embedders import DEFAULT_EMBEDDER, EMBEDDER_SETTING, embedder_spec
from rag.models.tokens import TokenCounter
from rag.sources.bucket import local_sources
from rag.sources.documents import LoadResult, Rejected, content_hash
from rag.sources.formats import ExtractOptions
from rag.store import doc_partitions
from rag.store.catalog import Catalog
from rag.store.facts import plan_from_facts
from rag.store.index import MemberKey, SubchunkIndex, SubchunkRow
from rag.store.lance_folder import unreadable
from rag.store.plan_change import PlanDocs, plan_change
from rag.store.row_units import membership_keys
from rag.store.rows import DocChanges, UnitChanges
from rag.store.settings import IngestSettings
from rag.store.source_log import read_sources, sync_sources
from rag.units.linking import LinkTargets
from rag.units.long_units import Member, UnitPlan, plan_units
from rag.units.subchunk_recipe import SubchunkRecipe, embedded_text


@dataclass
class IndexReport:
    subchunks: int
    embedded: int
    reused: int
    units_indexed: int
    rows_removed: int
    lance_version: int
    embedder: str = DEFAULT_EMBEDDER
    replaced_embedder: str | None = None   # set when this run emptied another embedder's index and re-embedded all
    foreign_rows_removed: int = 0  # rows of an index built for another catalog (a lost or replaced store)
    replaced_recipe: str | None = None   # set when this run re-cut every unit by another sub-chunk recipe
    rekeyed: int = 0   # rows of an index keyed by unit version, re-written keyed by document version (once)
    sibling_indexes: int = 0   # other partitions' indexes opened for vectors (those publishing the embedded ids)


Siblings = Callable[[list[str]], list[SubchunkIndex]]   # doc ids → the other partitions' indexes that hold them


def no_siblings(doc_ids: list[str]) -> list[SubchunkIndex]:
    return []


@dataclass
class SiblingReads:
    """Other partitions' indexes asked for by the ids whose texts need vectors; which ones were opened."""

    find: Siblings
    opened: set[str] = field(default_factory=set)

    def __call__(self, doc_ids: list[str]) -> list[SubchunkIndex]:
        found = self.find(doc_ids)
        self.opened.update(i.uri for i in found)
        return found


class NothingToPublish(RuntimeError):
    """No source yielded a readable document; the catalog is left as it was."""

    def __init__(self, message: str, rejected: list[Rejected]):
        super().__init__(message)
        self.rejected = rejected


def publish_documents(catalog: Catalog, settings: IngestSettings) -> tuple[DocChanges, LoadResult]:
    """Read the sources (only files changed since the last run) and record new versions, supersessions and
    deletions in the catalog.

    With no readable document at all the run stops (nothing is deleted), unless empty sources are allowed
    and at least one source was read: then its documents are deleted, which is how a source is emptied.
    """
    sources = local_sources(settings.sources, Path(catalog.path).parent)   # a bucket's mirror brought up to date
    publish_id = catalog.begin_publish(sources)
    view = read_sources(catalog, sources, settings.default_acl, settings.collection, settings.rescan,
                        settings.select, ExtractOptions(settings.ocr, settings.acl_from))
    loaded = view.loaded()
    catalog.record_problems(publish_id, "skipped", loaded.skipped)
    if not view.holding and not (settings.allow_empty and loaded.scanned):
        catalog.record_problems(publish_id, "rejected", loaded.rejected)
        catalog.finish_failed(publish_id)
        first = f"; first problem: {loaded.rejected[0].source_path}: {loaded.rejected[0].reason}" if loaded.rejected else ""
        hint = "; to delete every document of an empty source, allow empty sources" if loaded.scanned else ""
        raise NothingToPublish(f"no readable documents in {', '.join(sources) or 'no sources'}"
                               f" ({len(loaded.rejected)} inputs rejected{first}){hint}", loaded.rejected)
    changes = sync_sources(catalog, publish_id, view, settings.allow_empty, settings.rescan)
    if changes.new or changes.superseded or changes.deleted or changes.updated_in_place:
        catalog.publish_snapshot(publish_id)  # readers hide deleted and superseded text from their next query
    doc_partitions.sync(catalog)   # also when nothing changed: a store published before the record fills it once
    return changes, loaded


def publish_units(catalog: Catalog, counter: TokenCounter, settings: IngestSettings,
                  elsewhere: Callable[[list[tuple[str, str]]], LinkTargets] | None = None
                  ) -> tuple[UnitPlan, UnitChanges]:
    """Group the current documents and stage the units that are new or changed.

    `elsewhere` gives, of the links that point nowhere in this store, the targets that another partition's documents
    are (published or not yet): those links are cross-collection, not missing.
    """
    publish_id = catalog.running_publish()
    inputs = catalog.plan_inputs(settings.unit_cap, settings.derive_links)
    planned, record, scope = catalog.planned_from(publish_id), PlanDocs(catalog), None
    kept = not settings.rescan and planned == inputs
    if kept:   # the current units are the plan of the same documents: a run that changed nothing plans nothing
        plan = UnitPlan([], catalog.missing_links(), components=catalog.kept_components(), kept=catalog.kept_units())
    elif settings.rescan:
        plan = plan_units(catalog.current_documents(), counter, settings.unit_cap, settings.derive_links)
    elif record.hold(planned):   # the record is of the current units: re-plan what the change reaches
        plan, scope = plan_change(catalog, counter, settings.unit_cap, settings.derive_links)
    else:
        plan = plan_from_facts(catalog, counter, settings.unit_cap, settings.derive_links)
    if plan.missing_links and elsewhere is not None:
        plan.cross_links, plan.missing_links = elsewhere(plan.missing_links).split(plan.missing_links)
    catalog.record_problems(publish_id, "warning", [
        Rejected(doc_id, f"link to missing document '{link}'", doc_id) for doc_id, link in plan.missing_links])
    if kept:
        catalog.keep_units(publish_id, inputs)
        return plan, UnitChanges(unchanged=len(plan.kept))
    changes = catalog.stage_units(publish_id, plan, inputs, scope)
    changes.unchanged += len(plan.untouched)
    record.record(plan, inputs, scope)
    return plan, changes


def publish_index(catalog: Catalog, index: SubchunkIndex, embed: Callable[[list[str]], np.ndarray],
                  counter: TokenCounter, settings: IngestSettings, embedder: str = DEFAULT_EMBEDDER,
                  siblings: Siblings = no_siblings) -> IndexReport:
    """`_index_step`, stopped in one line if Lance cannot read the index's files (rag.store.lance_folder.unreadable)."""
    try:
        return _index_step(catalog, index, embed, counter, settings, embedder, siblings)
    except (OSError, ValueError) as err:
        raise unreadable(index.uri, err) from None


def _index_step(catalog: Catalog, index: SubchunkIndex, embed: Callable[[list[str]], np.ndarray],
               counter: TokenCounter, settings: IngestSettings, embedder: str = DEFAULT_EMBEDDER,
               siblings: Siblings = no_siblings) -> IndexReport:
    """Bring the index to the catalog's live units, embedding only texts never embedded before, then commit.

    `embed` must be `embedder`'s; an index in another embedder's space is emptied first, so every unit is
    re-embedded and no vector space is ever mixed with another. `siblings` gives, for the ids whose texts need
    vectors, the indexes of the other partitions that publish or published them: a document moved between
    collections is embedded once; a copy under another id is embedded again.
    """
    publish_id = catalog.running_publish()
    reads = SiblingReads(siblings)
    left = index.version
    index.separate_vectors()
    index.drop_unused_columns()
    before = index_identity(catalog, index)
    replaced = switch_vector_space(catalog, index, embedder)
    rechunked = switch_recipe(index, settings.recipe)
    rekeyed = index.rekey()
    foreign = adopt_index(catalog, index)
    step = _in_step(catalog, index, settings, publish_id, left, before)
    live = catalog.live_units(statuses=("pending",) if step else ("current", "pending"))
    wanted = live_members(live)
    staged_docs = {k[0] for k in wanted} if step else None  # the rows read: the staged units' documents, or all
    leaving = catalog.leaving_documents(publish_id) | staged_docs if step else None
    missing = set(wanted) - index.member_keys(staged_docs)
    rows, texts = subchunk_rows(members_of(wanted, missing), catalog, counter, settings)
    embedded = add_rows(index, rows, texts, embed, reads)
    catalog.commit_units(publish_id, index.version, embedded)
    near = live_members(catalog.live_units(sorted(leaving))) if step else wanted
    removed, refill = index.remove_stale(set(near) if step else set(membership_keys(catalog.unit_membership())),
                                         leaving)
    if refill:  # rows of current members that shared a document version with stale ones: their vectors are kept
        embedded += add_rows(index, *subchunk_rows(members_of(near, refill), catalog, counter, settings), embed,
                             reads)
    index.ensure_indexes(catalog.as_of_versions())  # this publish's too: an as-of read may have just opened it
    catalog.index_synced(publish_id, index.version)
    catalog.publish_snapshot(publish_id, index.version)
    indexed = sum(any(member_key(acl, coll, m) in missing for acl, coll, m in entries) for entries in live.values())
    return IndexReport(index.count(), embedded, len(rows) - embedded, indexed, removed, index.version,
                       embedder, replaced, foreign, rechunked, rekeyed, len(reads.opened))


def _in_step(catalog: Catalog, index: SubchunkIndex, settings: IngestSettings, publish_id: int, left: int,
             before: tuple) -> bool:
    """Whether the index is as the publish before left it, in step with the catalog, so the step reads the change
    alone; else (a run stopped halfway, an index folder put back, another embedder, recipe or store) every live unit
    is compared with every row."""
    return (not settings.rescan and before == index_identity(catalog, index) and left == index.version
            and catalog.synced_lance_version(publish_id) == left)


def add_rows(index: SubchunkIndex, rows: list[SubchunkRow], texts: list[str], embed: Callable[[list[str]], np.ndarray],
             siblings: Siblings) -> int:
    """Add the rows with their texts' vectors, embedding only texts neither this index nor the indexes of the
    other partitions publishing their documents hold a vector for; how many."""
    hashes = [r.text_hash for r in rows]
    vectors = np.zeros((len(rows), index.dimension), dtype=np.float32)
    cached = index.cached_vectors(hashes)
    unknown = sorted({r.doc_id for r in rows if r.text_hash not in cached})
    others = siblings(unknown) if unknown else []
    if others:
        cached.update(index.cached_vectors([h for h in hashes if h not in cached], others))
    first: dict[str, int] = {}  # identical texts (boilerplate, copies) are embedded once per run
    for i, h in enumerate(hashes):
        if h not in cached:
            first.setdefault(h, i)
    if first:
        cached.update(zip(first, embed([texts[i] for i in first.values()])))
    for i, h in enumerate(hashes):
        vectors[i] = cached[h]
    index.add(rows, vectors)
    return len(first)


def member_key(acl, collection: str, m: Member) -> MemberKey:
    return (m.doc_id, m.doc_version, m.part, m.start, m.end, tuple(acl), collection)


def members_of(wanted: dict[MemberKey, tuple], keys: set[MemberKey]) -> list[tuple]:
    """These members, in a stable order (a key's collection may be None: compared as text)."""
    return [wanted[k] for k in sorted(keys, key=repr)]


def live_members(live: dict[str, list[tuple]]) -> dict[MemberKey, tuple]:
    """The members of the live units by member key; a member two units share (an unchanged one of a re-grouped
    unit, in its current and its pending version) has one set of rows."""
    return {member_key(acl, coll, m): (acl, coll, m) for entries in live.values() for acl, coll, m in entries}


def index_identity(catalog: Catalog, index: SubchunkIndex) -> tuple:
    """What makes the index's rows comparable with the catalog's units: its vector space, recipe, keys, store."""
    return index.embedder, index.dimension, index.recipe, index.unit_keyed, index.store_id() == catalog.store_id()


def switch_vector_space(catalog: Catalog, index: SubchunkIndex, embedder: str) -> str | None:
    """Make the index hold `embedder`'s space and record the choice; the embedder replaced if it held rows.

    The index is emptied before the catalog names the new embedder: a run killed in between leaves an empty
    index that the next run fills, never vectors of one space queried with the other.
    """
    spec = embedder_spec(embedder)
    previous = index.embedder if index.count() else None
    if index.embedder != spec.name or index.dimension != spec.dimension:
        index.reset(spec.name)
    if catalog.setting(EMBEDDER_SETTING) != spec.name:
        catalog.set_setting(EMBEDDER_SETTING, spec.name)
    return previous if previous != spec.name else None


def switch_recipe(index: SubchunkIndex, recipe: SubchunkRecipe) -> str | None:
    """Make the index's rows follow `recipe`; the recipe replaced if the index held rows cut by another one.

    Every unit is then indexed afresh; a sub-chunk whose embedded text did not change keeps its vector (cache).
    """
    if index.recipe == recipe.name:
        return None
    previous = index.recipe if index.count() else None
    index.rechunk(recipe.name)
    return previous


def adopt_index(catalog: Catalog, index: SubchunkIndex) -> int:
    """Empty an index that was built for another catalog (or none), so every unit is indexed afresh.

    Unit keys restart with a new catalog, so a foreign row could pass for a current unit with another ACL
    and other offsets. Its vectors stay in the cache: texts that did not change are not embedded again.
    """
    store = catalog.store_id()
    if index.store_id() == store:
        return 0
    removed = index.remove_all()
    index.claim(store)
    return removed


def subchunk_rows(members: list[tuple], catalog: Catalog, counter: TokenCounter,
                  settings: IngestSettings) -> tuple[list[SubchunkRow], list[str]]:
    """Sentence-aligned sub-chunks of every (ACL, collection, member), with offsets into the document and the
    text to embed."""
    texts_by_key = catalog.document_texts(sorted({(m.doc_id, m.doc_version) for *_, m in members}))
    rows: list[SubchunkRow] = []
    texts: list[str] = []
    for acl, collection, m in members:
        title, text = texts_by_key[(m.doc_id, m.doc_version)]
        for span in settings.recipe.spans(text[m.start:m.end], counter):
            start, end = m.start + span.start, m.start + span.end
            embedded = embedded_text(title, text, start, end)
            rows.append(SubchunkRow(m.doc_id, m.doc_version, m.part, m.start, m.end, acl, collection,
                                    start, end, span.tokens, content_hash(embedded)))
            texts.append(embedded)
    return rows, texts
