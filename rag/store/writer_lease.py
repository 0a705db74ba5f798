"""One writer per store across machines: a Postgres advisory lock held by a connection of its own.

Postgres releases the lock when the holder's session ends, so nothing goes stale. The server ends it on its own
side: a thread of the holder runs a query every `timeout / 4` seconds, and the session sets `idle_session_timeout`
($RAG_WRITER_LEASE_TIMEOUT_S, 30 s), so a holder that stops answering (a paused process, a machine gone, a
dropped network) loses the lock within that time; the session's server-side TCP keepalives (5 s idle, then 3 probes
2 s apart) also end it once the peer's machine is unreachable. Each grant bumps the store's epoch
(`rag_writer_epochs`), which the new holder stamps into the bucket's pointers before it writes anything (fencing,
rag.store.snapshot_objects), and the holder asks `check()` before it makes a publish current.
Named by $RAG_WRITER_LOCK_URL (a libpq URL, e.g. the Dagster instance's database).
"""
from __future__ import annotations

import hashlib
import os
import threading
import time

from rag.store.url_settings import LEASE_URL, masked, redact, setting

LEASE_URL_ENV = LEASE_URL


class LeaseLost(RuntimeError):
    """The writer's lease ended while it held it (connection cut, or terminated): it must not publish."""


class LeaseUnavailable(RuntimeError):
    """The lease's database could not be reached; the message names the setting, its password masked."""


def lease_timeout_s() -> float:
    """Seconds after which the server ends a silent holder's session: $RAG_WRITER_LEASE_TIMEOUT_S or 30."""
    return float(os.environ.get("RAG_WRITER_LEASE_TIMEOUT_S", "30"))


EPOCHS = ("CREATE TABLE IF NOT EXISTS rag_writer_epochs (lease_key bigint PRIMARY KEY, epoch bigint NOT NULL)",
          "INSERT INTO rag_writer_epochs VALUES (%s, 1) ON CONFLICT (lease_key) DO UPDATE "
          "SET epoch = rag_writer_epochs.epoch + 1 RETURNING epoch")


def lease_url() -> str | None:
    """$RAG_WRITER_LOCK_URL, parsed (UrlSettingError when malformed), or None when unset."""
    return setting(LEASE_URL_ENV)


class PostgresLease:
    """The advisory lock on a 64-bit key derived from the store's name, on a dedicated session."""

    def __init__(self, url: str, name: str, entry: str):
        self.url, self.name, self.entry = url, masked(name), entry  # the name is shown; the key is the name's own
        self.key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
        self.con, self.epoch, self.timeout_s = None, None, lease_timeout_s()
        self._guard, self._stop = threading.Lock(), threading.Event()

    def acquire(self, deadline: float) -> bool:
        """Take the lock, polling until `deadline` (time.monotonic()); False if another session still holds it."""
        import psycopg2  # the production extra (dagster-postgres brings it)

        # Keepalives: a holder whose machine vanished is noticed by the server in seconds, not hours.
        try:
            self.con = psycopg2.connect(self.url, keepalives=1, keepalives_idle=5, keepalives_interval=2,
                                        keepalives_count=3,
                                        application_name=f"rag writer pid {os.getpid()} ({self.entry})"[:63])
        except psycopg2.Error as err:
            reason = redact((str(err).strip().splitlines() or ["no reason given"])[0])
            raise LeaseUnavailable(f"{LEASE_URL_ENV}: cannot connect to {masked(self.url)} ({reason[:200]})") from None
        self.con.autocommit = True
        with self.con.cursor() as cur:
            cur.execute("SELECT set_config('idle_session_timeout', %s, false), "
                        "set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '2', "
                        "false), set_config('tcp_keepalives_count', '3', false)", (f"{int(self.timeout_s * 1000)}",))
        while True:
            with self.con.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
                if cur.fetchone()[0]:
                    self.epoch = self._next_epoch()
                    threading.Thread(target=self._heartbeat, daemon=True, name="rag-writer-lease").start()
                    return True
            if time.monotonic() >= deadline:
                self.close()
                return False
            time.sleep(0.1)

    def holder(self) -> str:
        """Who holds the lock, as the holder's connection named itself."""
        import psycopg2

        try:
            with psycopg2.connect(self.url) as con, con.cursor() as cur:
                cur.execute("SELECT a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
                            "USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s "
                            "AND l.objid = %s AND l.objsubid = 1", self._parts())
                row = cur.fetchone()
        except psycopg2.Error:
            row = None
        return f"{row[0]}, since {row[1]:%Y-%m-%dT%H:%M:%S}" if row else "another machine"

    def check(self) -> None:
        """Raise LeaseLost unless this session still holds the lock."""
        import psycopg2

        try:
            with self._guard, self.con.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                            "pid = pg_backend_pid() AND classid = %s AND objid = %s AND objsubid = 1", self._parts())
                held = cur.fetchone()[0] > 0
        except (psycopg2.Error, AttributeError) as err:
            raise LeaseLost(f"{self.name}: the writer lease's connection is gone ({redact(str(err).strip())[:120]}); "
                            "this run must not publish") from None
        if not held:
            raise LeaseLost(f"{self.name}: the writer lease is no longer held; this run must not publish")

    def _next_epoch(self) -> int:
        """The store's next epoch, taken while holding the lock (a concurrent first CREATE TABLE may race: retried)."""
        import psycopg2

        for attempt in range(3):
            try:
                with self.con.cursor() as cur:
                    cur.execute(EPOCHS[0])
                    cur.execute(EPOCHS[1], (self.key,))
                    return int(cur.fetchone()[0])
            except psycopg2.errors.UniqueViolation:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _heartbeat(self) -> None:
        """Keep the session from idling out while this process is alive; a paused process stops, and is ended."""
        import psycopg2

        while not self._stop.wait(self.timeout_s / 4):
            try:
                with self._guard, self.con.cursor() as cur:
                    cur.execute("SELECT 1")
            except (psycopg2.Error, AttributeError):
                return  # the session is gone: `check()` says so

    def close(self) -> None:
        self._stop.set()
        with self._guard:
            if self.con is not None:
                try:
                    self.con.close()  # ending the session releases the lock
                finally:
                    self.con = None

    def _parts(self) -> tuple[int, int]:
        unsigned = self.key & 0xFFFFFFFFFFFFFFFF
        return unsigned >> 32, unsigned & 0xFFFFFFFF
