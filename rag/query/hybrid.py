"""The hybrid method: ELITE's lexical exploration restricted to the documents of LongRAG's top units.

LongRAG's dense ranking (and its hops) chooses where to look; ELITE then picks sentence windows inside
those documents, so more of the evidence fits a small budget than whole documents would. Both scopes are
pre-filtered by the caller's groups, and the windows come from ELITE's current-version store.
"""
from __future__ import annotations

from dataclasses import replace

from rag.elite import EliteConfig, elite_explore, explorer_for, pack_exploration
from rag.elite.explore import Exploration
from rag.retrieval.context import RetrievalResult
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools

# Importance only decides when to stop; inside LongRAG's few dozen documents every round costs milliseconds,
# so the hybrid explores all rounds instead.
HYBRID_ELITE = EliteConfig(noise_samples=0)


def hybrid_explore(snap: Snapshot, req: Request, tools: Tools, config: LongRAGConfig) -> Exploration:
    """Budget-independent: ELITE's ranked windows over the documents LongRAG ranked for the question."""
    ranked = longrag_candidates(snap, replace(req, as_of=None), tools, config)
    scope = frozenset(i.doc_id for i in ranked.items)
    explorer = explorer_for(embedder=tools.embedder, counter=tools.counter, config=HYBRID_ELITE)
    found = elite_explore(snap.catalog, req.caller, req.question, explorer, within=scope)
    found.trace["longrag"] = ranked.trace | {"scope_documents": len(scope)}
    return found


def pack_hybrid(found: Exploration, budget: int) -> RetrievalResult:
    return replace(pack_exploration(found, budget), method="hybrid")
