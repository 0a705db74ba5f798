"""`rag serve`: parse the flags, open the workspace's read side, run the HTTP service with uvicorn."""
from __future__ import annotations

import argparse
import json
import os

from pipelines.errors import CliError

DEFAULT_PORT = 8765


def add_serve_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="a warm HTTP query service (POST /retrieve, /ask; GET /healthz; OpenAPI at /docs)",
        description="Serve retrieval and answers over HTTP from the workspace's published snapshots, following new "
                    "publishes without a restart. Callers are users from --users-file named in each request, or "
                    "come from a header set by an authenticating proxy (--groups-header / --user-header).")
    p.add_argument("--workspace", default=os.environ.get("RAG_WORKSPACE", ".rag/workspace"),
                   help="folder holding catalog.duckdb and lancedb/ (default: $RAG_WORKSPACE or .rag/workspace)")
    p.add_argument("--lance-uri", default=os.environ.get("RAG_LANCE_URI"),
                   help="LanceDB location if not <workspace>/lancedb, e.g. s3://bucket/prefix "
                        "(default: $RAG_LANCE_URI)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument("--users-file", default=os.environ.get("RAG_USERS_FILE"),
                   help="YAML mapping user → list of groups (default: $RAG_USERS_FILE)")
    p.add_argument("--groups-header", metavar="NAME",
                   help="trust this request header for the caller's comma-separated groups (only behind an "
                        "authenticating proxy that sets it; off by default)")
    p.add_argument("--user-header", metavar="NAME",
                   help="trust this request header for the caller's user name, resolved through --users-file "
                        "(only behind an authenticating proxy; off by default)")
    p.add_argument("--reader", choices=("endpoint", "local", "extractive"), default="extractive",
                   help="who answers /ask: endpoint (OPENAI_BASE_URL), local (embedded llama.cpp) or extractive "
                        "(default)")
    p.add_argument("--workers", type=int, default=int(os.environ.get("RAG_SERVE_WORKERS", "1")),
                   help="worker processes, each with its own copy of the read state (default: $RAG_SERVE_WORKERS or "
                        "1; use one per core: see the README's sizing notes)")
    p.add_argument("--build-on-request", action="store_true",
                   help="the request that first sees a publish builds its read state while the requests behind it "
                        "wait (by default each part of it is built between requests, answering from the current "
                        "snapshot meanwhile with what the new one still publishes)")
    p.set_defaults(func=cmd_serve)
    return p


SETTINGS_ENV = "RAG_SERVE_SETTINGS"   # how the parent hands its flags to each worker process
WORKER_START_S = 600


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    if not args.users_file and not args.groups_header:
        raise CliError("say who callers are: --users-file, or --groups-header behind an authenticating proxy")
    if args.user_header and not args.users_file:
        raise CliError("--user-header needs --users-file to resolve user names to groups")
    if args.user_header and args.groups_header:
        raise CliError("use one of --groups-header and --user-header")
    if args.workers < 1:
        raise CliError("--workers must be at least 1")
    settings = {k: getattr(args, k) for k in ("workspace", "lance_uri", "users_file", "groups_header", "user_header",
                                              "reader", "build_on_request")}
    if args.workers == 1:
        app, label = build_app(settings)
        _announce(args, label)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    _, label = build_app(settings, warm=False)  # fail here, with one line, before forking workers
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    _announce(args, label)
    # A worker answers the supervisor's health checks only once its app is built (model loaded, read state warm):
    # uvicorn's default 5 s would restart every worker of a large workspace forever.
    uvicorn.run("pipelines.serve_cli:worker_app", factory=True, workers=args.workers, host=args.host,
                port=args.port, log_level="warning", timeout_worker_healthcheck=WORKER_START_S)
    return 0


def _announce(args: argparse.Namespace, label: str) -> None:
    print(f"rag serve: http://{args.host}:{args.port} (docs at /docs) over {args.workspace}, {label}, "
          f"{args.workers} worker{'s' if args.workers > 1 else ''}", flush=True)


def worker_app():
    """The app one uvicorn worker process builds for itself from the parent's settings."""
    return build_app(json.loads(os.environ[SETTINGS_ENV]))[0]


def build_app(settings: dict, warm: bool = True):
    """The service over the workspace, with the query embedder loaded and the read state built before any request."""
    from threadpoolctl import threadpool_limits

    from pipelines.server import Identity, create_app
    from rag.answer.llm import LLMError, chat_model
    from rag.query.workspace import Workspace
    from rag.retrieval.callers import load_users

    # One worker per core, so one BLAS thread per worker: OpenBLAS's threaded product of a query with the
    # snapshot's vectors spun on the other, busy core (1,300 rows: 8 ms of CPU against 0.05 ms with one thread,
    # 2 loaded cores; 110K rows: the same CPU either way).
    threadpool_limits(limits=1, user_api="blas")

    identity = Identity(load_users(settings["users_file"]) if settings["users_file"] else {},
                        settings["groups_header"], settings["user_header"])
    workspace = Workspace(settings["workspace"], lance_uri=settings["lance_uri"])
    try:
        model = chat_model(settings["reader"])
    except LLMError as err:
        raise CliError(str(err)) from None
    if warm:
        workspace.embedder.encode_query("warm up")  # load the model before the first request, not during it
        workspace.snapshot().warm()
    return (create_app(workspace, identity, model, settings["reader"], settings["build_on_request"]),
            workspace.snapshot().label)
