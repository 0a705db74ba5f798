"""Text analysis: sentences with offsets and words, for Chinese, English and both mixed; English as before."""
import re
import string

import blingfire
import bm25s
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.text.analysis import (
    MAX_QUESTION_CHARS,
    QuestionTooLong,
    check_question,
    content_terms,
    lexical_tokens,
    names,
    sentence_spans,
    sentences,
    word_bounds,
    words,
)


def pieces(text):
    return [text[s:e] for s, e in sentence_spans(text)]


def test_chinese_sentences_end_at_full_width_terminators_and_keep_their_closing_quotes():
    text = "他说：“缓存最多保存七天。”然后走了。真的吗？！是的；请检查日志"
    assert pieces(text) == ["他说：“缓存最多保存七天。”", "然后走了。", "真的吗？！", "是的；", "请检查日志"]


def test_traditional_chinese_with_corner_brackets():
    assert pieces("他說：「好的。」然後離線了。") == ["他說：「好的。」", "然後離線了。"]


def test_mixed_chinese_and_english_sentences_split_at_both_kinds_of_boundary():
    text = "E-217 设备支持 Wi-Fi。The cache holds seven days. Then it is full! 之后重连补传。"
    assert pieces(text) == ["E-217 设备支持 Wi-Fi。", "The cache holds seven days.", "Then it is full!", "之后重连补传。"]


def test_offsets_point_into_the_original_text_and_never_overlap():
    text = "  第一句。\n\n第二句！  Third one.  第四句"
    spans = sentence_spans(text)
    assert all(a < b and text[a:b].strip() for a, b in spans)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
    assert "".join(text[a:b] for a, b in spans).replace(" ", "") == text.replace(" ", "").replace("\n", "")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + " .,;:!?'\n-", max_size=300))
def test_english_sentences_are_exactly_blingfires(text):
    expected = [(s, e) for s, e in blingfire.text_to_sentences_and_offsets(text)[1] if text[s:e].strip()] \
        if text.strip() else []
    assert sentence_spans(text) == (expected or ([(0, len(text))] if text.strip() else []))


def test_sentences_print_a_sentence_on_one_line():
    assert sentences("The cache\nholds data. 第二句。") == ["The cache holds data.", "第二句。"]


def test_chinese_words_come_from_jieba_and_english_words_stay_whole():
    assert words("设备断网后缓存能保存多久？") == ["设备", "断网", "后", "缓存", "能", "保存", "多久"]
    assert words("E-217设备支持Wi-Fi") == ["e", "217", "设备", "支持", "wi", "fi"]
    assert words("The Gateways' cache") == ["the", "gateways", "cache"]


def test_search_mode_adds_the_words_inside_a_long_word():
    assert {"中华", "人民", "共和国", "中华人民共和国"} <= set(words("中华人民共和国", search=True))


def test_content_terms_drop_chinese_and_english_stop_words_and_stem_only_english():
    assert content_terms("设备断网后缓存能保存多久？") == ["设备", "断网", "后", "缓存", "保存", "多久"]
    assert content_terms("缓存的 gateways 是什么") == ["缓存", "gateway"]


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + " .,_-'\n", max_size=200))
def test_bm25_tokens_of_english_are_exactly_bm25s_own(text):
    assert lexical_tokens(text) == bm25s.tokenize([text], stopwords="en", show_progress=False,
                                                  return_ids=False)[0]


def test_bm25_tokens_segment_chinese_and_drop_its_stop_words():
    tokens = lexical_tokens("什么是本地缓存的保存期限？The cache")
    assert {"本地", "缓存", "保存", "期限", "cache"} <= set(tokens)
    assert "什么" not in tokens and "的" not in tokens and "the" not in tokens


def test_word_bounds_follow_the_segmentation():
    text = "本地缓存，E-217"
    bounds = word_bounds(text)
    assert {0, 2, 4, 5, 6, 7, 10} <= bounds
    assert 1 not in bounds and 3 not in bounds and 8 not in bounds


def test_an_over_long_question_is_refused_with_one_line():
    assert check_question("x" * MAX_QUESTION_CHARS) == "x" * MAX_QUESTION_CHARS
    with pytest.raises(QuestionTooLong) as err:
        check_question("缓存" * 50_000)
    assert "\n" not in str(err.value) and re.search(r"100,000 characters.*2,000", str(err.value))
    assert isinstance(err.value, ValueError)


def test_names_are_runs_of_capitalised_words_joined_by_the_particles_inside_names():
    text = ("In 1995 the Rank Group bought the Rank Organisation. It sold Pinewood Studios, and the Bank of "
            "England lent to Sam Elliott and Sam Elliott again.")
    assert names(text) == ["Rank Group", "Rank Organisation", "Pinewood Studios", "Bank of England", "Sam Elliott"]
    assert names("戴季陶是中国的记者。") == []


def test_chinese_text_is_told_from_english_text_quoting_a_chinese_name():
    from rag.text.analysis import mostly_han

    assert mostly_han("设备断网后，缓存最多保存 7 天（MQTT QoS 1）。")
    assert not mostly_han("Dai Jitao (戴季陶) was a Chinese journalist and politician.")


def test_traditional_text_is_segmented_through_its_simplified_form_and_meets_simplified_words():
    assert words("熱河戰役爆發時") == ["热河", "战役", "爆发", "时"]
    assert set(content_terms("誰擔任熱河省政府主席？")) == set(content_terms("谁担任热河省政府主席？"))
    assert lexical_tokens("網路速度") == lexical_tokens("网路速度")


def test_word_bounds_of_traditional_text_are_those_of_its_simplified_form_at_the_same_offsets():
    assert word_bounds("熱河戰役，E-217") == word_bounds("热河战役，E-217")
    assert {0, 2, 4} <= word_bounds("熱河戰役")


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=40))
def test_the_simplified_form_of_a_han_run_has_its_length(han):
    from rag.text.analysis import simplified

    assert len(simplified(han)) == len(han)
    assert "".join(words(han)) == simplified(han)
