"""`rag serve`: parse the flags, open the workspace's read side, run the HTTP service with uvicorn."""
from __future__ import annotations

import argparse
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
    p.add_argument("--lance-uri", help="LanceDB location if not <workspace>/lancedb")
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
    p.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from pipelines.server import Identity, create_app
    from rag.access import load_users
    from rag.llm import LLMError, chat_model
    from rag.workspace import Workspace

    if not args.users_file and not args.groups_header:
        raise CliError("say who callers are: --users-file, or --groups-header behind an authenticating proxy")
    if args.user_header and not args.users_file:
        raise CliError("--user-header needs --users-file to resolve user names to groups")
    if args.user_header and args.groups_header:
        raise CliError("use one of --groups-header and --user-header")
    identity = Identity(load_users(args.users_file) if args.users_file else {}, args.groups_header, args.user_header)
    workspace = Workspace(args.workspace, lance_uri=args.lance_uri)
    try:
        model = chat_model(args.reader)
    except LLMError as err:
        raise CliError(str(err)) from None
    workspace.embedder.encode_query("warm up")  # load the model before the first request, not during it
    print(f"rag serve: http://{args.host}:{args.port} (docs at /docs) over {workspace.root}, "
          f"{workspace.snapshot().label}", flush=True)
    uvicorn.run(create_app(workspace, identity, model, args.reader), host=args.host, port=args.port,
                log_level="warning")
    return 0
