"""Storage on disk ÷ raw text, and what a one-document edit costs at scale.

For each of the three English benchmark corpora (HotpotQA, MuSiQue, 2WikiMultihopQA), a fresh workspace is
published through the same steps as the ingest assets (documents → units → index, with title-derived links);
then 5 times in a row 10% of the documents (a different tenth each round, by hash) get a new version with a
revised text and the workspace is re-published. After the first ingest and after the 5th re-publish it
reports bytes on disk per component (writer catalog, published read state, LanceDB, the rest) ÷ raw text
(UTF-8 bytes of the current documents' titles and texts); then once more after LanceDB's maintenance with a zero
retention, i.e. what stays once the as-of horizon (RAG_INDEX_RETENTION_DAYS, 7 days) has passed the re-publishes.
Each re-publish also reports the bytes each index operation left in each LanceDB table (rows added, rows deleted
with what they leave behind, the upkeep after the publish) and the tables' live and physical rows.

`--scale N` adds a workspace of N documents: the three corpora's 15,934 documents replicated under new ids
(`r<k>:<doc_id>`; every copy after the first has the copy number added to its title and text, so copies share no
text or vector and every copy forms units of its own). It is built once (cached in `--scale-dir`; its bytes ÷ text
and CPU time are kept in `built.json`) and copied; then one publish with nothing changed, and one document gets a
new version: wall and CPU time of that run, of its publish points, and bytes the process wrote (`wchar` of
/proc/self/io: every write(2), LanceDB's and DuckDB's alike).

Vectors: a deterministic stand-in embedder (a unit vector drawn from each text's hash) replaces MiniLM, so
the bench measures bytes and publish costs in minutes instead of hours; vectors are stored at the index's own
type and width (384), and float vectors do not compress, so the bytes are those of real embeddings. Tokens,
units and sub-chunks are the real ones (MiniLM's tokenizer).
The corpora are read from --benchmarks, else $RAG_BENCHMARKS, else the slices bundled in samples/benchmarks/
(the figures in the README are on the full corpora). Prints tables and writes bench/results/storage.json (or --out);
`--print FILE...` prints the tables of saved results.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
CODE = os.environ.get("RAG_BENCH_CODE", str(REPO))  # another checkout's code (a git worktree), for before/after
sys.path.insert(0, CODE)

from bench.results_file import results_path, write_json  # noqa: E402
from rag.models.tokens import default_counter  # noqa: E402
from rag.sources.benchmarks import add_benchmarks_option, benchmarks_option, benchmarks_root  # noqa: E402
from rag.store import index as index_module  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.catalog_file import GROWTH_SHARE  # noqa: E402
from rag.store.index import SubchunkIndex  # noqa: E402
from rag.store.publish import publish_documents, publish_index, publish_units  # noqa: E402
from rag.store.schema import BLOCK_SIZE  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402
from rag.store.snapshot_files import read_manifest, read_pointer  # noqa: E402
from rag.store.storage import measure  # noqa: E402
from rag.text.analysis import mention_spans  # noqa: E402
from rag.text.tables import bytes_on_disk, markdown_table  # noqa: E402
from rag.units.linking import mentioned_titles  # noqa: E402

BENCHMARKS = benchmarks_root()  # the bundled slices unless $RAG_BENCHMARKS or --benchmarks names the full corpora
NAMES = ["hotpotqa", "musique", "2wikimultihopqa"]
ROUNDS, SHARE = 5, 0.10
LANCE_WRITES: "LanceWrites"


def fake_embed(texts: list[str]) -> np.ndarray:
    """A unit vector per text, drawn from the text's hash: same bytes on disk as a real embedding."""
    out = np.empty((len(texts), 384), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(384)
        out[i] = v / np.linalg.norm(v)
    return out


def written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


class LanceWrites:
    """Bytes each index operation leaves on disk, per table: rows added, rows deleted (with the vectors or marks of
    texts that left they leave behind), and the upkeep after a publish (indexes, compaction, cleanup)."""

    # remove_units: the code from before rows were keyed by document version (RAG_BENCH_CODE)
    OPS = {"add": "add", "remove_units": "remove", "remove_stale": "remove", "ensure_indexes": "upkeep"}

    def __init__(self):
        self.bytes: dict[str, int] = {}
        timed = self
        for method, op in self.OPS.items():
            if not hasattr(SubchunkIndex, method):
                continue

            def wrapper(index, *args, _orig=getattr(SubchunkIndex, method), _op=op, **kwargs):
                before = timed.tables(index.uri)
                try:
                    return _orig(index, *args, **kwargs)
                finally:
                    for table, size in timed.tables(index.uri).items():
                        key = f"{_op}:{table}"
                        timed.bytes[key] = timed.bytes.get(key, 0) + size - before.get(table, 0)
            setattr(SubchunkIndex, method, wrapper)

    @staticmethod
    def tables(uri: str) -> dict[str, int]:
        return {t.stem: bytes_on_disk(t) for t in Path(uri).glob("*.lance")}

    def take(self) -> dict[str, int]:
        out, self.bytes = {k: v for k, v in sorted(self.bytes.items()) if v}, {}
        return out


class Timed:
    """Wall time spent in Catalog.publish_snapshot (the publish points), whatever the code under test does there."""

    def __init__(self):
        self.seconds, self.calls = 0.0, 0
        self._orig = Catalog.publish_snapshot
        timed = self

        def wrapper(cat, *args, **kwargs):
            t = time.perf_counter()
            try:
                return timed._orig(cat, *args, **kwargs)
            finally:
                timed.seconds += time.perf_counter() - t
                timed.calls += 1

        Catalog.publish_snapshot = wrapper

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0


def ingest(ws: Path, source: Path, counter) -> dict:
    """One run of the three publishing steps, as the ingest assets run them, with the bytes each step wrote (the
    catalog's closing apart: its checkpoint, and its copy when it is due)."""
    settings = IngestSettings(sources=[str(source)], default_acl=("bench",), derive_links=True)
    steps, w = {}, written_bytes()

    def step(name: str) -> None:
        nonlocal w
        steps[name], w = written_bytes() - w, written_bytes()

    catalog = Catalog(ws / "catalog.duckdb", entry="bench storage")
    try:
        changes, _ = publish_documents(catalog, settings)
        step("documents")
        publish_units(catalog, counter, settings)
        step("units")
        report = publish_index(catalog, SubchunkIndex(ws / "lancedb"), fake_embed, counter, settings)
        step("index")
    finally:
        catalog.close()
    step("close")
    return {"new_versions": len(changes.new), "embedded": report.embedded, "subchunks": report.subchunks,
            "bytes_written_by_step": steps}


def raw_text_bytes(ws: Path) -> int:
    """UTF-8 bytes of the current documents' titles and texts (Catalog.raw_text_bytes)."""
    catalog = Catalog(ws / "catalog.duckdb", entry="bench storage")
    try:
        return catalog.raw_text_bytes()
    finally:
        catalog.close()


def components(ws: Path) -> dict:
    """Bytes on disk of each part of the workspace (rag.store.storage, the figure every report states) ÷ the raw text."""
    stored = measure(ws / "catalog.duckdb", ws / "lancedb", raw_text_bytes(ws))
    parts = {"catalog": stored.catalog_bytes, "snapshots": stored.read_state_bytes, "lancedb": stored.index_bytes}
    parts["other"] = bytes_on_disk(ws) - stored.total()
    raw = stored.raw_text_bytes
    copies = catalog_copies(ws / "catalog.duckdb")
    lance = {f"{t.stem}/{d.name}": bytes_on_disk(d) for t in (ws / "lancedb").glob("*.lance") for d in t.iterdir()}
    return {"raw_text_bytes": raw, "total_bytes": stored.total() + parts["other"], "ratio": stored.ratio(),
            **{f"{k}_bytes": v for k, v in parts.items()},
            **{f"{k}_ratio": round(v / raw, 2) for k, v in parts.items()},
            "lancedb_parts_bytes": {k: v for k, v in sorted(lance.items()) if v},
            "catalog_tables_bytes": catalog_tables(ws / "catalog.duckdb"),
            "catalog_copies_bytes": copies, "catalog_row_groups": catalog_row_groups(ws / "catalog.duckdb"),
            "catalog_row_group_blocks": catalog_row_group_blocks(ws / "catalog.duckdb"),
            "ratio_catalog_copied": copied_ratio(stored.total() + parts["other"], stored.catalog_bytes, copies, raw),
            "ratio_catalog_due": copied_ratio(stored.total() + parts["other"], stored.catalog_bytes, copies, raw,
                                              GROWTH_SHARE),
            "read_state_tables_bytes": read_state_tables(ws / "snapshots" / "segments"),
            "read_state_document_rows": read_state_document_rows(ws)}


def copied_ratio(total: int, catalog: int, copies: dict[str, int], raw: int, grown: float = 0.0) -> float:
    """Bytes ÷ text with the catalog as a fresh copy of itself: the figure at the low point of the catalog's copy
    cycle (rag.store.catalog_file copies it once it has grown by a fifth), so runs compare whatever the cycle's phase.
    With `grown` = GROWTH_SHARE, the figure at its high point: the catalog just short of being copied."""
    return round((total - catalog + (1 + grown) * copies["as_is"]) / raw, 3)


def catalog_tables(path: Path) -> dict[str, int]:
    """Bytes of the catalog's blocks per table (a text column apart, in a catalog from before texts left it), free
    blocks, and the rest: metadata and pages pragma_storage_info does not list."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (block, free), = con.execute("SELECT block_size, free_blocks FROM pragma_database_size()").fetchall()
        out = {"free": free * block}
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            for text, blocks in con.execute(
                    f"SELECT column_name = 'text', count(DISTINCT block_id) FROM pragma_storage_info('{table}') "
                    "WHERE block_id >= 0 GROUP BY 1").fetchall():
                out[f"{table}.text" if text else table] = blocks * block
        out["metadata_and_zstd_text_pages"] = path.stat().st_size - sum(out.values())
    finally:
        con.close()
    return {k: v for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v}


def catalog_row_groups(path: Path) -> dict[str, int]:
    """Row groups per catalog table: rows a run appends go to a row group of their own, whose blocks stay partly
    empty until the file is copied (the copy cycle's slack)."""
    return {t: len(groups) for t, groups in catalog_row_group_blocks(path).items()}


def catalog_row_group_blocks(path: Path) -> dict[str, list[dict[str, int]]]:
    """Per catalog table, each row group's rows as stored (deleted ones too: DuckDB keeps them until the row group
    is rewritten), live rows and blocks: which of the two makes the copy cycle's slack."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        out = {}
        for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            (live,), = con.execute(f"SELECT count(*) FROM {t}").fetchall()
            groups = con.execute(
                f"SELECT row_group_id, max(start + count) FILTER (WHERE column_id = 0) - min(start) FILTER (WHERE "
                f"column_id = 0), count(DISTINCT block_id) FILTER (WHERE block_id >= 0) FROM pragma_storage_info('{t}') "
                "WHERE segment_type <> 'VALIDITY' GROUP BY 1 ORDER BY 1").fetchall()
            out[t] = [{"rows": rows, "blocks": blocks} for _, rows, blocks in groups]
            if out[t]:
                out[t][0]["live_rows_in_table"] = live
    finally:
        con.close()
    return out


def catalog_copies(path: Path) -> dict[str, int]:
    """Bytes of a fresh copy of the catalog as it is, and without its superseded and deleted document versions: what
    dropping them once published (as the units' history is dropped) would leave."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cut in (("as_is", None), ("without_superseded_documents", "DELETE FROM documents WHERE status <> "
                                                                         "'current'")):
            shutil.copyfile(path, Path(tmp) / "catalog.duckdb")
            con = duckdb.connect(str(Path(tmp) / "catalog.duckdb"))
            try:
                if cut:
                    con.execute(cut)
                con.execute(f"ATTACH '{Path(tmp) / name}.duckdb' AS copy (BLOCK_SIZE {BLOCK_SIZE})")
                con.execute("COPY FROM DATABASE catalog TO copy")
                con.execute("CHECKPOINT copy")
                con.execute("DETACH copy")
            finally:
                con.close()
            out[name] = (Path(tmp) / f"{name}.duckdb").stat().st_size
    return out


def read_state_tables(folder: Path) -> dict[str, int]:
    """Bytes of the published segments per read table."""
    out: dict[str, int] = {}
    for path in folder.glob("*.parquet"):
        table = path.stem.split("-")[1]
        out[table] = out.get(table, 0) + path.stat().st_size
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def read_state_document_rows(ws: Path) -> dict[str, int]:
    """Rows of the newest manifest's `documents` segments and the versions they hold: the difference is rows written
    again (a version's status changed: superseded, deleted, current again)."""
    files = ", ".join(f"'{f}'" for f in read_manifest(read_pointer(ws).path(ws))["documents"])
    (rows, versions), = duckdb.sql(f"SELECT count(*), count(DISTINCT (doc_id, version)) FROM read_parquet([{files}], "
                                   "union_by_name = true) WHERE NOT _gone").fetchall()
    return {"rows": rows, "versions": versions}


def revise(records: list[dict], round_no: int) -> int:
    """Give a tenth of the documents (a different tenth each round) a new version with a revised text."""
    edited = 0
    for r in records:
        h = int(hashlib.sha256(f"{r['doc_id']}:{round_no}".encode()).hexdigest(), 16)
        if h % 100 < SHARE * 100:
            r["version"] = str(int(r.get("version", 1)) + 1)
            r["text"] = r["text"] + f" Revised in round {round_no}."
            edited += 1
    return edited


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (BENCHMARKS / name / "docs.jsonl").read_text().splitlines() if line]


