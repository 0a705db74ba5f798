"""Which partitions publish each document id: a record every partition's publish updates with its changed ids only.

Ids are meant to be unique across partitions. Checking that by loading every partition's published catalog grew
with the corpus; instead each partition keeps one small object per id it publishes, `ids/<id hash>/<its slug>.json`
(with the version and source file the report names), and a publish checks only the ids it changed: an id that two
partitions publish also gets `shared/<id hash>.json`, so the report reads the shared ids alone. Titles are kept the
same way (`titles/<title hash>/<its slug>.json`), so a link out of a partition is resolved by looking up its target
(`link_targets`: two requests a target), never by reading another partition's snapshot. An id a partition stops
publishing leaves `left/<id hash>/<its slug>.json`, so a run needing vectors for an id's texts opens only the indexes
of the partitions that publish or published it (`publishers`), not the whole workspace's. Each partition
writes only its own objects (partitions never contend); a `shared` object is re-checked after it is removed, so an
id another partition adds meanwhile is never lost. The record lives in $RAG_SNAPSHOT_URI's bucket when one is set
(pods share no disk), else in the workspace folder (`doc_ids/`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from rag.sources.partitions import PARTITIONS_DIR, load_json, read_info, slug, warn_once
from rag.store.catalog import Catalog
from rag.store.snapshot_objects import bucket
from rag.units.linking import LinkTargets

RECORD_DIR = "doc_ids"
RECORDED = "doc_ids.json"   # in a partition's store folder: the ids (version, source file, title) it last recorded
Place = tuple[str, str, str]   # partition, version, source path
REQUESTS_IN_FLIGHT = 16
_LOG = logging.getLogger("rag.store")


class _Record(Protocol):
    def get(self, name: str) -> bytes | None: ...
    def put(self, name: str, body: bytes) -> None: ...
    def delete(self, name: str) -> None: ...
    def names(self, under: str) -> list[str]: ...
    def holders(self, marker: str, under: str = "ids") -> list[str]: ...


class _Folder:
    """The record in a local folder."""

    def __init__(self, root: Path):
        self.root = root

    def get(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, name: str, body: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, path)

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def names(self, under: str) -> list[str]:
        folder = self.root / under
        return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []

    def holders(self, marker: str, under: str = "ids") -> list[str]:
        return sorted(p.parent.name for p in (self.root / under).glob(f"*/{marker}"))


class _Bucket:
    """The record under `doc_ids/` of the snapshot bucket."""

    def __init__(self, objects):
        self.objects = objects

    def get(self, name: str) -> bytes | None:
        found = self.objects.get(f"{RECORD_DIR}/{name}")
        return found.body if found is not None else None

    def put(self, name: str, body: bytes) -> None:
        self.objects.put(f"{RECORD_DIR}/{name}", body)

    def delete(self, name: str) -> None:
        self.objects.delete(f"{RECORD_DIR}/{name}")

    def names(self, under: str) -> list[str]:
        return sorted(k.rsplit("/", 1)[1] for k in self.objects.keys(f"{RECORD_DIR}/{under}/"))

    def holders(self, marker: str, under: str = "ids") -> list[str]:
        return sorted(k.split("/")[-2] for k in self.objects.keys(f"{RECORD_DIR}/{under}/") if k.endswith(f"/{marker}"))


def _record(workspace: Path) -> _Record:
    objects = bucket()
    return _Bucket(objects) if objects is not None else _Folder(Path(workspace) / RECORD_DIR)


def _hash(doc_id: str) -> str:
    return hashlib.sha256(doc_id.encode()).hexdigest()[:32]


def sync(catalog: Catalog) -> int:
    """Bring the record to the partition's current ids once it published them (a whole workspace has none).

    Only ids whose version or source file differ from what this partition last wrote are touched; returns how many.
    """
    store_folder = Path(catalog.path).parent
    meta = read_info(store_folder)[0] if store_folder.parent.name == PARTITIONS_DIR else None
    if meta is None:
        return 0
    key, name = meta["key"], f"{store_folder.name}.json"
    current = {d: (v, p, t) for d, v, p, t in catalog.rows(
        f"SELECT doc_id, version, {catalog.source_path_sql}, title FROM documents WHERE status = 'current'")}
    mine = store_folder / RECORDED
    before, problem = _recorded(mine)
    record = _record(store_folder.parent.parent)
    stale: list[str] = []
    titles = {_hash(t): t for _, _, t in current.values() if t}
    titled = {_hash(e[2]) for e in (before or {}).values() if len(e) > 2 and e[2]}
    if before is None:
        # What this partition last wrote is read back from the record itself: its markers of ids no longer current
        # are removed, every current id written again.
        held = {_hash(d) for d in current}
        stale, before = [h for h in record.holders(name) if h not in held], {}
        titled = set(record.holders(name, "titles"))
        if problem != "is lost":
            _LOG.warning("%s: %s; its partition's whole id record is written again", mine, problem)
    changed = sorted(d for d in before.keys() | current.keys() if before.get(d) != current.get(d))
    retitled = sorted(titled ^ titles.keys())
    if not changed and not stale and not retitled:
        return 0

    def write(doc_id: str) -> None:
        marker = f"ids/{_hash(doc_id)}/{name}"
        if doc_id in current:
            version, path, _ = current[doc_id]
            record.put(marker, json.dumps({"doc_id": doc_id, "partition": key, "version": version,
                                           "source_path": path}).encode())
        else:
            _leave(record, _hash(doc_id), name, key)
        _settle(record, _hash(doc_id), doc_id)

    def drop(h: str) -> None:
        _leave(record, h, name, key)
        _settle(record, h, None)

    def title(h: str) -> None:
        if h in titles:
            record.put(f"titles/{h}/{name}", json.dumps({"title": titles[h], "partition": key}).encode())
        else:
            record.delete(f"titles/{h}/{name}")

    # Ids are independent and each costs a few object-store round trips, so a first ingest of a large partition
    # waits on the network unless they overlap (boto3's client is thread-safe).
    with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
        list(pool.map(write, changed))
        list(pool.map(drop, stale))
        list(pool.map(title, retitled))
    tmp = mine.with_name(f".{RECORDED}.tmp")
    tmp.write_text(json.dumps(current))
    os.replace(tmp, mine)   # a publish killed before this line is applied again by the next one
    return len(changed) + len(stale) + len(retitled)


def _recorded(path: Path) -> tuple[dict[str, tuple] | None, str | None]:
    """The ids (version, source file) a partition last wrote to the record, or what is wrong with its file."""
    ids, problem = load_json(path)
    if problem:
        return None, problem
    # An entry without its title (2 items) is from before titles were recorded: it differs, so it is written again.
    if not isinstance(ids, dict) or not all(isinstance(p, list) and len(p) in (2, 3)
                                            and all(isinstance(s, str) or s is None for s in p) for p in ids.values()):
        return None, "does not hold a version and source file per id"
    return {d: tuple(p) for d, p in ids.items()}, None


def _leave(record: _Record, h: str, name: str, key: str) -> None:
    """Mark the id as once published here (its texts' vectors stay in this partition's index), then unmark it as
    published: a run that reads the record meanwhile finds the partition under one of the two."""
    record.put(f"left/{h}/{name}", json.dumps({"partition": key}).encode())
    record.delete(f"ids/{h}/{name}")


def _settle(record: _Record, h: str, doc_id: str | None) -> None:
    """Mark the id shared if two partitions hold it, else unmark it (and mark it again if one was added meanwhile)."""
    hint, body = f"shared/{h}.json", json.dumps({"doc_id": doc_id}).encode()
    if len(record.names(f"ids/{h}")) > 1:
        record.put(hint, body)
    elif record.get(hint) is not None:
        record.delete(hint)
        if len(record.names(f"ids/{h}")) > 1:
            record.put(hint, body)


def link_targets(workspace: str | Path, partition: str, links: list[str]) -> LinkTargets:
    """Which of these link targets another partition publishes, as an id or as a title: looked up in the record,
    two requests a target, so a run reads in proportion to its links out of its partition, not to the workspace."""
    record, mine, wanted = _record(Path(workspace)), f"{slug(partition)}.json", sorted(set(links))

    def elsewhere(target: str) -> tuple[bool, bool]:
        return tuple(any(n != mine for n in record.names(f"{under}/{_hash(target)}")) for under in ("ids", "titles"))

    with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
        found = dict(zip(wanted, pool.map(elsewhere, wanted)))
    return LinkTargets(frozenset(t for t, (i, _) in found.items() if i), frozenset(t for t, (_, n) in found.items() if n))


def publishers(workspace: str | Path, partition: str, doc_ids: list[str]) -> list[str]:
    """The store folders of the other partitions that publish or once published any of these ids: two listings an
    id, so a run reads in proportion to the ids whose texts it embeds, not to the workspace."""
    record, mine = _record(Path(workspace)), f"{slug(partition)}.json"

    def holders(doc_id: str) -> set[str]:
        return {n for under in ("ids", "left") for n in record.names(f"{under}/{_hash(doc_id)}")}

    with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
        found = set().union(*pool.map(holders, sorted(set(doc_ids))))
    return sorted(n.removesuffix(".json") for n in found - {mine})


def shared(workspace: str | Path) -> dict[str, list[Place]]:
    """Ids published by more than one partition, each with every (partition, version, source file), by id."""
    record, found = _record(Path(workspace)), {}
    for hint in record.names("shared"):
        places = []
        for marker in record.names(f"ids/{hint.removesuffix('.json')}"):
            name = f"ids/{hint.removesuffix('.json')}/{marker}"
            body = record.get(name)
            if body is not None:   # removed by its partition since it was listed
                place = _place(body)
                if place is None:
                    warn_once(f"{RECORD_DIR}/{name}: is damaged and left out of the shared ids; delete "
                              f"{PARTITIONS_DIR}/{marker.removesuffix('.json')}/{RECORDED} and that partition's next "
                              "ingest writes its id records again")
                    continue
                places.append(place)
        if len(places) > 1:
            found[places[0][0]] = sorted(p for _, p in places)
    return dict(sorted(found.items()))


def _place(body: bytes) -> tuple[str, Place] | None:
    try:
        entry = json.loads(body)
        place = (entry["doc_id"], (entry["partition"], entry["version"], entry["source_path"]))
    except (ValueError, RecursionError, TypeError, KeyError):
        return None
    return place if all(isinstance(v, str) for v in (place[0], *place[1][:2])) else None
