"""Surface forms of an English word for the counting branch (stems and stop words live in rag.text.analysis)."""
from __future__ import annotations


def inflections(word: str) -> list[str]:
    """Regular surface forms of a word (plural, -ed, -ing); the LLM policy may add irregular ones."""
    w = word.lower()
    base = w[:-1] if w.endswith("e") else w
    plural = w + "es" if w.endswith(("s", "x", "z", "ch", "sh")) else w + "s"
    forms = {w, plural, base + "ed", base + "ing"}
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        forms |= {w[:-1] + "ies", w[:-1] + "ied"}
    if len(w) >= 3 and w[-1] not in "aeiouwxy" and w[-2] in "aeiou" and w[-3] not in "aeiou":
        forms |= {w + w[-1] + "ed", w + w[-1] + "ing"}  # stop → stopped, stopping
    return sorted(forms)
