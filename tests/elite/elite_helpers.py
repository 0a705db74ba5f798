"""Shared pieces for the ELITE tests: small real catalogs, an in-memory store, a deterministic encoder, a fake LLM."""
from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import numpy as np

from rag.elite.sentences import Vocabulary, assemble, parse_document
from rag.sources.documents import Document
from rag.store.catalog import Catalog
from rag.store.rows import CurrentText
from rag.store.source_log import sync_documents

SOURCE = "/tests/elite/source.jsonl"


def doc(doc_id: str, text: str, acl=("staff",), version: str = "1", title: str | None = None) -> Document:
    return Document(doc_id=doc_id, title=title or doc_id, text=text, version=version, acl=tuple(acl),
                    source=SOURCE, source_path=SOURCE)


def catalog_with(path: Path, docs: list[Document]) -> Catalog:
    """A real DuckDB catalog whose current documents are exactly `docs` (later calls delete what is left out)."""
    catalog = Catalog(path)
    sync_documents(catalog, catalog.begin_publish([SOURCE]), docs, [], [SOURCE])
    return catalog


def store_of(*texts: str):
    """A sentence store over hand-made documents d0, d1, … (no catalog needed)."""
    vocab = Vocabulary()
    rows = [CurrentText(f"d{i}", "1", f"d{i}", t, ("staff",), "") for i, t in enumerate(texts)]
    return assemble(rows, [parse_document(r.title, r.text, vocab) for r in rows], vocab)


class HashEncoder:
    """Bag-of-words hashing vectors: deterministic, instant, similar texts get similar vectors."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@contextmanager
def fake_chat(reply: Callable[[list[dict]], str | int]):
    """A real OpenAI-compatible HTTP server on 127.0.0.1; `reply(messages)` gives the content (or an HTTP status)."""
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            content = reply(body["messages"])
            if isinstance(content, int):
                self.send_response(content)
                self.end_headers()
                return
            data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": content}}],
                               "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(data.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        from rag.answer.llm import OpenAIChat

        yield OpenAIChat(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="fake", max_retries=0,
                         timeout=10), requests
    finally:
        server.shutdown()
        server.server_close()
