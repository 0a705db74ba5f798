import numpy as np

from elite_helpers import store_of
from rag.elite.counting import count_occurrences, detect_count, direct_answer, forms_of


def test_counting_matches_whole_words_in_every_inflected_form_case_insensitively():
    store = store_of("The Cache filled. Caches are cleared; a cached block.", "Caching is off. No cachet, no precache.")
    found = count_occurrences(store, np.ones(2, dtype=bool), forms_of("cache"))
    assert [(o.doc, store.texts[o.doc][o.start:o.end]) for o in found] == [
        (0, "Cache"), (0, "Caches"), (0, "cached"), (1, "Caching")]


def test_a_phrase_matches_across_line_breaks_and_only_as_whole_words():
    store = store_of("The edge gateway and the edge\ngateways. Not an edge-gateway, not edges gateway.")
    found = count_occurrences(store, np.ones(1, dtype=bool), forms_of("edge gateway"))
    assert [store.texts[0][o.start:o.end] for o in found] == ["edge gateway", "edge\ngateways"]


def test_documents_the_caller_cannot_read_are_not_counted():
    store = store_of("alarm alarm", "alarm")
    found = count_occurrences(store, np.array([False, True]), forms_of("alarm"))
    assert [o.doc for o in found] == [1]


def test_direct_answer_cites_documents_and_offsets():
    store = store_of("alarm raised", "two alarms, one alarm")
    request = detect_count("How many times does the word 'alarm' appear?")
    answer = direct_answer(store, request, count_occurrences(store, np.ones(2, dtype=bool), request.forms))
    assert answer["count"] == 3
    assert answer["documents"][0] == {"doc_id": "d1", "version": "1", "count": 2, "offsets": [[4, 10], [16, 21]]}
    assert "3 times in 2" in answer["answer"]


def test_offline_detection_reads_quoted_and_unquoted_words():
    assert detect_count('How many times does "firmware" appear in the manuals?').phrase == "firmware"
    assert detect_count("How many times is the word gateway mentioned?").phrase == "gateway"
    assert detect_count("How often is heartbeat mentioned in the runbooks?").phrase == "heartbeat"


def test_ordinary_questions_are_not_counting_questions():
    assert detect_count("How many days does the offline cache hold?") is None
    assert detect_count("What is the heartbeat interval?") is None
    assert detect_count("How many times did plague occur in the birthplace of the painter?") is None


def test_llm_forms_are_added_to_the_regular_ones():
    assert {"run", "runs", "ran"} <= set(forms_of("run", ["ran", " "]))
