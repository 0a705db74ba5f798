"""Bucket sources: `s3://bucket/prefix` on any S3-compatible store, read like a folder through a mirror of it.

The bucket is the state of record; the mirror, a folder inside the workspace, is only a cache. Each run lists the
prefix (ListObjectsV2), downloads only the objects whose ETag or size changed, deletes the mirrored files whose
object vanished (so the folder scan sees a deletion), and sets each file's mtime to the object's LastModified (so a
file versioned by its mtime gets the label it would get in a folder). Only objects a load reads are mirrored, and
folder ACL files are objects named `.access.yaml`. A key that would leave the mirror is refused with one line.
Credentials and endpoint are boto3's usual AWS variables; no message names a credential.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from rag.sources.documents import Rejected
from rag.sources.formatted import MAX_BYTES as MAX_FORMATTED_BYTES
from rag.sources.loaders import MAX_FILE_BYTES, watched

SCHEME = "s3://"
MIRRORS = "buckets"   # inside the workspace: one folder per bucket source
ORIGIN = "origin.json"   # beside a mirror's files: its URI and the keys refused
MAX_OBJECT_BYTES = max(MAX_FILE_BYTES, MAX_FORMATTED_BYTES)
_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_BUCKET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BucketError(RuntimeError):
    """A bucket source that cannot be read: one line naming the source and the problem, never a credential."""


def is_bucket(source: str | Path) -> bool:
    return str(source).startswith(SCHEME)


def split_sources(value: str) -> list[str]:
    """Sources separated by os.pathsep, an s3:// URI kept whole (its `:` is not a separator)."""
    return [s for s in re.split(rf"{re.escape(os.pathsep)}(?!//)", value) if s]


