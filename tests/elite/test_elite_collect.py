import numpy as np
from elite_helpers import store_of

from rag.elite.collect import Term, coverage, expand, score_sentences, term_weights, terms_from, top_k


def ranked(store, question, mask=None, **kw):
    mask = np.ones(store.n_sentences, dtype=bool) if mask is None else mask
    weights = term_weights(store, mask, terms_from([question], "question", 1, 1.0, set()), **kw)
    return score_sentences(store, mask, weights)


def test_sentence_sharing_more_question_words_ranks_first():
    store = store_of("The cache holds seven days. The cache evicts at ninety percent. Logs rotate daily.")
    scores = ranked(store, "How many days does the cache hold?")
    assert list(top_k(scores, 3)) == [0, 1]          # "Logs rotate daily." shares no word: not a hit


def test_rare_words_outweigh_common_ones():
    store = store_of("Gateway one. Gateway two. Gateway three. Gateway four has a zstd codec.", "Codec list.")
    scores = ranked(store, "Which gateway uses the zstd codec?")
    assert top_k(scores, 1)[0] == 3


def test_plain_overlap_counts_every_word_as_one():
    store = store_of("Alpha beta. Alpha gamma delta.")
    scores = ranked(store, "alpha beta gamma delta", idf=False)
    assert list(scores) == [2.0, 3.0]


def test_inflected_forms_and_case_match():
    store = store_of("Rotated logs are kept. Nothing else.")
    assert ranked(store, "When are LOGS rotating?")[0] > 0


def test_stop_words_alone_never_match():
    store = store_of("It was the one that is there.")
    assert not ranked(store, "What is the one that was there?").any()


def test_ties_go_to_the_earlier_sentence_and_k_is_respected():
    store = store_of("Red fox. Red fox. Red fox. Red fox.")
    assert list(top_k(ranked(store, "red fox"), 2)) == [0, 1]


def test_hidden_sentences_score_zero_and_do_not_shape_weights():
    store = store_of("Public note on valves.", "Secret valves secret pumps.")
    mask = store.sent_doc == 0
    scores = ranked(store, "valves pumps", mask=mask)
    assert scores[1] == 0 and scores[0] > 0
    weights = term_weights(store, mask, [Term("pump", "question", 1)])
    assert weights == {}                              # "pumps" occurs only where the caller cannot read


def test_expansion_takes_n_neighbours_within_the_document_only():
    store = store_of("A0. A1. A2. A3. A4. A5. A6.", "B0. B1.")
    scores = np.zeros(store.n_sentences)
    scores[[1, 7]] = [2.0, 1.0]                       # A1 and B0
    chunks = expand(store, np.array([1, 7]), scores, 2)
    assert [(c.doc, c.first, c.last) for c in chunks] == [(0, 0, 3), (1, 7, 8)]


def test_overlapping_and_touching_windows_merge_in_document_order():
    store = store_of(" ".join(f"S{i}." for i in range(12)))
    scores = np.zeros(store.n_sentences)
    scores[[2, 6, 10]] = [1.0, 3.0, 2.0]
    chunks = expand(store, np.array([6, 10, 2]), scores, 1)
    assert [(c.first, c.last, c.hits) for c in chunks] == [(5, 7, (6,)), (9, 11, (10,)), (1, 3, (2,))]
    merged = expand(store, np.array([6, 2]), scores, 2)   # windows 0–4 and 4–8 overlap
    assert [(c.first, c.last, c.hits, c.score) for c in merged] == [(0, 8, (2, 6), 3.0)]
    touching = expand(store, np.array([2, 6]), scores, 1)  # windows 1–3 and 5–7 leave 4 out: two chunks
    assert len(touching) == 2
    assert len(expand(store, np.array([2, 5]), scores, 1)) == 1   # 1–3 and 4–6 touch: one chunk


def test_coverage_is_measured_together_and_in_the_best_chunk():
    store = store_of("Dai Jitao was born in China.", "China carries a large debt.")
    mask = np.ones(store.n_sentences, dtype=bool)
    weights = term_weights(store, mask, terms_from(["Dai Jitao debt"], "question", 1, 1.0, set()))
    scores = score_sentences(store, mask, weights)
    together, best = coverage(store, weights, expand(store, top_k(scores, 5), scores, 0))
    assert together == 1.0 and 0.5 < best < 1.0
