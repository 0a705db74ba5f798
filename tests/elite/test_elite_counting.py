import numpy as np
import pytest
from elite_helpers import store_of

from rag.elite.counting import count_occurrences, detect_count, direct_answer, forms_of
from rag.text.analysis import MAX_QUESTION_CHARS, QuestionTooLong


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


def test_chinese_counting_questions_name_their_word_by_quotes_marker_or_mention():
    assert detect_count("“缓存”这个词在文档中出现了几次？").phrase == "缓存"
    assert detect_count("文档里缓存一词出现了多少次").phrase == "缓存"
    assert detect_count("文档中提到了多少次缓存？").phrase == "缓存"
    assert detect_count("补传被提到了几次？").phrase == "补传"
    assert detect_count("「快取」一詞出現幾次？").phrase == "快取"


def test_chinese_events_and_ordinary_questions_are_not_counting_questions():
    assert detect_count("缓存出现了几次？") is None          # 出现 alone: an event, as "occur" is
    assert detect_count("设备断网后缓存能保存多久？") is None
    assert detect_count("重连后会补传几次？") is None


def test_chinese_words_count_whole_by_segmentation_without_inflection():
    store = store_of("本地缓存最多保存七天。缓存写满时删除旧数据；缓存区另有说明。", "缓存。", "没有相关内容。")
    request = detect_count("“缓存”这个词出现了几次？")
    assert request.forms == ("缓存",)
    found = count_occurrences(store, np.ones(3, dtype=bool), request.forms)
    assert [(o.doc, store.texts[o.doc][o.start:o.end]) for o in found] == [(0, "缓存")] * 3 + [(1, "缓存")]
    answer = direct_answer(store, request, found)
    assert answer["count"] == 4 and answer["answer"] == "“缓存”在 2 份可读文档中出现 4 次。"


def test_a_chinese_word_inside_a_longer_word_is_not_counted():
    store = store_of("数据写入本地数据库，数据库每天备份。")   # jieba: 数据|写入|本地|数据库
    found = count_occurrences(store, np.ones(1, dtype=bool), forms_of("数据"))
    assert [(o.start, o.end) for o in found] == [(0, 2)]


def test_over_long_questions_are_refused_before_detection():
    with pytest.raises(QuestionTooLong):
        detect_count("How many times does the word " + "cache " * 20_000 + "appear?")


def test_detection_at_the_length_limit_handles_adversarial_repeats():
    question = ("how many times the word " * 200)[:MAX_QUESTION_CHARS]
    assert detect_count(question) is None
