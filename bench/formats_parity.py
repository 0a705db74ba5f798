"""Retrieval parity of bench/formats.py: a benchmark slice's documents written as PDF, DOCX and HTML (a title
heading and the text's paragraphs), read back by our readers, and LongRAG's source completeness at each budget on
the same questions (one half of the fixed tune/report split, rag.sources.benchmarks.half_of) against the original
JSONL. Each corpus is ingested into its own workspace under .rag/bench/formats-parity/, so a re-run only ingests
what changed.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bench.formats_corpus import Block, Spec, render

REPO = Path(__file__).resolve().parent.parent
PARITY_FORMATS = ("pdf", "docx", "html")


def _spec(doc: dict) -> Spec:
    paragraphs = [p.strip() for p in doc["text"].split("\n") if p.strip()]
    return Spec(doc["doc_id"], doc["title"], (Block("heading", doc["title"], 1),)
                + tuple(Block("para", p) for p in paragraphs))


def _read_back(docs: list[dict], fmt: str, read) -> tuple[list[dict], dict]:
    """The documents written as `fmt` files and read by `read`; with how many titles came back as they were."""
    out, same_title, failed = [], 0, []
    for doc in docs:
        data, _ = render(_spec(doc), fmt)
        try:
            got = read(data)
        except Exception as e:  # noqa: BLE001 - a reader's refusal is a figure of the run
            failed.append(f"{doc['doc_id']}: {e}")
            continue
        title = got.title or ""
        same_title += title == doc["title"]
        out.append({"doc_id": doc["doc_id"], "title": title, "text": got.text})
    return out, {"documents": len(docs), "read": len(out), "same_title": same_title, "failed": failed[:5]}


def _completeness(folder: Path, docs_path: Path, workspace: Path, questions, budgets: list[int]) -> dict:
    from pipelines.ingest_run import run_ingest
    from rag.models.embedders import Embedder
    from rag.query.methods import method as registered
    from rag.query.workspace import Workspace
    from rag.retrieval.callers import Caller
    from rag.retrieval.request import Request, Tools
    from rag.sources.benchmarks import complete
    from rag.store.settings import IngestSettings

    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(docs_path)], default_acl=("bench",),
                              derive_links=True))
    reader = Workspace(workspace, embedder=Embedder(threads=1))
    snap, caller = reader.snapshot(), Caller(frozenset({"bench"}))
    tools = Tools(reader.embedder, reader.counter)
    return {b: [complete({i.doc_id for i in registered("longrag").run(snap, Request(caller, q.question, b),
                                                                         tools).items}, q.gold_doc_ids)
                for q in questions] for b in budgets}


def parity(folder: Path, budgets: list[int], half: str, readers: dict, limit: int | None = None) -> dict:
    """Completeness at each budget for the original JSONL and each format read back, with the differences."""
    from rag.evaluation.bootstrap import paired_difference_ci
    from rag.sources.benchmarks import load_questions, split_halves

    name = folder.name
    questions = split_halves(name, load_questions(folder))[half][:limit]
    docs = [json.loads(line) for line in (folder / "docs.jsonl").read_text(encoding="utf-8").splitlines() if line]
    root = REPO / ".rag" / "bench" / "formats-parity"
    root.mkdir(parents=True, exist_ok=True)
    base = _completeness(folder, folder / "docs.jsonl", root / f"{name}-jsonl", questions, budgets)
    rows = [{"corpus": "jsonl", **{str(b): float(np.mean(base[b])) for b in budgets}}]
    for fmt in PARITY_FORMATS:
        if fmt not in readers:
            continue
        t = time.perf_counter()
        extracted, audit = _read_back(docs, fmt, readers[fmt])
        path = root / f"{name}-{fmt}.jsonl"
        path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in extracted), encoding="utf-8")
        got = _completeness(folder, path, root / f"{name}-{fmt}", questions, budgets)
        audit["seconds"] = round(time.perf_counter() - t, 1)
        rows.append({"corpus": fmt, **{str(b): float(np.mean(got[b])) for b in budgets}, "audit": audit,
                     "difference": {str(b): str(paired_difference_ci(got[b], base[b])) for b in budgets},
                     "gained": {str(b): sum(g and not o for g, o in zip(got[b], base[b])) for b in budgets},
                     "lost": {str(b): sum(o and not g for g, o in zip(got[b], base[b])) for b in budgets}})
    return {"benchmark": name, "half": half, "questions": len(questions), "method": "longrag", "rows": rows}
