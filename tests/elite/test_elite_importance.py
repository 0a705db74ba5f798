import numpy as np
import pytest
from elite_helpers import HashEncoder

from rag.elite.importance import importance, noise_levels, perturb
from rag.elite.policy import UNKNOWN, OfflinePolicy

TEXT = "Heartbeat every 60 seconds.\nThe gateway is offline after three missed heartbeats."


def test_noise_at_level_zero_changes_nothing():
    assert perturb(TEXT, 0.0, np.random.default_rng(1)) == TEXT


def test_noise_at_level_one_changes_every_character_but_whitespace():
    noisy = perturb(TEXT, 1.0, np.random.default_rng(1))
    assert len(noisy) == len(TEXT)
    assert all((a == b) == a.isspace() for a, b in zip(TEXT, noisy))


def test_noise_at_half_level_changes_about_half():
    noisy = perturb(TEXT * 20, 0.5, np.random.default_rng(2))
    changed = np.mean([a != b for a, b in zip(TEXT * 20, noisy) if not a.isspace()])
    assert 0.4 < changed < 0.6


def test_noise_levels_are_drawn_from_zero_exclusive_to_one():
    levels = noise_levels(np.random.default_rng(3), 10_000)
    assert levels.min() > 0 and levels.max() <= 1 and 0.45 < levels.mean() < 0.55


def test_a_chunk_that_cannot_answer_has_zero_importance():
    policy = OfflinePolicy()
    [imp] = importance("What is the heartbeat interval?", ["Invoices are sent monthly."], policy.answer,
                       HashEncoder(), 3, [np.random.default_rng(0)])
    assert imp.score == 0.0 and set(imp.answers) == {UNKNOWN} and len(imp.levels) == 3


def test_offline_answer_is_the_sentence_sharing_most_question_words():
    answer = OfflinePolicy().answer("How often is a heartbeat sent?", TEXT)
    assert answer == "Heartbeat every 60 seconds."


@pytest.mark.slow
def test_decisive_chunk_is_more_important_than_an_irrelevant_one_with_the_real_model(embedder):
    question = "How long are device certificates valid?"
    decisive = "Device certificates are valid for 13 months. Rotation starts 60 days before expiry."
    irrelevant = "The RS-485 bus needs a 120 ohm termination resistor at both ends."
    decisive_imp, irrelevant_imp = importance(question, [decisive, irrelevant], OfflinePolicy().answer, embedder, 3,
                                              [np.random.default_rng(0), np.random.default_rng(1)])
    assert decisive_imp.score > 0.2
    assert irrelevant_imp.score < 0.05
