"""Objects on S3-compatible storage, with the two conditional writes that make a pointer or a lease safe.

Credentials and endpoint come from the environment, as LanceDB reads them: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, and AWS_ENDPOINT_URL (+ AWS_ALLOW_HTTP=true) for a server other than AWS.
`create` is a PutObject with If-None-Match: *, `swap` one with If-Match: <etag>; both fail instead of
overwriting a change another process made since it read the object.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from rag.store.url_settings import ENDPOINT_URL, masked, setting


@dataclass(frozen=True)
class Versioned:
    body: bytes
    etag: str


def is_object_uri(uri: str) -> bool:
    return str(uri).startswith("s3://")


class ObjectStore:
    """A bucket and key prefix named by an s3:// URI."""

    def __init__(self, uri: str):
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"{masked(uri)}: not an object-storage URI (expected s3://bucket/prefix)")
        setting(ENDPOINT_URL)  # boto3 reads it; a malformed one is refused here, by name
        import boto3  # the production extra; a local workspace never needs it
        self.uri, self.bucket, self.prefix = uri, parsed.netloc, parsed.path.strip("/")
        self.client = boto3.client("s3")

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def get(self, name: str) -> Versioned | None:
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=self.key(name))
        except self.client.exceptions.NoSuchKey:
            return None
        return Versioned(r["Body"].read(), r["ETag"])

    def get_if_changed(self, name: str, etag: str | None) -> Versioned | None:
        """The object unless it is still the version `etag` (or absent): one request, no body when unchanged."""
        if etag is None:
            return self.get(name)
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=self.key(name), IfNoneMatch=etag)
        except self.client.exceptions.NoSuchKey:
            return None
        except self.client.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("304", "NotModified"):
                return None
            raise
        return Versioned(r["Body"].read(), r["ETag"])

    def keys(self, under: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.key(under))
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def folders(self, under: str) -> list[str]:
        """The names one level below `under/` (relative to the prefix, without a trailing slash)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.key(under), Delimiter="/")
        base = len(self.key(""))
        return [p["Prefix"][base:].rstrip("/") for page in pages for p in page.get("CommonPrefixes", [])]

    def put(self, name: str, body: bytes) -> str:
        return self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=body)["ETag"]

    def create(self, name: str, body: bytes) -> str | None:
        """Write the object only if none exists; its ETag, or None if another writer created it first."""
        return self._conditional(name, body, IfNoneMatch="*")

    def swap(self, name: str, body: bytes, etag: str) -> str | None:
        """Replace the object only if it is still the version `etag`; the new ETag, or None if it changed."""
        return self._conditional(name, body, IfMatch=etag)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key(name))

    def size(self) -> int:
        """Bytes stored under the prefix (every object, every kept version of a LanceDB table)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        return sum(o["Size"] for page in pages for o in page.get("Contents", []))

    def _conditional(self, name: str, body: bytes, **condition) -> str | None:
        try:
            return self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=body, **condition)["ETag"]
        except self.client.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return None
            raise