def corpus(name: str, counter, tmp: Path) -> dict:
    ws, source = tmp / name / "ws", tmp / name / "docs.jsonl"
    ws.mkdir(parents=True)
    records = [dict(r, version="1") for r in load(name)]
    write_jsonl(source, records)
    t = time.perf_counter()
    first_run = ingest(ws, source, counter)
    out = {"documents": len(records), "first_ingest_s": round(time.perf_counter() - t, 1), **first_run,
           "after_first_ingest": components(ws), "mention_lookup": mention_lookup(ws / "catalog.duckdb")}
    print(f"{name}: mention lookup {out['mention_lookup']}", flush=True)
    edited, rounds = [], []
    LANCE_WRITES.take()
    for round_no in range(1, ROUNDS + 1):
        edited.append(revise(records, round_no))
        write_jsonl(source, records)
        before = subchunk_rows(ws / "lancedb")
        run = ingest(ws, source, counter)
        written = LANCE_WRITES.take()
        rounds.append({"edited": edited[-1], **run, "lancedb_bytes_by_operation": written,
                       "lancedb_rows": lance_rows(ws / "lancedb"),
                       "doc_keyed_rows": doc_keyed(before, subchunk_rows(ws / "lancedb"),
                                                   written.get("add:subchunks", 0))})
        print(f"{name} round {round_no}: {rounds[-1]}", flush=True)
    out["edited_per_round"] = edited
    out["rounds"] = rounds
    out["after_republishes"] = components(ws)
    out["after_retention"] = past_retention(ws)
    print(f"{name}: {out['after_first_ingest']['ratio']}× after the first ingest, "
          f"{out['after_republishes']['ratio']}× after {ROUNDS} re-publishes of {SHARE:.0%}", flush=True)
    return out


