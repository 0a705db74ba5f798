"""`rag`: the command line. `rag ingest` runs the same Dagster assets in-process as `dagster dev` does."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from pipelines.errors import CliError
from pipelines.eval_cli import add_eval_parser
from pipelines.questions_cli import add_questions_parser
from pipelines.serve_cli import add_serve_parser
from rag.query.methods import METHODS

DEFAULT_WORKSPACE = ".rag/workspace"


READERS = ("local", "endpoint", "extractive")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    from rag.query.workspace import WorkspaceError
    from rag.retrieval.callers import UsersFileError
    from rag.store.catalog import CatalogError
    from rag.store.url_settings import UrlSettingError
    from rag.store.writer_lease import LeaseUnavailable
    from rag.store.writer_lock import WriterBusy

    try:
        _check_url_settings(args)
        return args.func(args)
    except (CliError, WorkspaceError, CatalogError, WriterBusy, UsersFileError, UrlSettingError,
            LeaseUnavailable) as err:
        return _fail(args.command, str(err))
    except KeyboardInterrupt:
        print(f"rag {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, the traceback only on request
        if os.environ.get("RAG_DEBUG"):
            raise
        return _fail(args.command, f"unexpected {err.__class__.__name__}: {err} (set RAG_DEBUG=1 for the traceback)")


def _check_url_settings(args: argparse.Namespace) -> None:
    """Every URL setting in the environment and --lance-uri, parsed before any command uses one."""
    from rag.store.url_settings import LANCE_URI, check_all, index_location

    check_all()
    if getattr(args, "lance_uri", None):
        index_location(LANCE_URI if args.lance_uri == os.environ.get(LANCE_URI) else "--lance-uri", args.lance_uri)


def _fail(command: str, message: str) -> int:
    from rag.store.url_settings import redact

    lines = message.strip().splitlines() or ["failed"]
    print(f"rag {command}: error: {redact(lines[0])}", file=sys.stderr)  # no secret, whatever a library said
    return 2


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (the full usage stays behind --help)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="rag", description="Long-unit retrieval (LongRAG) and ELITE on Dagster.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    ingest = sub.add_parser("ingest", help="load documents, group them into long units and index them",
                            description="Load sources into the catalog, re-group the affected long units and "
                                        "bring the LanceDB sub-chunk index up to date (the Dagster ingest job, "
                                        "run in-process).")
    ingest.add_argument("--source", action="append", required=True, metavar="PATH",
                        help="a folder (or one file) of Markdown/text with YAML front matter, PDF, DOCX, PPTX, "
                             "XLSX, CSV, HTML or EML files, or a JSONL file (doc_id, title, text), or "
                             "s3://bucket/prefix (read like a folder; credentials from AWS_* variables); repeat for "
                             "several")
    _workspace_args(ingest)
    ingest.add_argument("--default-acl", action="append", default=[], metavar="GROUP",
                        help="group allowed to read documents that carry no ACL of their own (repeatable); "
                             "without it such documents are quarantined as readable by nobody")
    ingest.add_argument("--collection", help="collection name for documents that do not name one")
    ingest.add_argument("--derive-links", choices=["titles"],
                        help="'titles': link a document to every document whose exact title it mentions")
    ingest.add_argument("--embedder", choices=["minilm", "minilm-int8", "use-multilingual"],
                        help="the workspace's embedder (default: the one it already has; minilm for a new one); "
                             "minilm-int8: int8 weights, half the CPU per query, a little less recall; "
                             "changing it re-embeds every sub-chunk")
    ingest.add_argument("--allow-empty", action="store_true",
                        help="a source that now holds no documents deletes everything it published (without "
                             "this flag an emptied source keeps its documents and the run warns)")
    ingest.add_argument("--partitioned", action="store_true",
                        help="treat each collection (a source's sub-folder, or its top-level files) as a partition "
                             "with a store of its own, and run every partition in turn")
    ingest.add_argument("--partition", action="append", default=[], metavar="KEY",
                        help="run only this partition (repeatable): a collection or shard key exactly as the "
                             "sources list it, e.g. corpus/security; other partitions may run at the same time in "
                             "other processes")
    ingest.add_argument("--ocr", action="store_true", default=None,
                        help="read PDF pages that have no text layer with tesseract (Debian: tesseract-ocr; slow, "
                             "about a second a page); without it such pages are left out and such files "
                             "quarantined (default: $RAG_OCR)")
    ingest.add_argument("--acl-from", choices=["posix", "posix,everyone"], default=None,
                        help="bound each file's ACL by the groups that may read it on the file system: its owning "
                             "group and POSIX ACL groups; 'posix,everyone' adds 'everyone' for world-readable "
                             "files (default: $RAG_ACL_FROM)")
    ingest.add_argument("--json", action="store_true", help="print one JSON object with the run's counts")
    ingest.add_argument("--wait", type=float, metavar="SECONDS", default=None,
                        help="how long to wait for another writer of this workspace to finish before giving up "
                             "(default: $RAG_WRITER_WAIT_S or 60)")
    ingest.set_defaults(func=cmd_ingest)

    retrieve = sub.add_parser("retrieve", help="retrieve context for a question (JSON out)",
                              description="Retrieve what a reader would get for QUESTION, as the caller, within "
                                          "a token budget (MiniLM word pieces). Prints JSON with --json.")
    _question_args(retrieve)
    retrieve.set_defaults(func=cmd_retrieve)

    ask = sub.add_parser("ask", help="answer a question with citations",
                         description="Retrieve as the caller, then answer with the chosen reader: a long answer "
                                     "citing [doc_id], a short answer, and each citation with its version, place "
                                     "and origin (model-given, or attributed where the reader gave none).")
    _question_args(ask)
    ask.add_argument("--reader", choices=READERS,
                     help="endpoint (OPENAI_BASE_URL), local (embedded llama.cpp; RAG_LOCAL_MODEL picks the model) "
                          "or extractive (no LLM); "
                          "default: endpoint if OPENAI_BASE_URL is set, else local if installed, else extractive")
    ask.add_argument("--trace", action="store_true", help="also print the retrieval trace (ELITE's rounds)")
    ask.set_defaults(func=cmd_ask)

    llm = sub.add_parser("llm", help="the embedded local LLM server")
    llm_sub = llm.add_subparsers(dest="llm_command", metavar="ACTION", required=True)
    serve = llm_sub.add_parser("serve", help="run the embedded llama.cpp server in the foreground",
                               description="Serve the embedded model (Qwen2.5-Coder-0.5B-Instruct, or the 1.5B with "
                                           "RAG_LOCAL_MODEL=qwen2.5-coder-1.5b-instruct-q4_k_m; sha256-checked) on an "
                                           "OpenAI-compatible endpoint on loopback until Ctrl-C; point OPENAI_BASE_URL "
                                           "at it.")
    serve.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    serve.set_defaults(func=cmd_llm_serve)

    history = sub.add_parser("history", help="a document's versions and the units that carried them",
                             description="Show every version of DOC_ID with its status and validity, and the "
                                         "unit versions that carried it, from the catalog's publish history.")
    history.add_argument("doc_id")
    _workspace_args(history)
    history.add_argument("--json", action="store_true", help="print one JSON object")
    history.set_defaults(func=cmd_history)

    demo = sub.add_parser("demo", help="ingest the bundled sample corpus and say where to look",
                          description="Ingest samples/corpus into a workspace (default .rag/demo) offline.")
    demo.add_argument("--workspace", help="workspace folder (default: .rag/demo, or .rag/demo-zh with --lang zh)")
    demo.add_argument("--lang", choices=["en", "zh"], default="en",
                      help="en: samples/corpus; zh: samples/corpus-zh with the multilingual embedder (USE v3)")
    demo.set_defaults(func=cmd_demo)

    add_serve_parser(sub)
    add_eval_parser(sub)
    add_questions_parser(sub)
    return p


def _workspace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", default=os.environ.get("RAG_WORKSPACE", DEFAULT_WORKSPACE),
                   help=f"folder holding catalog.duckdb and lancedb/ (default: $RAG_WORKSPACE or {DEFAULT_WORKSPACE})")
    p.add_argument("--lance-uri", default=os.environ.get("RAG_LANCE_URI"),
                   help="LanceDB location if not <workspace>/lancedb, e.g. s3://bucket/prefix "
                        "(default: $RAG_LANCE_URI)")


def _question_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", help="the question, in quotes")
    _workspace_args(p)
    p.add_argument("--method", choices=list(METHODS), default="longrag",
                   help="; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()))
    p.add_argument("--budget", type=int, default=2000, help="reader context budget in tokens (default: 2000)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--groups", help="comma-separated groups the caller belongs to (there is no superuser)")
    who.add_argument("--user", help="a user name resolved to groups through --users-file")
    p.add_argument("--users-file", default=os.environ.get("RAG_USERS_FILE"),
                   help="YAML mapping user → list of groups (default: $RAG_USERS_FILE)")
    p.add_argument("--as-of", metavar="WHEN",
                   help="read what was current then: an ISO timestamp (UTC) or publish:N from the publish log")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def caller_of(args: argparse.Namespace):
    """The caller from --groups, or from --user through the users file; there is no superuser."""
    from rag.retrieval.callers import CallerError, resolve_caller

    if args.groups is None and not args.users_file:
        raise CliError("--user needs --users-file (or $RAG_USERS_FILE)")
    try:
        return resolve_caller(groups=args.groups, user=args.user, users_file=args.users_file)
    except CallerError as err:
        raise CliError("--groups is empty" if args.groups is not None else str(err)) from None


def open_workspace(args: argparse.Namespace, embedder=None):
    """The read side of --workspace: published snapshots only, so it never waits for or blocks a writer."""
    from rag.query.workspace import Workspace

    return Workspace(args.workspace, lance_uri=args.lance_uri, embedder=embedder)


def retrieve(args: argparse.Namespace, model=None):
    """Run the chosen method as the caller; the one path `rag retrieve` and `rag ask` share."""
    caller = caller_of(args)
    if args.budget <= 0:
        raise CliError("--budget must be a positive number of tokens")
    ws = open_workspace(args)
    try:
        as_of = ws.resolve_as_of(args.as_of)
        return ws.retrieve(args.method, caller, args.question, args.budget, as_of=as_of, model=model), ws.embedder
    except (LookupError, ValueError) as err:
        raise CliError(str(err)) from None


def cmd_retrieve(args: argparse.Namespace) -> int:
    result, _ = retrieve(args)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        for item in result.items:
            print(f"{item.score:6.3f}  {item.doc_id} v{item.doc_version}  {item.title}  ({item.tokens} tokens)")
        print(f"{len(result.items)} documents, {result.tokens}/{args.budget} tokens ({args.method})")
    return 0


def default_reader() -> str:
    if os.environ.get("OPENAI_BASE_URL"):
        return "endpoint"
    import importlib.util

    return "local" if importlib.util.find_spec("llama_cpp") else "extractive"


def cmd_ask(args: argparse.Namespace) -> int:
    from rag.answer.llm import LLMError, chat_model
    from rag.answer.reader import answer

    try:
        model = chat_model(args.reader or default_reader())
        result, embedder = retrieve(args, model)
        reply = answer(args.question, result, model, embedder)
    except LLMError as err:
        raise CliError(str(err)) from None
    if args.json:
        print(json.dumps({"answer": reply.to_json(), "retrieval": result.to_json()}, ensure_ascii=False))
        return 0
    print(reply.long_answer or "(no long answer)")
    if reply.abstained:
        print("\nShort answer: none (the reader's reply, found nowhere in the sources, is withheld; --json shows it)")
    else:
        flag = "" if reply.short_answer_check != "not found" else " (not found in the cited text or the context)"
        print(f"\nShort answer: {reply.short_answer}{flag}")
    print(format_citations(reply))
    print(f"Reader: {reply.reader}; method: {result.method}; context {result.tokens}/{args.budget} tokens; "
          f"{reply.llm_calls} LLM calls, {reply.seconds:.1f} s")
    if args.trace:
        print("\nTrace:")
        if result.method == "elite":
            from rag.elite.trace import format_trace

            print(format_trace(result.trace))
        else:
            print(json.dumps(result.trace, indent=2))
    return 0


def format_citations(reply) -> str:
    """Each citation with its version, place and origin (model-given or attributed), or a plain "none"."""
    from rag.answer.citations import PREMISE, SHORT_ANSWER

    if not reply.sources:
        return "Citations: none: the answer could not be found in the context, so it cites nothing"
    lines = [f"Citations (valid: {reply.citations_valid}, locatable: {reply.citation_locatable:.0%}):"]
    for c in reply.sources:
        what = {SHORT_ANSWER: "short answer", PREMISE: "the question's premise"}.get(c.statement,
                                                                                f"statement {c.statement + 1}")
        place = f" {c.location}" if c.location else ""
        lines.append(f"  {c.doc_id} v{c.version}{place} · {c.origin} · {what}")
    if reply.dropped:
        lines.append(f"  left out (not in the context, or not found in it): {', '.join(reply.dropped)}")
    return "\n".join(lines)


def cmd_llm_serve(args: argparse.Namespace) -> int:
    from rag.answer.local_llm import serve_forever

    serve_forever(port=args.port)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    catalog = open_workspace(args).snapshot().catalog
    versions, units = catalog.history(args.doc_id)
    places = catalog.shared_places(args.doc_id).get(args.doc_id, []) if hasattr(catalog, "shared_places") else []
    if places:
        return _shared_history(args, places)
    if not versions:
        raise CliError(f"no document '{args.doc_id}' in {args.workspace}")
    def fields(row) -> dict:
        out = asdict(row)
        for key in ("valid_from", "valid_to", "changed_at"):
            if key in out:
                out[key] = out[key].isoformat(sep=" ", timespec="seconds") if out[key] else ""
        return out

    acls = [fields(a) for a in catalog.acl_history(args.doc_id)]
    versions, units = [fields(v) for v in versions], [fields(u) for u in units]
    if args.json:
        print(json.dumps({"doc_id": args.doc_id, "versions": versions, "units": units, "acl_changes": acls}))
        return 0
    from rag.text.tables import markdown_table

    print(markdown_table(["version", "status", "valid from", "valid to", "publish", "source", "acl"],
                         [[*list(v.values())[:-1], ", ".join(v["acl"] or [])] for v in versions]))
    if acls:
        print()
        print(markdown_table(["version", "acl before", "acl", "publish", "changed at"],
                             [[a["version"], ", ".join(a["acl_before"]), ", ".join(a["acl"]), a["publish_id"],
                               a["changed_at"]] for a in acls]))
    print()
    print(markdown_table(["doc version", "unit", "status", "valid from", "valid to", "publish"],
                         [list(u.values()) for u in units]))
    return 0


def _shared_history(args: argparse.Namespace, places: list[tuple[str, str, str]]) -> int:
    """An id published by two partitions: hidden from every reader; say where, so one of them can drop it."""
    where = "; ".join(f"partition {p} (version {v}, {path})" for p, v, path in places)
    message = (f"'{args.doc_id}' is published by {len(places)} partitions and hidden from readers until all but one "
               f"drop it: {where}")
    if args.json:
        print(json.dumps({"doc_id": args.doc_id, "hidden": True, "error": message,
                          "places": [{"partition": p, "version": v, "source_path": path} for p, v, path in places]}))
    else:
        print(f"error: {message}")
    return 1


def cmd_ingest(args: argparse.Namespace) -> int:
    from rag.sources.bucket import BucketError, check_bucket_sources

    try:
        check_bucket_sources(args.source, bool(args.partition or args.partitioned))
    except BucketError as err:
        raise CliError(str(err)) from None
    for s in args.source:
        if not s.startswith("s3://") and not Path(s).exists():
            raise CliError(f"{s}: no such file or folder")
    from pipelines.ingest_run import run_ingest, run_partitions
    from rag.store.settings import IngestSettings

    settings = IngestSettings(
        workspace=args.workspace, sources=args.source, default_acl=tuple(args.default_acl or ()),
        collection=args.collection, derive_links=args.derive_links == "titles", lance_uri=args.lance_uri,
        wait_s=args.wait, embedder=args.embedder, allow_empty=args.allow_empty,
        ocr=args.ocr if args.ocr is not None else os.environ.get("RAG_OCR", "").lower() in ("1", "true", "yes"),
        acl_from=args.acl_from if args.acl_from is not None else os.environ.get("RAG_ACL_FROM", ""))
    if args.partition or args.partitioned:
        counts = run_partitions(settings, args.partition or None)
    else:
        counts = run_ingest(settings)
    if args.json:
        print(json.dumps(counts))
    else:
        _print_summary(counts, args.workspace)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.ingest_run import run_ingest
    from pipelines.workspace_resources import SAMPLE_CORPUS, SAMPLE_CORPUS_ZH
    from rag.store.settings import IngestSettings

    zh = args.lang == "zh"
    workspace = args.workspace or (".rag/demo-zh" if zh else ".rag/demo")
    counts = run_ingest(IngestSettings(workspace=workspace, sources=[str(SAMPLE_CORPUS_ZH if zh else SAMPLE_CORPUS)],
                                       embedder="use-multilingual" if zh else None))
    _print_summary(counts, workspace)
    print("\nNext: open the Dagster UI with `make ui` (http://127.0.0.1:3000) to see the asset graph, "
          "its metadata and the asset checks.")
    return 0


def _print_summary(counts: dict, workspace: str) -> None:
    ws = Path(counts["workspace"])
    print(f"Published {counts['documents']} current documents as {counts['units']} long units "
          f"({counts['subchunks']} sub-chunks, {counts['embedded']} embedded in this run; embedder {counts['embedder']}).")
    if counts["embedder_replaced"]:
        print(f"The embedder changed from {counts['embedder_replaced']}: every sub-chunk was embedded again.")
    if counts["rows_rekeyed"]:
        print(f"The index's {counts['rows_rekeyed']} rows were keyed by unit version: re-written keyed by document "
              "version, with their stored vectors (once).")
    print(f"Quarantined inputs: {counts['quarantined']}; deleted documents: {counts['deleted']}; "
          f"asset checks {'passed' if counts['checks_passed'] else 'FAILED'}.")
    for line in counts.get("quarantine_lines", []):
        print(f"  quarantined {line}")
    if counts["quarantined"] > len(counts.get("quarantine_lines", [])):
        print(f"  …and {counts['quarantined'] - len(counts['quarantine_lines'])} more (the catalog's quarantine table)")
    if "partitions" in counts:
        print(f"Partitions: {', '.join(counts['partitions'])} — each with its own catalog and index under "
              f"{ws / 'partitions'}")
        for key in counts["vanished"]:
            print(f"Vanished collection {key}: its {counts['partitions'][key]['deleted']} documents deleted, "
                  "its store retired (kept for as-of reads).")
        for shared in counts["shared_ids"]:
            where = ", ".join(f"{p['partition']} ({p['source_path']})" for p in shared["places"])
            print(f"Error: document id {shared['doc_id']} is published by {where}; hidden from readers until one "
                  "drops it.")
        return
    print(f"Catalog (DuckDB): {ws / 'catalog.duckdb'}  — tables documents, units, unit_members, publish_log, quarantine")
    print(f"Index (LanceDB):  {ws / 'lancedb'}  — table subchunks")


if __name__ == "__main__":
    sys.exit(main())
