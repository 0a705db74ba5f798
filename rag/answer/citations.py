"""Citations of an answer: how they are read and checked, attribution after the fact, and the short-answer check.

Citation rule (`check_citations`): a citation is the text inside square brackets, split at "," or ";", with any
" · version …" suffix dropped, so `[a]`, `[a, b]` and a copied header `[a · version 2026]` all cite `a`; a place
after the id (`[a p.7]`, `[a slide 3]`, `[a sheet Budget]`) cites `a` when `a p.7` is not itself a document.
A citation is *locatable* when the sentence carrying it (the previous sentence when the brackets stand alone)
can be found in the cited document's context text (for `[a; b]`, in a's and b's together): every quoted span
("…" or “…”) appears there verbatim (case and whitespace ignored), or, when nothing is quoted, at least half of
the sentence's content words do. A citation of a document outside the context is never locatable.

Usable citation (`cite`): one the reader wrote whose document is in the caller's context and locatable there; the
others are dropped and listed. A statement left without one is *attributed*: the context sentence holding the
largest share of its content words is found (ties go to the earliest, i.e. best-ranked, sentence), and if the
statement is locatable in that sentence alone its document is cited, marked `attributed`; else it stays uncited.

Joint support (ALCE's citation recall asks that a statement's citations together support it): a statement that
draws on two documents is found half in one. When at least `JOINT_WORDS` of its *distinctive* words (content words
in at most `DISTINCT_DOCS` of the context's documents) are in none of its cited documents, the context sentence of
another document holding the most of them is cited too, marked `attributed` (at most `MAX_JOINT` a statement). A
multi-hop answer also rests on the question's premise ("the woman who portrayed Corliss Archer" is Shirley Temple):
when `JOINT_WORDS` distinctive words of the question are in no cited document, the sentence of another document
holding the most of them *and* a word of a cited statement that the question lacks is cited for the premise
(statement `PREMISE`).

Named documents: a statement that names a context document by its title ("… more titles than Liezel Huber") says
something of it, so that document is cited too, marked `attributed`, through its sentence holding the most of the
statement's content words (at least `JOINT_WORDS` of them, one not of the title: a document that only names
itself is not drawn on); so is a document the question names, for the premise, when that sentence also holds a
word of a cited statement that the question lacks. A title is named when its words, without a trailing "(…)"
qualifier, stand together in the text.

Compared documents: a question naming two or more context documents ("Which band was formed first, The Exies or
Circus Diablo?") rests on each, whichever one the answer names: each is cited for the premise through its sentence
holding the most (≥ `JOINT_WORDS`) of the question's words. A short answer that is a context document's title ("Mika
Häkkinen") cites it through its sentence holding the most (≥ `JOINT_WORDS`) of the question's words beyond the title.
Neither cites anything for an answer nothing supports (it is withheld).

Short-answer rule: the short answer is supported by a text when its normalised form (lower case, punctuation and
extra spaces removed) is a substring of the text's, or every one of its content words and numbers occurs there;
"yes" and "no" are derived from a comparison, so a cited long answer supports them. Not supported by the long
answer's cited documents, it is located in the context like a statement; found nowhere, it is flagged.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rag.retrieval.context import ContextItem
from rag.text.analysis import has_han, is_stop, sentences, words

LOCATABLE_SHARE = 0.5
JOINT_WORDS, DISTINCT_DOCS, MAX_JOINT = 2, 2, 2
SHORT_ANSWER, PREMISE = -1, -2  # Citation.statement of the short answer's and the question premise's citations
ATTRIBUTED, MODEL_GIVEN = "attributed", "model-given"
SHORT_IN_CITED, SHORT_ATTRIBUTED, SHORT_UNSUPPORTED = "in cited text", "attributed", "not found"

_STOPWORDS = frozenset(
    "the and for are was were with that this from has have had not but its into onto our their there these those "
    "they them then than what which who whom whose when where why how all any can does did doing been being his "
    "her she him you your yours about above after before over under again further once only own same such very "
    "will would should could may might must also each other some more most both few nor out off per via".split()
)
_BRACKETS = re.compile(r"\[([^\[\]\n]+)\]")
_QUOTES = re.compile(r'"([^"\n]+)"|“([^”\n]+)”')
_WORDS = re.compile(r"[a-z0-9]+")
_HEADER_LINE = re.compile(r"^(## .*|\[[^\]\n]*\])$")
_PLACE = re.compile(r"\s+(?:p\.\s*\d+|pp?\.\s*\d+\s*[–-]\s*\d+|slides?\s+\d+(?:\s*[–-]\s*\d+)?|sheet\s+.+)$",
                    re.IGNORECASE)
_PUNCTUATION = re.compile(r"[^\w\s]")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?。！？])")
_END = re.compile(r"(.*?)\s*([.!?。！？]*)$", re.DOTALL)
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


@dataclass(frozen=True)
class Citation:
    """One cited document of an answer: which version and place, who cited it, and for what."""

    doc_id: str
    version: str
    location: str | None        # "p.7", "slide 3", … when the document has places
    origin: str                 # "model-given" (the reader wrote it) or "attributed" (located after the fact)
    statement: int              # the long answer's statement it supports; SHORT_ANSWER, or PREMISE (the question's)
    sentence: str | None = None  # attributed: the context sentence the statement was found in

    @property
    def label(self) -> str:
        """How the answer text cites it: `doc_id p.7`."""
        return f"{self.doc_id} {self.location}" if self.location else self.doc_id


@dataclass(frozen=True)
class Cited:
    """The long answer with only usable citations, each citation, the dropped ones, and the short-answer check."""

    text: str
    citations: tuple[Citation, ...]
    dropped: tuple[str, ...]    # the reader's citations that were not usable, as written
    uncited: int                # statements left without any citation
    short_answer_check: str     # SHORT_IN_CITED, SHORT_ATTRIBUTED or SHORT_UNSUPPORTED


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning: numbers, words of three or more letters that are not stopwords, and
    Chinese words (rag.text.analysis's segmentation) that are not stop words."""
    if has_han(text):
        return [w for w in words(text) if (has_han(w) and not is_stop(w)) or w.isdigit()
                or (len(w) >= 3 and w not in _STOPWORDS)]
    return [w for w in _WORDS.findall(text.lower()) if w.isdigit() or (len(w) >= 3 and w not in _STOPWORDS)]