def lance_rows(uri: Path) -> dict:
    """Per table: live rows, rows in its data files (deleted ones included) and fragments, at the latest version."""
    import lance

    out = {}
    for path in sorted(uri.glob("*.lance")):
        fragments = lance.dataset(str(path)).get_fragments()
        out[path.stem] = {"live": sum(f.count_rows() for f in fragments),
                          "physical": sum(f.physical_rows for f in fragments), "fragments": len(fragments)}
    return out


def subchunk_rows(uri: Path) -> set[tuple]:
    """The live sub-chunk rows, as (unit key, then what a row keyed by document version would hold); the unit key
    is "" in a table keyed by document version."""
    import lance

    dataset = lance.dataset(str(uri / "subchunks.lance"))
    table = dataset.to_table(columns=[c for c in ("unit_key", "doc_id", "doc_version", "part", "char_start", "char_end",
                                                  "acl", "collection") if c in dataset.schema.names]).to_pylist()
    return {(r.pop("unit_key", ""), *(tuple(v) if isinstance(v, list) else v for v in r.values())) for r in table}


def doc_keyed(before: set[tuple], after: set[tuple], added_bytes: int) -> dict:
    """Rows a publish added, and how many of them a table keyed by (doc_id, doc_version) with the unit mapping
    resolved per snapshot would not have written: same member, range, ACL and collection, only a new unit key;
    with the added rows' bytes in that share (an estimate: rows of one publish are alike in size)."""
    added, held = after - before, {r[1:] for r in before}
    unchanged = sum(r[1:] in held for r in added)
    return {"added": len(added), "unchanged_member_rows": unchanged,
            "bytes_not_written_est": round(added_bytes * unchanged / max(len(added), 1))}