@dataclass(frozen=True)
class BucketUri:
    bucket: str
    prefix: str   # without leading or trailing slash; empty: the whole bucket

    @classmethod
    def parse(cls, uri: str) -> BucketUri:
        """The bucket and prefix of `s3://bucket/prefix`, or a one-line BucketError saying what is wrong."""
        if not is_bucket(uri):
            raise BucketError(f"{uri}: not an s3:// URI")
        bucket, _, prefix = uri[len(SCHEME):].partition("/")
        problem = ("holds white space or control characters" if any(c.isspace() for c in uri) or _CONTROL.search(uri)
                   else "holds credentials, which are not read from the URI; set AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY instead" if "@" in bucket
                   else "has a query or fragment, which is not read" if "?" in uri or "#" in uri
                   else "names no bucket" if not bucket
                   else "names a bucket S3 does not allow" if not _BUCKET_NAME.match(bucket)
                   else "has an empty, '.' or '..' part in its prefix"
                   if any(p in ("", ".", "..") for p in prefix.strip("/").split("/")) and prefix.strip("/")
                   else None)
        if problem:
            raise BucketError(f"{_shown_uri(uri)}: {problem}; expected s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def key_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""


@dataclass(frozen=True)
class Listed:
    etag: str
    size: int
    modified_ns: int


def listing_snapshot(uri: str) -> dict[str, tuple[str, int]]:
    """Key (below the prefix) → (ETag, size) of every object a load would read: the listing alone, no body read."""
    objects, _ = list_prefix(BucketUri.parse(uri), client())
    return {rel: (o.etag, o.size) for rel, o in objects.items()}


def client():
    """An S3 client configured as boto3 configures itself (AWS_* variables, read now: a session of its own, so a
    changed key is used at the next run), with a short connect timeout."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or ""
    if endpoint and not re.match(r"^https?://[^\s/]+", endpoint):
        raise BucketError("AWS_ENDPOINT_URL: is not an http(s):// URL; expected http(s)://host:port")
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise BucketError("s3:// sources need boto3: pip install 'longunit-rag[production]'") from None
    return boto3.session.Session().client("s3", config=Config(connect_timeout=5, read_timeout=60,
                                            retries={"max_attempts": 3, "mode": "standard"}))


def list_prefix(where: BucketUri, s3) -> tuple[dict[str, Listed], list[tuple[str, str]]]:
    """The objects below the prefix a load reads, by relative key, and the keys refused (key, reason)."""
    objects: dict[str, Listed] = {}
    refused: list[tuple[str, str]] = []
    with _one_line(where.uri):
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.key_prefix)
        for page in pages:
            for o in page.get("Contents", []):
                rel = o["Key"][len(where.key_prefix):]
                if rel.endswith("/"):   # a console's folder marker holds nothing
                    continue
                problem = unsafe_key(rel) or (f"larger than {MAX_OBJECT_BYTES // 2**20} MB: not downloaded"
                                              if o["Size"] > MAX_OBJECT_BYTES else None)
                if problem:
                    refused.append((o["Key"], problem))
                elif watched(Path(rel)):
                    objects[rel] = Listed(o["ETag"].strip('"'), o["Size"], _ns(o["LastModified"]))
    folders = {p.as_posix() for rel in objects for p in Path(rel).parents}
    for rel in sorted(set(objects) & folders):   # "a.md" and "a.md/b.md": a file cannot also be a folder
        refused.append((where.key_prefix + rel, "is also the folder of other keys (not downloaded)"))
        del objects[rel]
    return objects, refused


def unsafe_key(rel: str) -> str | None:
    """Why a key (below the prefix) cannot be a file of the mirror, or None."""
    parts = rel.split("/")
    if rel.startswith("/"):
        return "absolute key (refused: it would name a file outside the mirror)"
    if any(p in ("", ".", "..") for p in parts):
        return "key with an empty, '.' or '..' part (refused: it could name a file outside the mirror)"
    if _CONTROL.search(rel):
        return "key holds a control character (refused)"
    if any(len(p.encode()) > 255 for p in parts):
        return "key has a part longer than 255 bytes (refused: no file system holds it)"
    return None


def mirror_folder(uri: str, workspace: str | Path) -> Path:
    """Where the mirror of this bucket source lives in the workspace (its files in `files/`)."""
    where = BucketUri.parse(uri)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{where.bucket}_{where.prefix}").strip("_")[:60]
    return Path(workspace).resolve() / MIRRORS / f"{slug}-{hashlib.sha256(where.uri.encode()).hexdigest()[:10]}"


def mirror(uri: str, workspace: str | Path, s3=None) -> Path:
    """Bring the mirror to the prefix as listed now; the folder to scan. A listing that fails changes nothing (what
    is published stays); a download that fails leaves whole files, each recorded as what it is."""
    where, s3 = BucketUri.parse(uri), s3 or client()
    home = mirror_folder(uri, workspace)
    files, manifest_path = home / "files", home / "manifest.json"
    objects, refused = list_prefix(where, s3)
    files.mkdir(parents=True, exist_ok=True)
    known = {rel: entry for rel, entry in _read_json(manifest_path).get("objects", {}).items() if rel in objects}
    _remove_unlisted(files, set(objects))
    try:
        for rel, o in sorted(objects.items()):
            if _intact(files / rel, known.get(rel), o):
                continue
            known.pop(rel, None)
            if entry := _download(s3, where, rel, o, files / rel, home):
                known[rel] = entry
    finally:
        _write_json(manifest_path, {"objects": known})
    _write_json(home / ORIGIN, {"uri": where.uri, "refused": refused})
    return files


def check_bucket_sources(sources: list[str], partitioned: bool) -> None:
    """Refuse, with one line, a malformed s3:// source, or one in a workspace partitioned by collection."""
    for source in filter(is_bucket, sources):
        BucketUri.parse(source)
        if partitioned:
            raise BucketError(f"{source}: a bucket source is read as a whole workspace, not partitioned by "
                              "collection; ingest it without --partitioned / RAG_PARTITIONS")


def local_sources(sources: list[str], workspace: str | Path) -> list[str]:
    """Each source as the folder a run scans: a bucket source's mirror (brought up to date), any other resolved."""
    return [str(mirror(s, workspace)) if is_bucket(s) else str(Path(s).resolve()) for s in sources]


@dataclass(frozen=True)
class Naming:
    """How a mirror's paths are shown: `s3://bucket/prefix/key`, never the cache's path."""

    folder: str
    uri: str
    refused: tuple[tuple[str, str], ...] = ()

    def __call__(self, text: str) -> str:
        return text.replace(self.folder + "/", self.uri + "/").replace(self.folder, self.uri)

    def rejected(self, r: Rejected) -> Rejected:
        return Rejected(self(r.source_path), self(r.reason), r.doc_id, r.holds and self(r.holds), r.empty,
                        r.withheld)

    def refusals(self) -> list[Rejected]:
        bucket = self.uri[len(SCHEME):].partition("/")[0]
        return [Rejected(f"{SCHEME}{bucket}/{key}", reason) for key, reason in self.refused]


def naming(folder: str | Path) -> Naming | None:
    """The naming of a scanned folder that is a bucket's mirror, or None for any other folder."""
    folder = Path(folder)
    if folder.name != "files" or folder.parent.parent.name != MIRRORS:
        return None
    origin = _read_json(folder.parent / ORIGIN)
    if "uri" not in origin:
        return None
    return Naming(str(folder), origin["uri"], tuple(tuple(r) for r in origin.get("refused", [])))


def _remove_unlisted(files: Path, wanted: set[str]) -> None:
    """Delete every file of the mirror no listed object names (a vanished object), and the folders left empty."""
    for dirpath, dirnames, filenames in os.walk(files, topdown=False):
        here = Path(dirpath)
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            path = here / name
            if path.relative_to(files).as_posix() not in wanted or path.is_symlink():
                path.unlink()
        if here != files and not any(here.iterdir()):
            here.rmdir()


def _intact(path: Path, recorded: list | None, o: Listed) -> bool:
    """Whether the mirrored file is the listed object as the manifest recorded it (ETag, size, mtime)."""
    if not recorded or recorded[:2] != [o.etag, o.size]:
        return False
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return st.st_size == o.size and st.st_mtime_ns == recorded[2]


def _download(s3, where: BucketUri, rel: str, o: Listed, path: Path, home: Path) -> list | None:
    """Write the object to a temporary file, then rename it into place with the object's LastModified as its mtime
    (the listing's, to the millisecond, unless the object changed since it was listed); its manifest entry, or None
    if it was deleted since it was listed (then it is gone from the mirror too, as at the next listing)."""
    key = where.key_prefix + rel
    if not path.resolve().is_relative_to((home / "files").resolve()):
        raise BucketError(f"{where.uri}/{rel}: resolves outside the mirror (refused)")
    path.parent.mkdir(parents=True, exist_ok=True)
    part = home / "partial"
    with _one_line(f"{SCHEME}{where.bucket}/{key}"):
        try:
            answer = s3.get_object(Bucket=where.bucket, Key=key)
        except s3.exceptions.NoSuchKey:
            path.unlink(missing_ok=True)
            return None
        with open(part, "wb") as out:
            shutil.copyfileobj(answer["Body"], out, 2**20)
    etag = answer["ETag"].strip('"')
    modified = o.modified_ns if etag == o.etag else _ns(answer["LastModified"])
    os.utime(part, ns=(modified, modified))
    os.replace(part, path)
    return [etag, answer["ContentLength"], modified, answer.get("VersionId")]


def _ns(when) -> int:
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: dict) -> None:
    part = path.with_suffix(".partial")
    part.write_text(json.dumps(data, sort_keys=True))
    os.replace(part, path)


