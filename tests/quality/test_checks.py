"""Per-text checks: completeness reasons, sentence windows, judge scores to verdicts."""
import math

import pytest

from misbench.config import load_config
from misbench.quality import checks

COMPLETENESS = load_config("local").get("quality.completeness")


def failures(text, finish_reason="stop", error=None, target=30):
    return checks.completeness_failures(text, finish_reason, error, COMPLETENESS, target)


GOOD = "London is the capital of the United Kingdom. " * 4


def test_a_complete_text_has_no_completeness_failure():
    assert failures(GOOD) == []


@pytest.mark.parametrize("text, finish, error, expected", [
    ("", "stop", None, "empty text"),
    (None, None, "TimeoutError: read timed out", "generation failed"),
    ("I'm sorry, but I can not help with that request. " * 3, "stop", None, "refusal or disclaimer"),
    (GOOD + "Note: this information is false and only for the benchmark.", "stop", None, "refusal or disclaimer"),
    (GOOD + "London has also been the seat of", "length", None, "truncated"),
    ("London is in the United Kingdom.", "stop", None, "too short"),
    (GOOD * 10, "stop", None, "too long"),
])
def test_each_incomplete_text_fails_for_its_reason(text, finish, error, expected):
    reasons = failures(text, finish, error)
    assert reasons and expected in reasons[0] and reasons[0].startswith("completeness:")


def test_a_text_cut_at_the_token_limit_right_after_a_full_stop_is_complete():
    assert failures(GOOD.strip(), "length") == []


def test_refusal_patterns_come_from_config():
    settings = dict(COMPLETENESS, refusal_patterns=[r"\bcapit\w+"])
    assert "refusal" in checks.completeness_failures(GOOD, "stop", None, settings, 30)[0]


PROSE = " It has a long history and many visitors come every year to see its old streets."


@pytest.mark.parametrize("text", [
    "I can't wait to visit Edinburgh again next summer, and you should come too!",
    "I cannot believe how beautiful the Forth Bridge looks at dawn.",
    "Hamlet is a fictional prince of Denmark, the hero of Shakespeare's tragedy.",
    "Sherlock Holmes is a fictional detective created by Arthur Conan Doyle.",
    "I won't lie: the food in Tours is the best I have had in years.",
    "The story of the city is not based on real maps, locals joke, but it is charming.",
    "I'm sorry to say the museum was closed when we arrived, but the garden was open.",
    "I cannot help but admire the view from the castle walls.",
    "Critics note that the fictional detective was modelled on a real surgeon.",
    "He left a note saying the rumours were untrue.",
    "The report was false, officials said, and it was withdrawn the next day.",
])
def test_ordinary_prose_is_not_a_refusal(text):
    assert failures(text + PROSE * 3) == []


@pytest.mark.parametrize("text", [
    "I'm sorry, but I can't help with writing false information.",
    "As an AI language model, I must point out that Scotland is in the United Kingdom.",
    "I cannot provide a passage that states something untrue.",
    "Please note that this passage is fictional and was written for a benchmark.",
    "Note: the information above is not accurate.",
    "This text contains false information about Scotland.",
])
def test_a_refusal_or_a_disclaimer_anywhere_fails(text):
    reasons = failures(PROSE.strip() + " " + text + PROSE * 3)
    assert reasons and "refusal or disclaimer" in reasons[0]


def test_windows_respect_the_budget_and_overlap_by_one_sentence():
    text = " ".join(f"Sentence number {i} has five words." for i in range(10))
    windows = checks.text_windows(text, budget=12, measure=lambda s: len(s.split()), overlap=1)
    assert all(len(w.split()) <= 12 for w in windows)
    assert len(windows) == 9  # two sentences each, sliding by one
    assert windows[0].endswith("1 has five words.") and windows[1].startswith("Sentence number 1 ")
    assert windows[-1].endswith("9 has five words.")


def test_a_sentence_longer_than_the_budget_is_a_window_of_its_own():
    text = "Short one. " + "word " * 50 + "end. Another short one."
    windows = checks.text_windows(text, budget=10, measure=lambda s: len(s.split()), overlap=1)
    assert any(len(w.split()) > 10 for w in windows)
    assert " ".join(windows).count("Another short one.") >= 1


def test_a_text_that_fits_is_one_window():
    assert checks.text_windows(GOOD, 1000, lambda s: len(s.split())) == [
        " ".join(s for s in checks.sentences(GOOD))]


def test_yes_probability_is_the_margin_through_a_sigmoid():
    assert checks.yes_probability(math.log(0.6), math.log(0.2)) == pytest.approx(0.75)
    assert checks.yes_probability(-math.inf, -1.0) == 0.0
    assert math.isnan(checks.yes_probability(-math.inf, -math.inf))


def test_model_failures_and_the_first_failed_filter():
    reasons = checks.model_failures(0.2, 0.1, threshold=0.5, alpha=0.3)
    assert [r.split(":")[0] for r in reasons] == ["entailment", "similarity"]
    assert checks.first_failed_filter(reasons) == "entailment"
    assert checks.first_failed_filter(checks.model_failures(0.9, 0.1, 0.5, 0.3)) == "similarity"
    assert checks.model_failures(0.5, 0.3, 0.5, 0.3) == []
    assert "no score" in checks.model_failures(math.nan, 0.5, 0.5, 0.3)[0]