def past_retention(ws: Path) -> dict:
    """What stays once the as-of horizon has passed the re-publishes and no reader holds an older snapshot: LanceDB's
    maintenance with a zero retention, then a publish with nothing changed (replaced texts dropped, one snapshot kept)."""
    saved = {k: os.environ.get(k) for k in ("RAG_INDEX_RETENTION_DAYS", "RAG_SNAPSHOTS_KEPT")}
    os.environ.update(RAG_INDEX_RETENTION_DAYS="0", RAG_SNAPSHOTS_KEPT="1")
    try:
        SubchunkIndex(ws / "lancedb").maintain()
        catalog = Catalog(ws / "catalog.duckdb", entry="bench storage")
        try:
            catalog.publish_snapshot(catalog.latest_publish())
        finally:
            catalog.close()
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    return components(ws)


def scale_source(n: int) -> list[dict]:
    """The corpora's documents replicated under new ids; each copy after the first has its own title and text (a
    copy number added to both), so no text, vector or embedded sub-chunk is shared with another copy."""
    pool = [r for name in NAMES for r in load(name)]
    out = []
    for k in range(n):
        r, copy = pool[k % len(pool)], k // len(pool)
        mark = {"title": f"{r['title']} ({copy})", "text": f"{r['text']} (Copy {copy}.)"} if copy else {}
        out.append(dict(r, doc_id=f"r{copy}:{r['doc_id']}", version="1", **mark))
    return out