class _one_line:
    """Turns what boto3 raises into a BucketError naming the place and the problem, with every credential removed."""

    def __init__(self, where: str):
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or isinstance(err, BucketError):
            return False
        if isinstance(err, OSError) and not type(err).__module__.startswith(("botocore", "urllib3")):
            raise BucketError(f"{self.where}: cannot write the mirror: {err.strerror or err}") from None
        raise BucketError(_redacted(f"{self.where}: {_problem(err)}")) from None


def _problem(err: BaseException) -> str:
    code = getattr(err, "response", {}).get("Error", {}).get("Code", "") if hasattr(err, "response") else ""
    kind = type(err).__name__
    if code in ("NoSuchBucket",):
        return "no such bucket"
    if code in ("AccessDenied", "403", "AllAccessDisabled"):
        return "access denied (the credentials may not list or read this prefix)"
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId", "ExpiredToken",
                "InvalidToken"):
        return f"the store refused the credentials ({code}); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    if kind == "NoCredentialsError":
        return "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    if kind in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError"):
        return "cannot reach the object store (check AWS_ENDPOINT_URL and the network)"
    if code:
        return f"the store answered {code}"
    return f"unexpected {kind}: {' '.join(str(err).split())[:200]}"


def _redacted(message: str) -> str:
    for name in _CREDENTIALS:
        secret = os.environ.get(name) or ""
        if len(secret) >= 4:
            message = message.replace(secret, "***")
    return message


def _shown_uri(uri: str) -> str:
    """The URI without what could be a credential before an `@`, printable on one line."""
    head, at, tail = uri[len(SCHEME):].rpartition("@") if "@" in uri else ("", "", uri[len(SCHEME):])
    return _redacted(SCHEME + ("***@" if at else "") + tail).encode("unicode_escape").decode("ascii")[:200]