def cited_ids(bracket: str) -> list[str]:
    """The document ids inside one pair of brackets (without the brackets)."""
    ids = (part.split("·")[0].strip() for part in re.split(r"[,;]", bracket))
    return [i for i in ids if i and not re.match(r"(version|part)\b", i)]


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def locatable(claim: str, doc_text: str) -> bool:
    """The module's locatability rule: quoted spans verbatim, else half the claim's content words."""
    quotes = [a or b for a, b in _QUOTES.findall(claim)]
    if quotes:
        return all(_normalise(q) in _normalise(doc_text) for q in quotes)
    claimed = content_words(claim)
    doc_words = set(content_words(doc_text))
    return bool(claimed) and sum(w in doc_words for w in claimed) >= LOCATABLE_SHARE * len(claimed)


def _doc_texts(items: list[ContextItem]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for item in items:
        docs[item.doc_id] = docs.get(item.doc_id, "") + item.text + "\n"
    return docs


def _split_place(cited: str, docs: dict[str, str]) -> tuple[str, str | None]:
    """(doc id, place written after it) of one cited id."""
    if cited in docs:
        return cited, None
    bare = _PLACE.sub("", cited)
    return bare, (cited[len(bare):].strip() or None)


def _claims(answer_text: str) -> list[tuple[str, list[str]]]:
    """(claim, its brackets) per sentence; brackets standing alone after a sentence join that sentence."""
    out: list[tuple[str, list[str]]] = []
    for sentence in sentences(answer_text):
        claim = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", " ".join(_BRACKETS.sub(" ", sentence).split()))
        brackets = _BRACKETS.findall(sentence)
        if not content_words(claim) and out:
            out[-1][1].extend(brackets)
        elif claim or brackets:
            out.append((claim, brackets))
    return out


def check_citations(answer_text: str, items: list[ContextItem]) -> tuple[list[str], bool, float]:
    """(cited ids in first-cited order, all valid, share of citation occurrences locatable); see the module doc."""
    docs = _doc_texts(items)
    citations: list[str] = []
    occurrences = located = 0
    for claim, brackets in _claims(answer_text):
        for bracket in brackets:
            ids = [_split_place(i, docs)[0] for i in cited_ids(bracket)]
            together = "\n".join(docs[i] for i in ids if i in docs)  # one bracket's documents support it jointly
            for doc_id in ids:
                if doc_id not in citations:
                    citations.append(doc_id)
                occurrences += 1
                located += doc_id in docs and locatable(claim, together)
    valid = bool(citations) and all(c in docs for c in citations)
    return citations, valid, located / occurrences if occurrences else 0.0


def strip_citations(text: str) -> str:
    return " ".join(_BRACKETS.sub(" ", text).split())


def item_sentences(item: ContextItem) -> list[str]:
    """The sentences of an item's text, its header lines left out."""
    body = "\n".join(ln for ln in item.text.splitlines() if not _HEADER_LINE.match(ln.strip()))
    return [s.strip() for s in sentences(body) if s.strip()]


def locate(claim: str, items: list[ContextItem]) -> tuple[ContextItem, str] | None:
    """The item and sentence a claim is found in (see the module doc), or None."""
    claimed = content_words(claim)
    if not claimed:
        return None
    best, best_share = None, -1.0
    for item in items:
        for sentence in item_sentences(item):
            present = set(content_words(sentence))
            share = sum(w in present for w in claimed) / len(claimed)
            if share > best_share and locatable(claim, sentence):
                best, best_share = (item, sentence), share
    return best


def _model_given(claim: str, brackets: list[str], index: int, items: list[ContextItem], docs: dict[str, str],
                 dropped: list[str]) -> list[Citation]:
    """The usable citations among a statement's brackets; the rest go to `dropped`."""
    first = {}
    for item in items:
        first.setdefault(item.doc_id, item)
    out = []
    for bracket in brackets:
        cited = [(raw, *_split_place(raw, docs)) for raw in cited_ids(bracket)]
        together = "\n".join(docs[i] for _, i, _ in cited if i in docs)
        for raw, doc_id, place in cited:
            if doc_id not in docs or not locatable(claim, together):
                dropped.append(raw)
            elif doc_id not in {c.doc_id for c in out}:
                out.append(Citation(doc_id, first[doc_id].doc_version, place or first[doc_id].location,
                                    MODEL_GIVEN, index))
    return out


def _attributed(claim: str, index: int, items: list[ContextItem]) -> list[Citation]:
    """The claim's attributed citation, or none when it is found in no context sentence."""
    found = locate(claim, items)
    if found is None:
        return []
    item, sentence = found
    return [Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED, index, sentence)]


