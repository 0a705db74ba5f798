"""`rag serve`: a warm HTTP query service over one workspace (FastAPI; OpenAPI at /openapi.json, docs at /docs).

Who is asking comes from the users file (the request names a `user`) or, behind an authenticating proxy, from
a header the proxy sets; a request can never name its own groups. Every request reads the newest published
snapshot, so the service follows publishes without a restart and never takes the writer's lock.
"""
from __future__ import annotations

import asyncio
import logging
import re
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Optional

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipelines.http_body import BodyLimits
from rag.query.methods import MAX_QUESTION_CHARS, METHODS
from rag.query.workspace import Workspace, WorkspaceError
from rag.retrieval.callers import Caller, CallerError, UnknownUser, resolve_caller
from rag.store.url_settings import redact

log = logging.getLogger("rag.serve")
# An absolute path left in a message after the workspace's own folder was named: shown by its last part only.
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"()]+/)+([^\s/'\"()]*)")


class FastJSON(JSONResponse):
    """A JSON body written by orjson: a retrieval's items are serialised once, without FastAPI's validation pass."""

    def render(self, content) -> bytes:
        return orjson.dumps(content)


@dataclass(frozen=True)
class Identity:
    """How callers are known: users file names → groups, optionally a proxy header (user or groups)."""

    users: dict[str, Caller]
    groups_header: str | None = None   # e.g. X-Forwarded-Groups: comma-separated, set by the proxy
    user_header: str | None = None     # e.g. X-Forwarded-User: resolved through the users file

    def caller(self, request: Request, user: str | None) -> Caller:
        if self.groups_header:
            if user is not None:
                raise HTTPException(400, "user is set by the authenticating proxy, not by the request")
            try:
                return resolve_caller(groups=request.headers.get(self.groups_header, ""))
            except CallerError:
                raise HTTPException(401, f"missing {self.groups_header} header (set by the authenticating proxy)"
                                    ) from None
        if self.user_header:
            if user is not None:
                raise HTTPException(400, "user is set by the authenticating proxy, not by the request")
            user = request.headers.get(self.user_header)
            if not user:
                raise HTTPException(401, f"missing {self.user_header} header (set by the authenticating proxy)")
        if not user:
            raise HTTPException(401, "name the asking user in the request's 'user' field")
        try:
            return resolve_caller(user=user, users=self.users)
        except UnknownUser as err:
            raise HTTPException(403, str(err)) from None


class RetrieveRequest(BaseModel):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    method: str = Field("longrag", description=", ".join(METHODS))
    budget: int = Field(2000, gt=0, le=1_000_000, strict=True,   # strict: `true` is not a budget of 1
                        description="reader context budget in MiniLM word pieces")
    user: Optional[str] = Field(None, description="the asking user (users file); omit behind a proxy")
    as_of: Optional[str] = Field(None, description="ISO timestamp (UTC unless it has an offset) or publish:N")


def create_app(workspace: Workspace, identity: Identity, model=None, reader: str = "extractive",
               build_on_request: bool = False) -> FastAPI:
    """The service: POST /retrieve and /ask (the CLI's JSON shapes), GET /healthz; a publish's read state is built
    between requests (or, with `build_on_request`, by the request that first sees the publish)."""
    app = FastAPI(title="longunit-rag", summary="LongRAG, short-chunk and ELITE retrieval over a published workspace",
                  version="0.1.0")

    def error(status: int, message: str) -> JSONResponse:
        """The one error shape: {"error": one line}, with no server path in it (the detail goes to the log)."""
        line = redact((message.strip().splitlines() or ["error"])[0])
        public = _public(line, workspace)
        if public != line:
            log.warning("%s (answered %d: %s)", line, status, public)
        return JSONResponse({"error": public}, status_code=status)

    app.add_middleware(BodyLimits, respond=error)

    @app.exception_handler(RequestValidationError)
    def _invalid(_, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error(422, f"{where}: {first['msg']}" if where else first["msg"])

    @app.exception_handler(StarletteHTTPException)
    def _http(_, exc: StarletteHTTPException):
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    def _unexpected(_, exc: Exception):
        log.error("request failed: %s", redact("".join(traceback.format_exception(exc)).rstrip()))
        return error(500, f"internal error ({exc.__class__.__name__}); see the server log")

    # A worker computes one retrieval at a time, in arrival order. Requests computed side by side share the
    # worker's GIL, so each took as long as all of them together (processor sharing) and the tail grew with the
    # queue; first come, first served finishes the first first. Waiting requests cost a queued call, not a thread,
    # and /healthz stays on the thread pool beside them.
    compute = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-retrieve")
    if not build_on_request:
        # Each part of a publish's read state (members, vectors, BM25, ...) waits in this queue like a request, so no
        # request waits for more than one part; a thread beside it shared the GIL and slowed every request instead.
        workspace.build_between(compute.submit)

    async def in_order(call, *args):
        return await asyncio.get_running_loop().run_in_executor(compute, partial(call, *args))

    def _retrieve(body: RetrieveRequest, request: Request, ask_model=None):
        caller = identity.caller(request, body.user)
        try:
            as_of = workspace.resolve_as_of(body.as_of)
            return workspace.retrieve(body.method, caller, body.question, body.budget, as_of=as_of, model=ask_model)
        except WorkspaceError as err:
            raise HTTPException(503, str(err)) from None
        except (LookupError, ValueError) as err:
            raise HTTPException(400, str(err).splitlines()[0]) from None

    @app.post("/retrieve", summary="Context for a question as the caller, within a token budget")
    async def retrieve(body: RetrieveRequest, request: Request) -> dict:
        return FastJSON(await in_order(lambda: _retrieve(body, request).to_json()))

    @app.post("/ask", summary="Retrieve, then answer with the service's reader, citations checked")
    async def ask(body: RetrieveRequest, request: Request) -> dict:
        from rag.answer.llm import LLMError
        from rag.answer.reader import answer

        result = await in_order(_retrieve, body, request, model)
        try:  # a reader waits on its endpoint or runs its own model: not in the retrieval queue
            reply = await run_in_threadpool(answer, body.question, result, model, workspace.embedder)
        except LLMError as err:
            raise HTTPException(502, str(err).splitlines()[0]) from None
        return FastJSON({"answer": reply.to_json(), "retrieval": result.to_json()})

    @app.get("/healthz", summary="Liveness and the snapshot being served (and the one being built, if any)")
    def healthz() -> dict:
        try:
            snap, building = workspace.serving()  # a publish seen here starts its build, as a request's would
        except WorkspaceError as err:
            raise HTTPException(503, str(err)) from None
        served = {key or "workspace": {"snapshot": i.seq, "publish_id": i.publish_id, "lance_version": i.lance_version,
                                       "published_at": i.created_at} for key, i in snap.parts.items()}
        return {"status": "ok", "reader": reader, **(served["workspace"] if "" in snap.parts else {"partitions": served}),
                **({"building": building.label} if building is not None else {})}

    return app


def _public(message: str, workspace: Workspace) -> str:
    """The message with the workspace's folders named as `the workspace` and any other absolute path cut."""
    names = {str(workspace.root.resolve()): "the workspace", str(workspace.root.absolute()): "the workspace",
             str(workspace.lance_uri): "the index"}
    for folder in sorted(names, key=len, reverse=True):
        if folder.startswith("/"):
            message = message.replace(folder, names[folder])
    return _ABSOLUTE.sub(lambda m: m.group(1) or "a server folder", message)
