"""A document the question names by its exact title leads the question's list: the question says what it is about.
Only titles written verbatim count, only documents the caller may read, and a title several documents share means
the one the ranking put highest."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.named import named_titles
from rag.retrieval.request import Request, Tools
from rag.text.analysis import word_bounds

# Two playwrights whose own pages share almost no word with the question, and pages that share many.
PLAYS = [
    ("albee", "Edward Albee", "Edward Franklin Albee III was an American dramatist, born in 1928, died in 2016."),
    ("barrie", "J. M. Barrie", "Sir James Matthew Barrie was a Scottish novelist, born in Kirriemuir in 1860."),
    ("mercury-planet", "Mercury", "Mercury is the smallest planet of the Solar System and the closest to the Sun."),
    ("mercury-metal", "Mercury", "Mercury is a chemical element, a metal that is liquid at room temperature; it "
                                 "boils at 357 degrees Celsius."),
] + [(f"long{i}", f"Long lives on the stage {i}", f"Which playwright lived a longer life? Playwrights who lived long "
                                                  f"lives, part {i}: a longer life on the stage for many a playwright.")
     for i in range(6)]


def corpus(tmp_path, embedder, acl=None):
    (tmp_path / "docs.jsonl").write_text("\n".join(
        json.dumps({"doc_id": d, "title": t, "text": x, "acl": (acl or {}).get(d, ["bench", "staff"])})
        for d, t, x in PLAYS) + "\n")
    return publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder)


def ranked_ids(sample, embedder, question, groups=("bench",), **config):
    snap = uncommitted(*sample)
    ranked = longrag_candidates(snap, Request(Caller(frozenset(groups)), question, 1000),
                                Tools(embedder, default_counter()), LongRAGConfig(hops=1, **config))
    return list(dict.fromkeys(i.doc_id for i in ranked.items))


def test_a_title_is_named_only_verbatim_between_word_bounds_the_longer_of_two_that_overlap():
    titles = {"Edward Albee", "Albee", "J. M. Barrie", "Paris", "The", "Who", "Song of the South", "北京",
              "中华人民共和国"}.__contains__
    assert named_titles("Which playwright lived longer, Edward Albee or J. M. Barrie?", titles) == \
        ["Edward Albee", "J. M. Barrie"]
    assert named_titles("Who wrote Song of the South?", titles) == ["Song of the South"]  # "Who": stop words only
    assert named_titles("Is a Parisian café in paris?", titles) == []  # inside a word; another case
    assert named_titles("北京是中华人民共和国的首都吗？", titles) == ["北京", "中华人民共和国"]


def test_the_documents_a_question_names_lead_its_list_in_the_questions_order(tmp_path, embedder):
    sample = corpus(tmp_path, embedder)
    question = "Which playwright lived a longer life, Edward Albee or J. M. Barrie?"
    before = ranked_ids(sample, embedder, question, question_titles="off")
    assert before.index("barrie") > 2  # the pages that repeat the question's words rank above Barrie's own
    after = ranked_ids(sample, embedder, question)
    assert after[:2] == ["albee", "barrie"] and sorted(after) == sorted(before)


def test_a_title_several_documents_share_means_the_one_ranked_highest(tmp_path, embedder):
    sample = corpus(tmp_path, embedder)
    assert ranked_ids(sample, embedder, "At what temperature does Mercury boil?")[0] == "mercury-metal"
    assert ranked_ids(sample, embedder, "How close to the Sun is Mercury?")[0] == "mercury-planet"


def test_a_titles_only_document_joins_the_list_when_the_ranking_left_it_out(tmp_path, embedder):
    sample = corpus(tmp_path, embedder)
    question = "Which playwright lived a longer life than J. M. Barrie?"
    plain = ranked_ids(sample, embedder, question, max_units=1, question_titles="off")
    assert "barrie" not in plain  # one unit ranked, and it is a page that repeats the question
    assert ranked_ids(sample, embedder, question, max_units=1) == ["barrie", *plain]


def test_a_named_document_the_caller_may_not_read_is_neither_shown_nor_counted(tmp_path, embedder):
    sample = corpus(tmp_path, embedder, acl={"barrie": ["staff"], "mercury-planet": ["staff"]})
    question = "Which playwright lived a longer life, Edward Albee or J. M. Barrie?"
    assert "barrie" not in ranked_ids(sample, embedder, question)
    assert ranked_ids(sample, embedder, question, groups=("staff",))[:2] == ["albee", "barrie"]
    # The planet is not readable, so "Mercury" means the metal alone, though the ranking left both out.
    question = "Which playwright lived a longer life than Mercury?"
    plain = ranked_ids(sample, embedder, question, max_units=1, question_titles="off")
    assert not {"mercury-metal", "mercury-planet"} & set(plain)
    assert ranked_ids(sample, embedder, question, max_units=1) == ["mercury-metal", *plain]
    assert ranked_ids(sample, embedder, question, groups=("staff",), max_units=1) == \
        ranked_ids(sample, embedder, question, groups=("staff",), max_units=1, question_titles="off")  # ambiguous



TITLES = ["Edward Albee", "Albee", "Paris", "Paris Hilton", "Hilton", "The Who", "北京", "北京大学", "Song of the South"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TITLES + ["the", "of", "and", "?", ",", "Parisian", "albee", "大学", "是"]),
                max_size=12), st.sampled_from([" ", ""]))
def test_named_titles_are_known_written_at_word_bounds_in_order_and_never_overlap(pieces, joiner):
    question = joiner.join(pieces)
    bounds, end = word_bounds(question), 0
    for title in named_titles(question, set(TITLES).__contains__):
        assert title in TITLES
        # written at word bounds after the one before: in order, without overlap
        start = next(i for i in range(end, len(question)) if question.startswith(title, i)
                     and {i, i + len(title)} <= bounds)
        end = start + len(title)


@given(st.lists(st.sampled_from(TITLES), unique=True, max_size=5))
def test_titles_written_apart_are_all_found_in_order_but_stop_words_alone(titles):
    question = "Is " + " and also ".join(titles) + "?"
    assert named_titles(question, set(TITLES).__contains__) == [t for t in titles if t != "The Who"]


def test_a_warmed_snapshot_builds_nothing_more_for_a_question_that_names_titles(tmp_path, embedder):
    """The title table (with the other look-ups a question reads) is built beside the served state, not by a question."""
    snap = uncommitted(*corpus(tmp_path, embedder))
    snap.warm()
    built = (set(snap.__dict__), set(snap.current.__dict__))
    question = "Which playwright lived a longer life, Edward Albee or J. M. Barrie?"
    ranked = longrag_candidates(snap, Request(Caller(frozenset({"bench"})), question, 1000),
                                Tools(embedder, default_counter()), LongRAGConfig())
    assert [i.doc_id for i in ranked.items][:1] == ["albee"]
    assert (set(snap.__dict__), set(snap.current.__dict__)) == built
