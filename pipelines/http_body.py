"""Request bodies of `rag serve`, checked before any framework parses them: size, UTF-8, JSON, depth, numbers.

A pure ASGI middleware reads the body up to `MAX_BODY_BYTES` (refusing more without reading it), parses it with
limits, and hands the application a re-encoded copy, so every malformed body gets the service's one-line
`{"error": "…"}` instead of a framework's default shape, and no parser ever sees an unbounded input.
"""
from __future__ import annotations

import json
import math

MAX_BODY_BYTES = 64 * 1024   # a 2,000-character question in the worst JSON escaping is ~12 KB
MAX_DEPTH = 32               # the request is a flat object; nothing legitimate nests
MAX_NUMBER_CHARS = 40        # int() of thousands of digits costs quadratic time, and Python refuses 4,300+


class BodyError(ValueError):
    """A request body the service refuses; the message is one line, the status its HTTP code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> object:
    """The JSON value of a body, or BodyError naming what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BodyError(400, f"the body is not valid UTF-8 (byte {err.start})") from None
    try:
        value = json.loads(text, parse_int=_number(int), parse_float=_number(float), parse_constant=_constant)
    except RecursionError:
        raise BodyError(400, f"the body nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as err:
        raise BodyError(400, f"the body is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    _check(value)
    return value


def _number(kind):
    def parse(literal: str):
        if len(literal) > MAX_NUMBER_CHARS:
            raise BodyError(400, f"the body holds a number of {len(literal):,} characters; the limit is "
                                 f"{MAX_NUMBER_CHARS}")
        value = kind(literal)
        if not math.isfinite(value):
            raise BodyError(400, f"the body holds a number out of range ({literal})")
        return value
    return parse


def _constant(name: str):
    raise BodyError(400, f"the body is not valid JSON ({name} is not a JSON number)")


def _check(value: object) -> None:
    """Depth and text checks without recursion (a deep value must not exhaust the stack here either)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > MAX_DEPTH:
                raise BodyError(400, f"the body nests deeper than {MAX_DEPTH} levels")
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, child in children:
                if key is not None:
                    _text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, str):
            _text(item)


def _text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyError(400, "the body holds a lone surrogate escape (\\ud800–\\udfff), which is not text") from None


def _is_json(headers: dict[bytes, bytes]) -> bool:
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return not kind or kind == b"application/json" or kind.endswith(b"+json")


class BodyLimits:
    """ASGI middleware: cap, parse and re-encode every request body before the application sees it."""

    def __init__(self, app, respond):
        self.app, self.respond = app, respond   # respond(status, message) -> an ASGI app sending the error

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        try:
            declared = headers.get(b"content-length")
            if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
                raise BodyError(413, f"the body is larger than the limit of {MAX_BODY_BYTES:,} bytes")
            raw = await _read(receive)
            if _is_json(headers):   # blank is no body at all (the framework then names the missing field)
                raw = json.dumps(parse_body(raw), ensure_ascii=True).encode() if raw.strip() else b""
        except BodyError as err:
            return await self.respond(err.status, str(err))(scope, receive, send)
        fixed = [(k, v) for k, v in scope.get("headers") or [] if k != b"content-length"]
        scope = {**scope, "headers": [*fixed, (b"content-length", str(len(raw)).encode())]}
        return await self.app(scope, _replay(raw, receive), send)


async def _read(receive) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BodyError(400, "the client closed the connection before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyError(413, f"the body is larger than the limit of {MAX_BODY_BYTES:,} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(raw: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()
    return replay
