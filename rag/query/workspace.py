"""The read side of a workspace: the newest published snapshot, the embedder and the counter, bound once.

A `Workspace` never opens the writer's catalog file and never takes the writer's lock. Each call checks the
snapshot pointer (one `stat`), so a long-lived process follows new publishes without a restart, and a
query that started on a snapshot finishes on it.
"""
from __future__ import annotations

import logging
import re
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from rag.answer.llm import ChatModel
from rag.models.tokens import TokenCounter, default_counter
from rag.query.methods import MAX_QUESTION_CHARS, METHODS, method
from rag.retrieval.callers import Caller
from rag.retrieval.context import RetrievalResult, located
from rag.retrieval.read_state import WARM_PARTS, SharedCache, Snapshot
from rag.retrieval.request import Request, Tools
from rag.retrieval.state_files import STATE_DIR
from rag.sources.partitions import PARTITIONS_DIR, Store, is_partitioned, published_stores
from rag.store import doc_partitions
from rag.store.catalog import Catalog, CatalogError
from rag.store.index import SubchunkIndex
from rag.store.index_union import IndexUnion
from rag.store.snapshot_files import NoSnapshot, SnapshotInfo, pointer_stamp, read_pointer
from rag.store.snapshot_pull import pull
from rag.store.union_catalog import UnionCatalog

log = logging.getLogger("rag.query.workspace")
_FRACTIONAL_OFFSET = re.compile(r"[+-]\d\d:?\d\d:?\d\d\.\d+$")


class WorkspaceError(LookupError):
    """The folder is not a readable workspace; the message is one line."""


_EMBEDDER_LOCKS: "weakref.WeakKeyDictionary[object, threading.Lock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


class _Serialised:
    """The embedder behind a lock: its tokenizer must not be used by two threads at once.

    One lock per embedder, not per workspace: workspaces of one process share the process's embedder.
    """

    def __init__(self, embedder):
        self._embedder = embedder
        with _LOCKS_GUARD:
            try:
                self._lock = _EMBEDDER_LOCKS.setdefault(embedder, threading.Lock())
            except TypeError:   # neither hashable nor weakly referable (a test's stand-in): a lock of its own
                self._lock = threading.Lock()

    def encode(self, texts, *args, **kwargs):
        with self._lock:
            return self._embedder.encode(texts, *args, **kwargs)

    def encode_query(self, text: str):
        with self._lock:
            return self._embedder.encode_query(text)

    def encode_queries(self, texts: list[str]):
        with self._lock:
            return self._embedder.encode_queries(texts)

    @property
    def name(self) -> str:
        return self._embedder.name


