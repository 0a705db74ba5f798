"""ELITE's settings; the defaults are the issue's (K = 25, ±5 sentences, 3 noise samples, 3 rounds)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EliteConfig:
    top_k: int = 25                  # sentences kept per collect round
    neighbours: int = 5              # ± sentences around each hit
    noise_samples: int = 3           # perturbed copies per chunk for importance
    max_rounds: int = 3              # collect rounds, the first included
    importance_chunks: int = 8       # best chunks per round scored for importance (1 + samples answers each)
    judge_sees_importance: bool = True  # False: an LLM judge gets importance only in rounds where it decides
    judge_chunks: int = 8            # chunks shown to the judge
    expansion_terms: int = 6         # new breadth terms and new depth terms per round, each
    breadth_weight: float = 0.3      # weights relative to the question's own words, times idf
    depth_weight: float = 1.0        # (depth terms are names that bridge hops: as strong as the question's words)
    idf: bool = True                 # weight terms by rarity; False counts every matched word as 1 (the reference)
    title_weight: float = 0.5        # a matching sentence gains this share of its title's match
    min_coverage: float = 0.85       # the rule: question-word weight found in all chunks together …
    min_focus: float = 0.9           # … and in the best single chunk (multi-hop evidence rarely sits in one) …
    min_importance: float = 0.05     # … and one chunk whose answer depends on its exact words
    prune_ratio: float = 0.15        # organise drops chunks scoring below this share of the best
    seed: int = 0
