"""What the local-LLM ELITE test (tests/answer/test_local_llm.py) costs under its old and its new settings: each LLM
call's prompt and reply tokens, and the CPU seconds of the llama.cpp server, on the sample corpus, one question.

The settings run alternately in one process against one server (old, new, old, new, …):

    RAG_LLM_THREADS=1 python bench/elite_llm_test_cost.py --rounds 1 --tag s33
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.answer.llm import chat_model  # noqa: E402
from rag.answer.local_llm import shared_server  # noqa: E402
from rag.elite import EliteConfig, elite_retrieve, explorer_for  # noqa: E402
from rag.retrieval.callers import Caller  # noqa: E402
from rag.store.catalog import Catalog  # noqa: E402
from rag.store.publish import publish_documents  # noqa: E402
from rag.store.settings import IngestSettings  # noqa: E402

QUESTION = "How long does the offline cache hold data?"
SETTINGS = {"old": EliteConfig(max_rounds=1, importance_chunks=1, noise_samples=1),
            "new": EliteConfig(max_rounds=1, importance_chunks=1, noise_samples=1, neighbours=1, judge_chunks=2)}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--tag", default="")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(Path(tmp) / "catalog.duckdb")
        publish_documents(catalog, IngestSettings(sources=[str(REPO / "samples" / "corpus")]))
        model = chat_model("local", timeout=600, max_retries=0)
        model.complete([{"role": "user", "content": "Reply OK."}], max_tokens=2)   # the server is up and warm
        server = shared_server().pid
        runs = []
        for _ in range(args.rounds):
            for name, config in SETTINGS.items():
                cpu0, wall0 = cpu_s(server), time.perf_counter()
                result = elite_retrieve(catalog, Caller(frozenset({"support"})), QUESTION, 600,
                                        explorer_for(model=model, config=config))
                calls = result.trace["llm_calls"]
                runs.append({"settings": name, "server_cpu_s": round(cpu_s(server) - cpu0, 1),
                             "wall_s": round(time.perf_counter() - wall0, 1),
                             "prompt_tokens": sum(c["input_tokens"] for c in calls),
                             "reply_tokens": sum(c["output_tokens"] for c in calls), "calls": calls,
                             "items": [i.doc_id for i in result.items], "tokens": result.tokens})
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "calls"}), flush=True)
        catalog.close()
    figures = {"settings": {k: repr(v) for k, v in SETTINGS.items()}, "runs": runs,
               "llm_threads": os.environ.get("RAG_LLM_THREADS"), "load_average": os.getloadavg()}
    out = write_results(figures, "elite-llm-test-cost", args.tag)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
