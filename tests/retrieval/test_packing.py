"""Packing whose token counts are taken a batch at a time packs exactly what packing the counted list would."""
import random
from dataclasses import replace

from rag.models.tokens import default_counter
from rag.retrieval.context import MIN_ITEM_TOKENS, ContextItem, pack, pack_lazily


def items(rng: random.Random, n: int) -> list[ContextItem]:
    words = ["river", "a", "Chancellor", "1987", "über", "co-founded", "the", "régime", "x" * 30]
    out = []
    for k in range(n):
        doc = f"d{rng.randrange(n // 2 + 1)}"  # repeated documents, some with the same range: packed once
        start = rng.choice((0, 10))
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 120)))
        out.append(ContextItem(doc, "1", doc, text, 0, ((start, start + 5),), round(1 - k / n, 6)))
    return out


def test_packing_a_batch_at_a_time_equals_packing_the_counted_list():
    rng, counter = random.Random(3), default_counter()
    for trial in range(60):
        candidates = items(rng, rng.randint(0, 90))
        counted = [replace(c, tokens=int(n)) for c, n in zip(candidates, counter.count([c.text for c in candidates]))]
        budget = rng.choice((1, 15, 100, 700, 2000, 10_000))
        batch = rng.choice((1, 5, 24))
        assert pack_lazily(candidates, budget, counter.count_cached, batch) == reference(counted, budget, batch)


def reference(counted: list[ContextItem], budget: int, batch: int) -> list[ContextItem]:
    """pack() over the items counted so far, one more batch at a time, until less room is left than any item takes."""
    taken: list[ContextItem] = []
    for end in range(batch, len(counted) + batch, batch):
        taken = pack(counted[:end], budget)
        if budget - sum(c.tokens for c in taken) < MIN_ITEM_TOKENS:
            break
    return taken
