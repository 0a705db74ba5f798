"""The catalog's tables, created on first open; `rag.store.catalog` is the only code that runs this."""

# Texts are not in the catalog: `documents.content_hash` names them in the text files (rag.store.text_store), which
# `text_files` lists and every reader shares.
# `documents` and `units` have no primary key: its index (an ART, rewritten whole at every checkpoint) was a quarter
# of a HotpotQA catalog and most of its freed blocks (bench/storage.py), while every read and update of them is a
# join or a scan. Their keys are unique by construction (a version is inserted once, by the one writer).
KEYLESS = {
    "documents": """documents (
    doc_id VARCHAR NOT NULL, version VARCHAR NOT NULL, title VARCHAR,
    acl VARCHAR[], links VARCHAR[], collection VARCHAR, source VARCHAR, source_path VARCHAR,
    content_hash VARCHAR, meta_hash VARCHAR,
    status VARCHAR NOT NULL,            -- current | superseded | deleted
    valid_from TIMESTAMP, valid_to TIMESTAMP, publish_id BIGINT, path_tail VARCHAR)""",
    "units": """units (
    unit_id VARCHAR NOT NULL, unit_version INTEGER NOT NULL, acl VARCHAR[], collection VARCHAR,
    tokens INTEGER, content_hash VARCHAR,
    status VARCHAR NOT NULL,            -- pending | current | retired | abandoned
    valid_from TIMESTAMP, valid_to TIMESTAMP, publish_id BIGINT)"""}
SCHEMA = "".join(f"CREATE TABLE IF NOT EXISTS {ddl};\n" for ddl in KEYLESS.values()) + """
-- A version's source path is held as what follows its source (`path_tail`, `source_path` NULL) when it starts
-- with it; `SOURCE_PATH` puts it back together. A catalog from before gets the column.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS path_tail VARCHAR;
CREATE TABLE IF NOT EXISTS unit_members (
    unit_id VARCHAR, unit_version INTEGER, position INTEGER, doc_id VARCHAR, doc_version VARCHAR,
    part INTEGER, char_start INTEGER, char_end INTEGER, tokens INTEGER);
CREATE TABLE IF NOT EXISTS publish_log (
    publish_id BIGINT PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP, status VARCHAR,
    sources VARCHAR[], documents_new INTEGER, documents_superseded INTEGER, documents_deleted INTEGER,
    units_retired VARCHAR[], subchunks_embedded INTEGER, lance_version BIGINT);
-- Units a publish made are the ones whose publish_id is its own; the list of their keys it once kept goes.
ALTER TABLE publish_log DROP COLUMN IF EXISTS units_published;
-- Set once a publish's index step brought every row to its units: the next publish's index step reads the change only.
ALTER TABLE publish_log ADD COLUMN IF NOT EXISTS index_synced BOOLEAN;
-- What the publish's units were planned from (the catalog's plan_inputs): a next publish with the same keeps them.
ALTER TABLE publish_log ADD COLUMN IF NOT EXISTS plan_inputs VARCHAR;
CREATE TABLE IF NOT EXISTS quarantine (
    publish_id BIGINT, severity VARCHAR, source_path VARCHAR, doc_id VARCHAR, reason VARCHAR, seen_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS store_identity (store_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS text_files (name VARCHAR PRIMARY KEY, rows BIGINT);
-- Planning facts per document version and component groups by signature (see rag.store.facts). A fact id is an
-- INTEGER (2^31 versions ever planned): with `BLOCK_SIZE` blocks DuckDB stores a BIGINT uncompressed, 8 bytes a row.
CREATE TABLE IF NOT EXISTS doc_facts (
    fact_id INTEGER NOT NULL, doc_id VARCHAR NOT NULL, version VARCHAR NOT NULL,
    block_tokens INTEGER NOT NULL, text_chars INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS doc_parts (
    doc_id VARCHAR, version VARCHAR, cap INTEGER, part INTEGER, char_start INTEGER, char_end INTEGER, tokens INTEGER);
DROP TABLE IF EXISTS mention_index;  -- replaced by a substring scan of the stored texts (rag.store.facts)
CREATE TABLE IF NOT EXISTS doc_mentions (fact_id INTEGER, title VARCHAR);
CREATE TABLE IF NOT EXISTS mention_titles (title VARCHAR);
-- Each document's place in its component's groups, the component's signature on its smallest id's row only: an
-- edit that changes a signature rewrites only the rows that changed (keyed by signature, all were written again).
DROP TABLE IF EXISTS component_groups;
CREATE TABLE IF NOT EXISTS group_members (doc_id VARCHAR, grp INTEGER, position INTEGER, signature VARCHAR);
-- What the last staged units were planned from, per document (rag.store.plan_change), and the plan inputs of them
-- all: when those are the current units' inputs, a publish re-plans only the components a change reaches.
CREATE TABLE IF NOT EXISTS plan_docs (doc_id VARCHAR, title VARCHAR, plan_key UBIGINT, first VARCHAR);
CREATE TABLE IF NOT EXISTS plan_stamp (inputs VARCHAR);
-- What each source file was at its last reading, and what each of its inputs yielded (see rag.sources.scan).
CREATE TABLE IF NOT EXISTS source_files (
    path VARCHAR, source VARCHAR, root VARCHAR, size BIGINT, mtime_ns BIGINT, ctime_ns BIGINT, ino BIGINT,
    content_hash VARCHAR, settings VARCHAR, checked_ns BIGINT);
-- A record's content hash and source path are NULL where they are the default (rag.store.catalog_documents); its
-- ACL, links and collection are not kept: a version is inserted or updated from its file, read again.
CREATE TABLE IF NOT EXISTS source_records (
    file VARCHAR, source VARCHAR, position INTEGER, line_hash VARCHAR, source_path VARCHAR, doc_id VARCHAR,
    version VARCHAR, content_hash VARCHAR, meta_hash VARCHAR, reason VARCHAR, holds VARCHAR, empty BOOLEAN);
ALTER TABLE source_records DROP COLUMN IF EXISTS acl;
ALTER TABLE source_records DROP COLUMN IF EXISTS links;
ALTER TABLE source_records DROP COLUMN IF EXISTS collection;
ALTER TABLE source_records ADD COLUMN IF NOT EXISTS withheld BOOLEAN;  -- hidden by its ACL sources (rag.sources.access)
-- Each ACL a publish replaced in place (a folder ACL file's or a document's own edit), for a document's history.
CREATE TABLE IF NOT EXISTS acl_changes (
    doc_id VARCHAR, version VARCHAR, acl_before VARCHAR[], acl VARCHAR[], publish_id BIGINT, changed_at TIMESTAMP);
"""
# The writer's documents' source path, whole (a row from before `path_tail` holds it in `source_path`). A JSONL
# line's path is its file (the version's source) and `:N`, a file's path starts with its folder: held whole, the
# source was stored twice in every row.
SOURCE_PATH = "coalesce({p}source_path, {p}source || {p}path_tail)"