def scale(n: int, cache: Path, counter, timer: Timed) -> dict:
    """A one-document edit at n documents: time, publish-point time, bytes written, bytes kept.

    The runs work on a copy of the built workspace and source at the paths the build used, so the documents' source
    paths are the ones the catalog holds and a run with nothing changed changes nothing."""
    built, build = cache / f"ws-{n}", cache / f".build-{n}"
    records = scale_source(n)
    if not (built / "ws" / "catalog.duckdb").exists():
        shutil.rmtree(built, ignore_errors=True)
        shutil.rmtree(build, ignore_errors=True)
        (build / "ws").mkdir(parents=True)
        write_jsonl(build / "docs.jsonl", records)
        t, cpu = time.perf_counter(), time.process_time()
        ingest(build / "ws", build / "docs.jsonl", counter)
        (build / "built.json").write_text(json.dumps({"run_s": round(time.perf_counter() - t, 1),
                                                      "cpu_s": round(time.process_time() - cpu, 1),
                                                      "after": components(build / "ws")}))
        print(f"built {n} documents in {time.perf_counter() - t:.0f} s", flush=True)
        (build / "ws" / "writer.lock").unlink(missing_ok=True)
        build.rename(built)
    ws, source = build / "ws", build / "docs.jsonl"
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(built / "ws", ws)
    shutil.copyfile(built / "docs.jsonl", source)
    try:
        return scale_runs(n, ws, source, records, built, counter, timer)
    finally:
        shutil.rmtree(build, ignore_errors=True)


def scale_runs(n: int, ws: Path, source: Path, records: list[dict], built: Path, counter, timer: Timed) -> dict:
    """A run with nothing changed, then one with one document edited, on the copy; then a reader's costs."""
    out = {"documents": n, "first_ingest": json.loads((built / "built.json").read_text())}
    for step in ("nothing_changed", "one_edit"):
        if step == "one_edit":
            records[20] = dict(records[20], version="2", text=records[20]["text"] + " Revised once.")
            write_jsonl(source, records)
        timer.reset()
        w, t, cpu = written_bytes(), time.perf_counter(), time.process_time()
        run = ingest(ws, source, counter)
        out[step] = {"run_s": round(time.perf_counter() - t, 2), "cpu_s": round(time.process_time() - cpu, 2),
                     "publish_points_s": round(timer.seconds, 2),
                     "publish_points": timer.calls, "bytes_written": written_bytes() - w, **run,
                     "after": components(ws)}
        print(f"{n} documents, {step}: {out[step]['run_s']} s, {out[step]['bytes_written']:,} bytes written",
              flush=True)
    out["components"] = largest_components(ws / "catalog.duckdb")
    print(f"link-connected components at {n} documents: {out['components']}", flush=True)
    out["reader"] = reader_costs(ws)
    print(f"reader at {n} documents: {out['reader']}", flush=True)
    out["mention_lookup"] = mention_lookup(ws / "catalog.duckdb")
    print(f"mention lookup at {n} documents: {out['mention_lookup']}", flush=True)
    return out


