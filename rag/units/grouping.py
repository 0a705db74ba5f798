"""LongRAG grouping: merge linked documents into long units under a token cap."""
from __future__ import annotations


def group(ids: list[str], sizes: dict[str, int], neighbours: dict[str, set[str]], cap: int) -> list[list[str]]:
    """Group ids following LongRAG, deterministically.

    Visit ids in ascending order of link count among `ids` (ties by id); merge the neighbours' groups into
    the visited id's group, smallest first, while the total size stays within cap. Ids without usable links
    stay groups of their own (the reference drops them). Member order is the order of merging. Links to ids
    outside `ids` count for nothing, so the groups depend only on `ids` (a collection alone gives the same).
    """
    group_of = {i: i for i in ids}
    members = {i: [i] for i in ids}
    total = {i: sizes[i] for i in ids}
    known = set(ids)
    order = sorted(ids, key=lambda i: (len(neighbours.get(i, set()) & known), i))
    for doc in order:
        own = group_of[doc]
        candidates = {group_of[n] for n in neighbours.get(doc, ()) if n in known} - {own}
        for g in sorted(candidates, key=lambda g: (total[g], g)):
            if total[own] + total[g] <= cap:
                for m in members[g]:
                    group_of[m] = own
                members[own] += members.pop(g)
                total[own] += total.pop(g)
    return [members[g] for g in sorted(members, key=lambda g: members[g][0])]
