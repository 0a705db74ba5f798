"""URL settings, parsed once before use and only ever shown with their credentials masked.

RAG_WRITER_LOCK_URL (libpq), RAG_LANCE_URI and RAG_SNAPSHOT_URI (s3:// or, for the index, a folder),
OPENAI_BASE_URL and AWS_ENDPOINT_URL (http/https). A malformed value is refused with one line that names the
setting and the problem without echoing the value; `redact` removes every known secret from a message as the
last line of defence for what libraries raise.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

LEASE_URL = "RAG_WRITER_LOCK_URL"
LANCE_URI = "RAG_LANCE_URI"
SNAPSHOT_URI = "RAG_SNAPSHOT_URI"
LLM_URL = "OPENAI_BASE_URL"
ENDPOINT_URL = "AWS_ENDPOINT_URL"
URL_SETTINGS = (LEASE_URL, LANCE_URI, SNAPSHOT_URI, LLM_URL, ENDPOINT_URL)
KEY_SETTINGS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OPENAI_API_KEY", "DAGSTER_PG_PASSWORD")
MASK = "***"
MIN_SECRET_CHARS = 4  # a shorter secret cannot be told from ordinary words in a message

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/{1,3}")  # no slash: "user:password@host", not a scheme
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SECRET_PARAM = re.compile(r"pass|secret|token|key|signature|credential|auth", re.I)


class UrlSettingError(ValueError):
    """A URL setting that cannot be used; the message names the setting and the problem, never its value."""


def masked(value: str) -> str:
    """The URL with its password (or a lone user token) and key-like query values replaced by ***."""
    head, sep, query = str(value).partition("?")
    if userinfo := _userinfo(head):
        start, at = userinfo
        user, _ = _user_and_secret(head[start:at])
        head = head[:start] + (f"{user}:{MASK}" if user is not None else MASK) + head[at:]
    if sep:
        query = "&".join(f"{k}={MASK}" if _SECRET_PARAM.search(k) else f"{k}={v}" if v else k
                         for k, v in _params(query))
    return head + sep + query


def postgres_url(name: str, value: str) -> str:
    """A libpq URL: postgresql://user:password@host:port/database."""
    return _checked(name, value, ("postgresql", "postgres"), "postgresql://user:password@host:port/database")


def object_uri(name: str, value: str) -> str:
    """An s3://bucket/prefix URI; credentials come from AWS_* variables, never from the URI."""
    _checked(name, value, ("s3",), "s3://bucket/prefix")
    if "@" in urlsplit(value).netloc:
        raise UrlSettingError(f"{name}: holds credentials, which are not read from the URI; set "
                              "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
    if urlsplit(value).query:
        raise UrlSettingError(f"{name}: has a query (?…), which is not read; expected s3://bucket/prefix")
    return value


def index_location(name: str, value: str) -> str:
    """The index's place: a folder, or an s3://bucket/prefix URI."""
    return object_uri(name, value) if _SCHEME.match(value) else value


def http_url(name: str, value: str) -> str:
    """An http(s)://host[:port]/path URL."""
    return _checked(name, value, ("http", "https"), "http(s)://host:port/path")


PARSERS = {LEASE_URL: postgres_url, LANCE_URI: index_location, SNAPSHOT_URI: object_uri, LLM_URL: http_url,
           ENDPOINT_URL: http_url}


def setting(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The URL setting `name` from the environment, parsed; None when unset or blank."""
    value = (os.environ if environ is None else environ).get(name) or None
    return PARSERS[name](name, value) if value else None


def check_all(environ: Mapping[str, str] | None = None) -> None:
    """Parse every URL setting the environment holds, so a malformed one fails before anything runs."""
    for name in URL_SETTINGS:
        setting(name, environ)


def redact(message: str, environ: Mapping[str, str] | None = None) -> str:
    """The message without any secret the environment's URL and key settings hold (longest first)."""
    environ = os.environ if environ is None else environ
    swaps: dict[str, str] = {}
    for name in URL_SETTINGS:
        value = environ.get(name)
        if value:
            swaps[value] = f"<{name}>"
            swaps.update((s, MASK) for s in _secrets_of(value))
    swaps.update((environ[name], MASK) for name in KEY_SETTINGS if environ.get(name))
    for secret in sorted(swaps, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS:
            message = message.replace(secret, swaps[secret])
    return message


def _secrets_of(value: str) -> set[str]:
    """What a URL's userinfo and key-like query values hold, as written and decoded: the secret, and the whole
    `user:secret` (a message may quote it whole, and a short secret alone is not replaced)."""
    head, _, query = value.partition("?")
    found = {v for k, v in _params(query) if _SECRET_PARAM.search(k)}
    if userinfo := _userinfo(head):
        found |= {head[userinfo[0]:userinfo[1]], _user_and_secret(head[userinfo[0]:userinfo[1]])[1]}
    return {form for s in found if s for form in (s, unquote(s))}


def _user_and_secret(userinfo: str) -> tuple[str | None, str]:
    """(the user name shown, the secret) of `user:password`; a lone token, or one ending in ":", is all secret."""
    user, colon, password = userinfo.partition(":")
    return (user, password) if colon and password else (None, userinfo)


def _userinfo(head: str) -> tuple[int, int] | None:
    """Where user[:password] lies in a URL's part before `?`, however malformed the rest is."""
    scheme = _SCHEME.match(head)
    start, at = scheme.end() if scheme else 0, head.rfind("@")
    return (start, at) if at >= start else None


def _params(query: str) -> list[tuple[str, str]]:
    return [(k, v) for k, _, v in (p.partition("=") for p in query.split("&"))]


def _checked(name: str, value: str, schemes: tuple[str, ...], shape: str) -> str:
    problem = _problem(value, schemes)
    if problem:
        raise UrlSettingError(f"{name}: {problem}; expected {shape}")
    return value


def _problem(value: str, schemes: tuple[str, ...]) -> str | None:
    """What is wrong with the URL, in words that quote none of it (None when nothing is)."""
    scheme, colon, rest = value.partition(":")
    if not colon or not _SCHEME.match(value):
        return "is not a URL (no scheme)"
    if scheme.lower() not in schemes:
        return f"is not a {schemes[0]}:// URL"
    if not rest.startswith("//"):
        return "needs // after the scheme"
    if any(c.isspace() or ord(c) < 32 for c in value):
        return "holds white space or control characters"
    if _BAD_ESCAPE.search(value):
        return "holds a % that does not start a two-digit hex escape"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return "has a malformed host or a port that is not a number from 1 to 65535"
    if not parts.hostname:
        return "names no host" if scheme.lower() != "s3" else "names no bucket"
    return "has port 0" if port == 0 else None