def short_supported(short: str, text: str) -> bool:
    """The short-answer rule of the module doc, against one text."""
    plain = _plain(short)
    if not plain:
        return False
    if plain in _plain(text):
        return True
    wanted = content_words(short)
    return bool(wanted) and set(wanted) <= set(content_words(text))


def cite(long_answer: str, short_answer: str, items: list[ContextItem], question: str = "") -> Cited:
    """The answer with usable citations only, attributed ones added where the reader gave none or where a statement
    (or the question's premise) rests on a further document; see the module doc."""
    docs = _doc_texts(items)
    distinct = _distinctive(docs)
    dropped: list[str] = []
    citations: list[Citation] = []
    parts, uncited, claimed = [], 0, set()
    for index, (claim, brackets) in enumerate(_claims(long_answer)):
        found = _model_given(claim, brackets, index, items, docs, dropped) or _attributed(claim, index, items)
        if found:
            found += _named(claim, found, index, items)
            found += _joint(set(content_words(claim)), found, index, items, docs, distinct)
        citations += found
        uncited += not found
        claimed |= set(content_words(claim)) if found else set()
        parts.append(_with_labels(claim, found))
    asked = set(content_words(question))
    premise: list[Citation] = []
    if citations:
        premise = _named(question, citations, PREMISE, items, claimed - asked)
        premise += _joint(asked, [*citations, *premise], PREMISE, items, docs, distinct, claimed - asked)
    check, short_citation = _check_short(short_answer, citations, items, docs)
    if citations or check != SHORT_UNSUPPORTED:  # an answer with no support cites nothing: it is withheld
        short_citation += _subject(short_answer, question, [*citations, *premise, *short_citation], items)
        premise += _compared(question, [*citations, *premise, *short_citation], items)
    return Cited(" ".join(parts), (*citations, *premise, *short_citation), tuple(dropped), uncited, check)


def _distinctive(docs: dict[str, str]) -> set[str]:
    """Content words found in at most DISTINCT_DOCS of the context's documents: the ones that can attribute."""
    seen: dict[str, int] = {}
    for text in docs.values():
        for w in set(content_words(text)):
            seen[w] = seen.get(w, 0) + 1
    return {w for w, n in seen.items() if n <= DISTINCT_DOCS}


def _joint(wanted: set[str], found: list[Citation], index: int, items: list[ContextItem], docs: dict[str, str],
           distinct: set[str], link: set[str] | None = None) -> list[Citation]:
    """Further attributed citations for the `distinct` `wanted` words no cited document holds (module doc); with
    `link`, a sentence counts only when it also holds one of those words."""
    cited = {c.doc_id for c in found}
    missing = (wanted - _held(wanted, found, docs)) & distinct
    out: list[Citation] = []
    while len(missing) >= JOINT_WORDS and len(out) < MAX_JOINT:
        best = _best_sentence([i for i in items if i.doc_id not in cited], missing,
                              lambda present: link is None or link & present)
        if best is None or len(best[2]) < JOINT_WORDS:
            break
        item, sentence, held = best
        out.append(Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED, index, sentence))
        cited.add(item.doc_id)
        missing -= held
    return out