def largest_components(path: Path) -> dict:
    """How many link-connected components the units step keeps groups for, and the documents of the largest ones
    (known where groups are kept by signature, the code from before): an edit in a component groups it again."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (by_first,), = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'group_members'").fetchall()
        if by_first:  # the signature is on each component's first row only
            (components, documents), = con.execute("SELECT count(signature), count(*) FROM group_members").fetchall()
            return {"components": components, "documents": documents}
        sizes = [n for (n,) in con.execute("SELECT count(*) AS n FROM component_groups GROUP BY signature "
                                           "ORDER BY n DESC").fetchall()]
    finally:
        con.close()
    return {"components": len(sizes), "documents": sum(sizes), "largest": sizes[:5]}


def publish_point(n: int, tmp: Path) -> dict:
    """The publish point alone at n documents, on a catalog filled by SQL (one unit per document, no tokenising,
    no index): the first publish, then a one-document edit (old version superseded, new version and its unit
    version added, the old unit retired): seconds and bytes written by Catalog.publish_snapshot, bytes kept."""
    pool = [r for name in NAMES for r in load(name)]
    ws = tmp / f"publish-{n}"
    ws.mkdir()
    catalog = Catalog(ws / "catalog.duckdb", entry="bench storage")
    out: dict = {"documents": n}
    try:
        ids = [f"r{k // len(pool)}:{pool[k % len(pool)]['doc_id']}" for k in range(n)]
        titles = [pool[k % len(pool)]["title"] for k in range(n)]
        texts = [pool[k % len(pool)]["text"] for k in range(n)]
        catalog.insert_documents({
            "doc_id": ids, "version": ["1"] * n, "title": titles, "text": texts, "acl": [["bench"]] * n,
            "links": [[]] * n, "collection": ["scale"] * n, "content_hash": [f"{i}:{t[:24]}" for i, t in zip(ids, texts)],
            "status": ["current"] * n})
        catalog.con.execute("INSERT INTO units SELECT 'u:' || doc_id, 1, acl, collection, 100, content_hash, "
                            "'current', now(), NULL, 1 FROM documents")
        catalog.con.execute("INSERT INTO unit_members SELECT 'u:' || doc_id, 1, 0, doc_id, version, 0, 0, "
                            f"strlen(text), 100 FROM {catalog.with_texts}")
        for step in ("first_publish", "one_edit"):
            pid = catalog.begin_publish([])
            if step == "one_edit":
                doc = ids[20]
                catalog.con.execute("UPDATE documents SET status = 'superseded', valid_to = now() WHERE doc_id = ?",
                                    [doc])
                catalog.insert_documents({
                    "doc_id": [doc], "version": ["2"], "title": [titles[20]], "text": [texts[20] + " Revised once."],
                    "acl": [["bench"]], "links": [[]], "collection": ["scale"], "content_hash": [f"{doc}:v2"],
                    "status": ["current"], "valid_from": [datetime.now()], "publish_id": [pid]})
                catalog.con.execute("UPDATE units SET status = 'retired', valid_to = now() WHERE unit_id = ?",
                                    ["u:" + doc])
                catalog.con.execute("INSERT INTO units VALUES (?, 2, ['bench'], 'scale', 101, ?, 'current', now(), "
                                    "NULL, ?)", ["u:" + doc, f"{doc}:v2", pid])
                catalog.con.execute("INSERT INTO unit_members VALUES (?, 2, 0, ?, '2', 0, 0, ?, 101)",
                                    ["u:" + doc, doc, len(texts[20]) + 14])
            catalog.con.execute("CHECKPOINT")  # the edit's own write to the catalog is not the publish point's
            w, t, cpu = written_bytes(), time.perf_counter(), time.process_time()
            catalog.publish_snapshot(pid, None)
            out[step] = {"seconds": round(time.perf_counter() - t, 3), "cpu_s": round(time.process_time() - cpu, 3),
                         "bytes_written": written_bytes() - w}
    finally:
        catalog.close()
    out["bytes_kept"] = components(ws)
    out["reader"] = reader_costs(ws)
    print(f"publish point at {n} documents: {out['first_publish']}, then one edit: {out['one_edit']}; "
          f"reader: {out['reader']}", flush=True)
    return out


def reader_costs(ws: Path) -> dict:
    """Opening the published state as a reader does, and one query's worth of text look-ups (10 documents)."""
    t = time.perf_counter()
    reader = Catalog.snapshot(ws, read_pointer(ws))
    opened = time.perf_counter() - t
    try:
        keys = reader.rows("SELECT doc_id, version FROM documents WHERE status = 'current' ORDER BY hash(doc_id) "
                           "LIMIT 10")
        t = time.perf_counter()
        texts = reader.document_texts(keys)
        looked_up = time.perf_counter() - t
    finally:
        reader.close()
    return {"open_s": round(opened, 3), "texts_of_10_documents_ms": round(looked_up * 1000, 1),
            "texts_found": len(texts)}