def source_path_sql(alias: str = "") -> str:
    """`SOURCE_PATH` over a `documents` row of the writer's catalog (aliased `alias`)."""
    return SOURCE_PATH.format(p=f"{alias}." if alias else "")


def split_source_paths(columns: dict[str, list]) -> dict[str, list]:
    """Document rows to write with each source path that starts with its source held as the rest (`path_tail`)."""
    if "source_path" not in columns:
        return columns
    sources = columns.get("source") or [None] * len(columns["source_path"])
    tails = [p[len(s):] if s and p and p.startswith(s) else None for s, p in zip(sources, columns["source_path"])]
    paths = [None if t is not None else p for t, p in zip(tails, columns["source_path"])]
    return {**columns, "source_path": paths, "path_tail": tails}


# A new catalog file's block size: DuckDB's default (256 KiB) gives each of the ~15 small tables a quarter
# megabyte at least; 16 KiB (DuckDB's smallest) made a HotpotQA catalog 1.46x -> 1.20x of its text against 64 KiB
# (bench/storage.py). Existing files keep theirs. At 16 KiB DuckDB bit-packs no integer column, so an integer costs
# its width; 32 and 64 KiB blocks bit-pack them but made the whole catalog larger (bench/storage.py).
BLOCK_SIZE = 16384
# Created by the first write of a setting, so opening an older catalog (or a read-only one) needs no migration.
SETTINGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS workspace_settings (key VARCHAR PRIMARY KEY, value VARCHAR, updated_at TIMESTAMP);
"""


def drop_primary_keys(con) -> None:
    """Rebuild the `KEYLESS` tables of an older catalog that still carry a primary key, in one transaction."""
    keyed = sorted(t for (t,) in con.execute(
        "SELECT DISTINCT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
        "AND table_name IN (SELECT unnest(?::VARCHAR[]))", [list(KEYLESS)]).fetchall())
    _migrate(con, [statement for table in keyed for statement in (
        f"CREATE TABLE _keyless_{KEYLESS[table]}", f"INSERT INTO _keyless_{table} BY NAME SELECT * FROM {table}",
        f"DROP TABLE {table}", f"ALTER TABLE _keyless_{table} RENAME TO {table}")])


def narrow_fact_ids(con) -> None:
    """Make an older catalog's BIGINT fact ids INTEGER (see `SCHEMA`) in one transaction: each table written once."""
    wide = [t for (t,) in con.execute(
        "SELECT table_name FROM duckdb_columns() WHERE table_name IN ('doc_facts', 'doc_mentions') AND schema_name = "
        "'main' AND column_name = 'fact_id' AND data_type = 'BIGINT' ORDER BY 1").fetchall()]
    _migrate(con, [f"ALTER TABLE {table} ALTER fact_id TYPE INTEGER" for table in wide])


def _migrate(con, statements: list[str]) -> None:
    """Run these statements in one transaction and checkpoint (nothing to do: no transaction)."""
    if not statements:
        return
    con.execute("BEGIN")
    try:
        for statement in statements:
            con.execute(statement)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    con.execute("CHECKPOINT")


def unit_key_sql(alias: str = "") -> str:
    """`rag.units.long_units.unit_key` in SQL, over a `units` row: the one place SQL spells `unit_id@version`."""
    prefix = f"{alias}." if alias else ""
    return f"{prefix}unit_id || '@' || {prefix}unit_version"


def digest_sql(values: list[str]) -> tuple[str, str]:
    """A row's digest: two UBIGINT expressions over these SQL values (DuckDB's hash of them, and of their
    length-prefixed concatenation: a collision of one field's hash does not collide the other). A reader compares a
    row with the last snapshot's by it; md5 of the same text took 2.5 times as long at 742K rows."""
    text = "concat(" + ", ".join(f"length({v}), ':', {v}" for v in values) + ")"
    return f"hash({', '.join(values)})", f"hash({text})"