def _named(text: str, found: list[Citation], index: int, items: list[ContextItem],
           link: set[str] | None = None) -> list[Citation]:
    """Attributed citations of the context documents `text` names by title that are not cited yet (module doc)."""
    plain, wanted = f" {_plain(text)} ", set(content_words(text))
    cited = {c.doc_id for c in found}
    out: list[Citation] = []
    for item in items:
        name = _title(item)
        titled = set(content_words(name))
        if item.doc_id in cited or not name or not _names(plain, name):
            continue
        beyond = (wanted | (link or set())) - titled
        best = _best_sentence([item], wanted, lambda present: beyond & present and (link is None or link & present))
        if best is not None and len(best[2]) >= JOINT_WORDS:
            out.append(Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED, index, best[1]))
            cited.add(item.doc_id)
    return out


def _compared(question: str, found: list[Citation], items: list[ContextItem]) -> list[Citation]:
    """Premise citations of the context documents a question names, when it names two or more (module doc)."""
    plain, asked = f" {_plain(question)} ", set(content_words(question))
    named = {i.doc_id for i in items if _names(plain, _title(i))}
    if len(named) < 2:
        return []
    cited = {c.doc_id for c in found}
    out: list[Citation] = []
    for item in (i for i in items if i.doc_id in named and i.doc_id not in cited):
        best = _best_sentence([item], asked, bool)
        if best is not None and len(best[2]) >= JOINT_WORDS:
            out.append(Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED, PREMISE, best[1]))
            cited.add(item.doc_id)
    return out


def _subject(short: str, question: str, found: list[Citation], items: list[ContextItem]) -> tuple[Citation, ...]:
    """The citation of the context document the short answer is the title of, when not cited yet (module doc)."""
    cited, asked, answer = {c.doc_id for c in found}, set(content_words(question)), _plain(short)
    for item in (i for i in items if answer and i.doc_id not in cited and _title(i) == answer):
        best = _best_sentence([item], asked - set(content_words(answer)), bool)
        if best is not None and len(best[2]) >= JOINT_WORDS:
            return (Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED, SHORT_ANSWER, best[1]),)
    return ()


def _title(item: ContextItem) -> str:
    """The item's title as it is looked for in a text: plain, without a trailing "(…)" qualifier; "" if wordless."""
    name = _plain(_QUALIFIER.sub("", item.title))
    return name if content_words(name) else ""


def _best_sentence(items: list[ContextItem], wanted: set[str],
                   admits: Callable[[set[str]], object]) -> tuple[ContextItem, str, set[str]] | None:
    """(item, sentence, the wanted words it holds) of the context sentence holding the most wanted words among those
    `admits` (given a sentence's content words); ties go to the earliest. None when no sentence holds any."""
    best, held = None, set()
    for item in items:
        for sentence in item_sentences(item):
            present = set(content_words(sentence))
            if len(wanted & present) > len(held) and admits(present):
                best, held = (item, sentence), wanted & present
    return (*best, held) if best is not None else None


def _names(plain: str, name: str) -> bool:
    """Whether the text names the title: its words standing together (Chinese is not spaced, so a substring)."""
    return bool(name) and (name in plain if has_han(name) else f" {name} " in plain)


def _plain(text: str) -> str:
    """Lower case, punctuation as spaces, single spaces: how a title is looked for in a text."""
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


def _held(wanted: set[str], found: list[Citation], docs: dict[str, str]) -> set[str]:
    """The wanted words the cited documents hold between them."""
    return wanted & set(content_words("\n".join(docs[d] for d in {c.doc_id for c in found})))


def _with_labels(claim: str, found: list[Citation]) -> str:
    """The claim with its citations before its final punctuation, so no citation reads as the next sentence's."""
    if not found:
        return claim
    body, end = _END.match(claim).groups()
    return f"{body} [{'; '.join(c.label for c in found)}]{end}"


def _check_short(short: str, citations: list[Citation], items: list[ContextItem],
                 docs: dict[str, str]) -> tuple[str, tuple[Citation, ...]]:
    """The short-answer check of the module doc, with the short answer's attributed citation when one was needed."""
    cited_text = "\n".join(docs[d] for d in dict.fromkeys(c.doc_id for c in citations))
    if citations and short.strip().lower().rstrip(".") in ("yes", "no"):
        return SHORT_IN_CITED, ()
    if cited_text and short_supported(short, cited_text):
        return SHORT_IN_CITED, ()
    for item in items:
        for sentence in item_sentences(item):
            if short_supported(short, sentence):
                return SHORT_ATTRIBUTED, (Citation(item.doc_id, item.doc_version, item.location, ATTRIBUTED,
                                                   SHORT_ANSWER, sentence),)
    return SHORT_UNSUPPORTED, ()