def mention_lookup(catalog_path: Path, sizes=(1, 100, 1000)) -> dict:
    """What the title-mention token index buys: finding the stored versions that mention k titles new to the
    corpus, through the index (the units step's query before this issue) and through a substring scan of the
    stored texts (a mention is an exact occurrence of the title, so the scan misses none). Candidates of both
    are checked exactly; the results must be equal."""
    catalog = Catalog(catalog_path, entry="bench storage")
    con, texted = catalog.con, catalog.with_texts
    try:
        (has_index,), = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'mention_index'").fetchall()
        out: dict = {"index_rows": 0, "index_bytes_approx": 0}
        if has_index:
            (out["index_rows"],), = con.execute("SELECT count(*) FROM mention_index").fetchall()
            (blocks,), = con.execute("SELECT count(DISTINCT block_id) FROM pragma_storage_info('mention_index') "
                                     "WHERE block_id >= 0").fetchall()
            (block_size,), = con.execute("SELECT block_size FROM pragma_database_size()").fetchall()
            out["index_bytes_approx"] = blocks * block_size
        titles = [t for (t,) in con.execute("SELECT DISTINCT title FROM documents WHERE status = 'current' AND "
                                            "length(title) >= 8 ORDER BY hash(title) LIMIT ?", [max(sizes)]).fetchall()]
        for k in sizes:
            wanted = sorted(titles[:k])
            figures = {}
            t = time.perf_counter()
            by_scan = sorted((f, title) for f, text, ts in con.execute(
                f"SELECT f.fact_id, d.text, list(n.title) FROM doc_facts f JOIN {texted} d USING (doc_id, version) "
                "JOIN (SELECT unnest(?) AS title) n ON contains(d.text, n.title) GROUP BY ALL", [wanted]).fetchall()
                for title in mentioned_titles(text, set(ts)))
            figures["scan_s"] = round(time.perf_counter() - t, 3)
            if has_index:
                t = time.perf_counter()
                pairs = [(title, title[a:b]) for title in wanted for a, b in mention_spans(title)]
                con.register("_tokens", pa.table({"title": [p[0] for p in pairs], "token": [p[1] for p in pairs]}))
                found = con.execute(
                    "WITH need AS (SELECT title, count(DISTINCT token) AS n FROM _tokens GROUP BY title), "
                    "hits AS (SELECT t.title, m.fact_id FROM (SELECT DISTINCT title, token FROM _tokens) t "
                    "JOIN need USING (title) JOIN mention_index m ON m.token = t.token GROUP BY t.title, m.fact_id, "
                    "need.n HAVING count(*) = need.n) "
                    "SELECT h.fact_id, d.text, list(h.title) FROM hits h JOIN doc_facts f USING (fact_id) "
                    f"JOIN {texted} d USING (doc_id, version) GROUP BY ALL").fetchall()
                by_index = sorted((f, title) for f, text, ts in found for title in mentioned_titles(text, set(ts)))
                figures["index_s"] = round(time.perf_counter() - t, 3)
                figures["same_result"] = by_index == by_scan
                con.unregister("_tokens")
            out[f"titles_{k}"] = {**figures, "mentions": len(by_scan)}
    finally:
        catalog.close()
    return out