class Workspace:
    def __init__(self, root: str | Path, *, lance_uri: str | None = None, embedder=None,
                 counter: TokenCounter | None = None):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise WorkspaceError(f"{self.root}: is a file, not a workspace folder")
        self.lance_uri = str(lance_uri or self.root / "lancedb")
        self._embedder = _Serialised(embedder) if embedder is not None else None
        self.counter = counter or default_counter()
        self._shared = SharedCache(files=self.root / STATE_DIR)
        self._snapshot: Snapshot | None = None
        self._stamp: tuple | None = None
        self._lock = threading.Lock()
        self._between: Callable[[Callable[[], None]], object] | None = None
        self._next: _Transition | None = None
        self._advancing = False
        self.snapshot()  # fail now, with one line, if nothing was published here

    @property
    def embedder(self):
        if self._embedder is None:
            from rag.models.embedders import workspace_embedder

            # The space the index was built in; one thread per query is fastest under load.
            self._embedder = _Serialised(workspace_embedder(self.snapshot().catalog, threads=1))
        return self._embedder

    def use_embedder(self, embedder) -> None:
        """Embed questions with this (already loaded) embedder; it must be the workspace's own."""
        self._embedder = _Serialised(embedder)

    def snapshot(self) -> Snapshot:
        """The newest published snapshot whose read state is in; reopened only when the pointer changed since the
        last call (while a server builds the next one between requests, the one it answers from)."""
        stamp = self._stamp_now()
        if self._snapshot is not None and (stamp == self._stamp or self._between is not None):
            return self._snapshot
        with self._lock:
            if self._snapshot is None or stamp != self._stamp:
                self._snapshot, self._stamp = self._open(), stamp
            return self._snapshot

    def build_between(self, schedule: Callable[[Callable[[], None]], object]) -> None:
        """Build each publish's read state a part at a time through `schedule` (a server's retrieval queue, so each
        part waits its turn behind the requests already queued), answering from the current one meanwhile."""
        self._between = schedule

    def serving(self) -> tuple[Snapshot, Snapshot | None]:
        """The snapshot to answer from, and the newest published one when its read state is still being built."""
        if self._between is None:
            return self.snapshot(), None
        stamp = self._stamp_now()
        with self._lock:
            if stamp == self._stamp:
                return self._snapshot, None
            if self._next is None or self._next.stamp != stamp:
                self._next = _Transition(stamp, self._open(), list(WARM_PARTS))
            if not self._advancing:
                self._advancing = True
                self._between(self._advance)
            return self._snapshot, self._next.snapshot

    def _advance(self) -> None:
        """Build the next part of the newest snapshot's read state, then queue the rest; swap it in once built."""
        with self._lock:
            step = self._next
        try:
            if step is not None and step.parts:
                step.snapshot.build(step.parts[0])
                step.parts.pop(0)
        except Exception:  # keep answering from the current snapshot; the next request opens the newest again
            log.exception("building the read state of %s failed", self.root)
            with self._lock:
                self._next = None if self._next is step else self._next
        with self._lock:
            if self._next is not None and self._next is step and not step.parts:
                self._snapshot, self._stamp, self._next = step.snapshot, step.stamp, None
            if self._next is None:
                self._advancing = False
            else:
                self._between(self._advance)

    def _stamp_now(self) -> tuple | None:
        pull(self.root)  # publishes made on another machine ($RAG_SNAPSHOT_URI), if any
        if not is_partitioned(self.root):
            return pointer_stamp(self.root)
        return tuple((s.key, pointer_stamp(s.folder)) for s in published_stores(self.root))

    def _open(self) -> Snapshot:
        if is_partitioned(self.root):
            return self._open_partitions()
        for attempt in range(3):  # the snapshot named by a pointer we read may be pruned a moment later
            try:
                info = read_pointer(self.root)
            except NoSnapshot as err:
                raise WorkspaceError(str(err)) from None
            if not info.path(self.root).exists() and attempt < 2:
                continue
            try:
                catalog = Catalog.snapshot(self.root, info, self.root / STATE_DIR)
            except CatalogError as err:
                raise WorkspaceError(str(err)) from None
            try:
                index = SubchunkIndex.reader(self.lance_uri, info.lance_version)
            except LookupError as err:
                catalog.close()
                raise WorkspaceError(str(err)) from None
            return Snapshot({"": info}, catalog, index, self._shared)
        raise WorkspaceError(f"{self.root}: the published snapshot disappeared while opening it")

    def _open_partitions(self) -> Snapshot:
        """Every partition's newest snapshot, as one read-only state (each pointer is read once)."""
        stores, infos, catalog = _partition_catalogs(self.root)
        try:
            index = IndexUnion.readers({s.key: s.lance_uri for s in stores},
                                       {k: i.lance_version for k, i in infos.items()})
        except LookupError as err:
            catalog.close()
            raise WorkspaceError(str(err)) from None
        return Snapshot(infos, catalog, index, self._shared)

    def retrieve(self, method_name: str, caller: Caller, question: str, budget: int, *,
                 as_of: datetime | None = None, model: ChatModel | None = None) -> RetrievalResult:
        """Context for the question as the caller, within `budget` tokens, from the newest snapshot."""
        (result, _), = self.retrieve_at_budgets(method_name, caller, question, (budget,), as_of=as_of, model=model)
        return result

    def retrieve_at_budgets(self, method_name: str, caller: Caller, question: str, budgets: tuple[int, ...], *,
                            as_of: datetime | None = None, model: ChatModel | None = None,
                            tools: Tools | None = None) -> list[tuple[RetrievalResult, float]]:
        """One ranking packed at every budget, with each budget's seconds; `tools` replaces the workspace's own
        embedder and counter (the evaluation's memoised ones)."""
        spec = method(method_name)
        if len(question) > MAX_QUESTION_CHARS:
            raise ValueError(f"the question is {len(question)} characters long; the limit is {MAX_QUESTION_CHARS}")
        if not question.strip():
            raise ValueError("the question is empty")
        if not budgets or min(budgets) <= 0:
            raise ValueError("the budget must be a positive number of tokens")
        if as_of is not None and not spec.as_of:
            raise ValueError(f"as-of reads are not supported by {spec.name}; use "
                             f"{', '.join(n for n, m in METHODS.items() if m.as_of)}")
        (snap, newest), tools = self.serving(), tools or Tools(self.embedder, self.counter)
        if as_of is not None and newest is not None:  # the past as the newest publish records it; built as read
            snap, newest = newest, None
        if spec.uses_index and getattr(tools.embedder, "name", snap.embedder_name) != snap.embedder_name:
            # minilm and minilm-int8 share a dimension, so no shape check would catch the mix
            raise ValueError(f"questions embedded with {tools.embedder.name} cannot be compared with the index's "
                             f"{snap.embedder_name} vectors; embed them with the workspace's embedder")
        results = [(located(result, snap.texts), seconds) for result, seconds in
                   spec.at_budgets(snap, Request(caller, question, max(budgets), as_of, model), tools, tuple(budgets))]
        if newest is None:
            return results
        return [(still_published(result, newest, caller), seconds) for result, seconds in results]

    def resolve_as_of(self, value: str | None) -> datetime | None:
        """`publish:N` or an ISO timestamp (UTC unless it carries an offset) as a naive UTC datetime."""
        if not value:
            return None
        if value.startswith("publish:"):
            snap, newest = self.serving()
            try:
                return (newest or snap).catalog.publish_finished(int(value.split(":", 1)[1]))
            except ValueError:
                raise ValueError(f"--as-of {value}: expected publish:N with a number N") from None
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"--as-of {value}: expected an ISO timestamp or publish:N") from None
        if _FRACTIONAL_OFFSET.search(value):   # Python reads "+00:00:00.000001" as UTC: a moment silently moved
            raise ValueError(f"--as-of {value}: a UTC offset has no fractions of a second")
        try:
            return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when
        except OverflowError:  # e.g. 0001-01-01T00:00+14:00 is a moment before year 1 in UTC
            raise ValueError(f"--as-of {value}: out of range once moved to UTC (years 1 to 9999)") from None

    def close(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None


@dataclass
class _Transition:
    """A published snapshot whose read state a server is building between requests: the parts left to build."""

    stamp: tuple | None
    snapshot: Snapshot
    parts: list[str]


def still_published(result: RetrievalResult, newest: Snapshot, caller: Caller) -> RetrievalResult:
    """The result without what the newest snapshot no longer publishes to the caller: a deleted document, a
    superseded version, a revoked ACL (rule 3: hidden from the next query, whatever state answered it)."""
    versions = newest.published
    kept = [i for i in result.items if i.doc_id in versions and versions[i.doc_id].version == i.doc_version
            and caller.may_read(versions[i.doc_id].acl)]
    return result if len(kept) == len(result.items) else replace(result, items=kept)


def _partition_catalogs(root: Path) -> tuple[list[Store], dict[str, SnapshotInfo], UnionCatalog]:
    """Every partition's newest published catalog as one, with its store and pointer (each read once); no index is
    opened."""
    for attempt in range(3):  # a snapshot named by a pointer we read may be pruned a moment later
        stores = published_stores(root)
        if not stores:
            raise WorkspaceError(f"{root}: no partition has published yet; materialise a partition first")
        try:
            infos = {s.key: read_pointer(s.folder) for s in stores}
        except NoSnapshot as err:
            raise WorkspaceError(str(err)) from None
        if not all(i.path(s.folder).exists() for s, i in zip(stores, infos.values())) and attempt < 2:
            continue
        try:
            return stores, infos, UnionCatalog(root / PARTITIONS_DIR, {s.key: infos[s.key].path(s.folder) for s in stores})
        except CatalogError as err:
            raise WorkspaceError(str(err)) from None
    raise WorkspaceError(f"{root}: a partition's snapshot disappeared while opening it")


@contextmanager
def published_catalog(workspace: str | Path) -> Iterator[UnionCatalog | None]:
    """What a partition's writer reads of the others: their published catalogs as one (None before any published,
    or for a whole workspace). Their indexes stay closed: the writer needs ids, titles and links, not vectors."""
    root = Path(workspace)
    pull(root)  # publishes made on another machine ($RAG_SNAPSHOT_URI), if any
    try:
        catalog = _partition_catalogs(root)[2] if is_partitioned(root) else None
    except WorkspaceError:
        catalog = None
    try:
        yield catalog
    finally:
        if catalog is not None:
            catalog.close()


def shared_ids(workspace: str | Path) -> dict[str, list[tuple[str, str, str]]]:
    """Ids published by more than one partition of a workspace (hidden from readers), with every place of each.

    Read from the partitions' id record, not their catalogs: a partition's run reads only the shared ids."""
    return doc_partitions.shared(workspace)