def report(results: dict) -> None:
    """The tables: bytes ÷ text per part (and without the catalog's free blocks, whose timing moves the figure),
    the bytes a document-version key would not have written, the run at scale."""
    rows = []
    for name, r in results["corpora"].items():
        for when in ("after_first_ingest", "after_republishes", "after_retention"):
            c = r[when]
            free = c.get("catalog_tables_bytes", {}).get("free", 0)
            copied, due = (copied_ratio(c["total_bytes"], c["catalog_bytes"], c["catalog_copies_bytes"],
                                        c["raw_text_bytes"], grown) if "catalog_copies_bytes" in c else ""
                           for grown in (0.0, GROWTH_SHARE))
            rows.append([name, when, f"{c['raw_text_bytes']:,}", f"{c['total_bytes']:,}", c["ratio"],
                         round((c["total_bytes"] - free) / c["raw_text_bytes"], 2), copied, due, c["catalog_ratio"],
                         c["snapshots_ratio"], c["lancedb_ratio"], c["other_ratio"]])
    s = results.get("scale")
    if s:
        for when, c in (("first ingest", s.get("first_ingest", {}).get("after")),
                        ("after one edit", s["one_edit"]["after"])):
            if c:
                rows.append([f"{s['documents']:,} docs", when, f"{c['raw_text_bytes']:,}", f"{c['total_bytes']:,}",
                             c["ratio"], "", "", "", c["catalog_ratio"], c["snapshots_ratio"], c["lancedb_ratio"],
                             c["other_ratio"]])
    print(markdown_table(["corpus", "when", "raw text B", "on disk B", "ratio", "without free blocks",
                          "catalog copied", "catalog due a copy", "catalog", "read state", "LanceDB", "other"], rows))
    keyed = [[name, sum(x["doc_keyed_rows"]["added"] for x in r["rounds"]),
              sum(x["doc_keyed_rows"]["unchanged_member_rows"] for x in r["rounds"]),
              f"{sum(x['doc_keyed_rows'].get('bytes_not_written_est', 0) for x in r['rounds']):,}"]
             for name, r in results["corpora"].items() if r["rounds"] and "doc_keyed_rows" in r["rounds"][0]]
    if keyed:
        print(markdown_table(["corpus", "sub-chunk rows added (5 rounds)", "of them unchanged members",
                              "bytes a document-version key would not write (est.)"], keyed))
    if s:
        built = s.get("first_ingest", {})
        print(markdown_table(["run at scale", "s", "CPU s", "publish points s", "bytes written"],
                             [["first ingest (build)", built.get("run_s", ""), built.get("cpu_s", ""), "", ""]] +
                             [[k, s[k]["run_s"], s[k].get("cpu_s", ""), s[k]["publish_points_s"],
                               f"{s[k]['bytes_written']:,}"] for k in ("nothing_changed", "one_edit")]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default=",".join(NAMES), help="comma-separated (empty: none)")
    parser.add_argument("--scale", type=int, default=100_000, help="documents in the scale run (0: skip it)")
    parser.add_argument("--scale-dir", default=str(Path(tempfile.gettempdir()) / "rag-storage-bench"),
                        help="where the scale workspace is built once and kept")
    parser.add_argument("--publish-point", type=int, default=100_000,
                        help="documents in the publish-point run (0: skip it)")
    parser.add_argument("--deleted-share", type=float, default=None,
                        help="the index rewrites a fragment once this share of its rows is deleted (default: the code's)")
    parser.add_argument("--out", default=str(results_path("storage")))
    parser.add_argument("--keep", metavar="DIR", help="build the workspaces in this new folder and keep them "
                        "(for a look at their files)")
    parser.add_argument("--print", nargs="+", metavar="JSON",
                        help="print the tables of these result files, run nothing")
    add_benchmarks_option(parser)
    args = parser.parse_args()
    if args.print:
        for path in args.print:
            print(path)
            report(json.loads(Path(path).read_text()))
        return
    global BENCHMARKS
    BENCHMARKS = benchmarks_option(parser, args)
    if args.deleted_share is not None:
        index_module.DELETED_SHARE = args.deleted_share
    global LANCE_WRITES
    counter, timer, LANCE_WRITES = default_counter(), Timed(), LanceWrites()
    results: dict = {"code": CODE, "benchmarks": str(BENCHMARKS), "rounds": ROUNDS, "share": SHARE,
                     "deleted_share": getattr(index_module, "DELETED_SHARE", None), "corpora": {},
                     "command": "python " + " ".join(sys.argv)}
    with contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory() as tmp:
        for name in filter(None, args.corpora.split(",")):
            results["corpora"][name] = corpus(name, counter, Path(tmp))
        if args.publish_point:
            results["publish_point"] = publish_point(args.publish_point, Path(tmp))
        if args.scale:
            Path(args.scale_dir).mkdir(parents=True, exist_ok=True)
            results["scale"] = scale(args.scale, Path(args.scale_dir), counter, timer)
    report(results)
    write_json(args.out, results)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
