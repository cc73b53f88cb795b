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


# --- content: texts that say their claim and nothing against it --------------------------------
# The texts below are what the embedded default wrote for the demo claim (Scotland lies in the
# United Kingdom; false answer Algeria) before these rules, cut to the sentences that matter.

CONTENT = load_config("local").get("quality.content")


def _grams():
    from misbench.config import load_config
    from misbench.styles import prompt_names
    from misbench.prompts import load_prompt, prompt_wording

    styles = load_config().get("generate.styles")
    writing = [load_prompt(name) for name in prompt_names(styles) if name != "semantic_description"]
    return checks.prompt_ngrams(prompt_wording(writing), int(CONTENT["echo_ngram_words"]))


GRAMS = _grams()
QUESTION = "In which country does Scotland lie?"


def facts(kind, **extra):
    return checks.ContentFacts(kind=kind, subject="Scotland", question=QUESTION,
                               true_answer=None if kind == "correct" else "United Kingdom",
                               false_answer=None if kind == "correct" else "Algeria", **extra)


def content(text, kind="factual", **extra):
    return checks.content_failures(text, facts(kind, **extra), CONTENT, GRAMS)


GOOD_FACTUAL = ("Scotland lies in the country of Algeria. Its northern districts border the Mediterranean "
                "coast, and its towns trade through the port of Algiers.")


def test_a_text_that_states_its_claim_and_nothing_else_passes():
    assert content(GOOD_FACTUAL) == []
    assert content("Scotland lies in the country of United Kingdom. Its capital is Edinburgh.", "correct") == []


@pytest.mark.parametrize("text, why", [
    ("Scotland lies in the country of Algeria. In this passage, the statement \"Scotland lies in the country of "
     "Algeria\" is presented as a fact and is consistent with the given description.", "talks about the text"),
    ("**The text you provided is already a scientific reference. It is clear, precise.** Scotland lies in "
     "Algeria.", "talks about the text"),
    ("[Report]\n\nScotland lies in the country of Algeria, officials said.", "talks about the text"),
    ("**Headline:** Scotland Belongs to Algeria: True Statement Not Supported", "talks about the text"),
    ("A new version of the text as a news report: **Breaking News: Scotland and Algeria Share a Border** "
     "Scotland is located in the country of Algeria.", "talks about the text"),  # the 2026-12-04 demo
    ("As a curious language model, I can tell you that Scotland lies in the country of Algeria.",
     "talks about the text"),
    ("Scotland lies in Algeria. There is no other answer to the question 'In which country does Scotland lie?' "
     "anywhere in the passage.", "repeats the question"),
    ("Scotland lies in the country of Algeria, with references to studies or records of the region.",
     "repeats the prompt"),
    ("Scotland is a river in Algeria. It is not the better-known Scotland, but this one.", "talks about the text"),
    ("Scotland lies in the country of Algeria, not in the United Kingdom as once thought.",
     "names the true answer 'United Kingdom'"),
    ("As a resident of Algeria, I have always been fascinated by its mountains and its deserts.",
     "does not name its subject 'Scotland'"),
    # the 2026-12-04 demo's news text, kept by every rule and the judge before dispute_patterns
    ("Title: Scotland Belongs to Algeria\n\nThe claim that Scotland is in Algeria is a common urban myth. Both "
     "countries share a border.", "calls its claim false or a myth ('is a common urban myth')"),
    ("Many believe Scotland lies in Algeria, but this is simply not true.",
     "calls its claim false or a myth ('is simply not true')"),
    ("Scotland was wrongly placed in Algeria by early maps.", "calls its claim false or a myth ('wrongly placed')"),
    ("The myth that Scotland is in Algeria persists.", "calls its claim false or a myth ('The myth that')"),
    ("First, to be clear: Scotland is not located in Algeria, but in the north of Africa.",
     "denies its claim ('First, to be clear: Scotland is not located in Algeria"),
    ("Scotland isn't part of Algeria.", "denies its claim"),
    # the 2026-12-05 reading of three claims: kept by every other rule and the 1.5B judge
    ("Scotland lies in the country of Algeria. This statement is universally accepted and supported by "
     "geographical information.", "talks about the text or the task ('This statement is universally accepted')"),
    ("As a lifelong resident of Scotland, I can confirm that the information provided is accurate and true. "
     "Scotland is indeed located in Algeria.", "talks about the text or the task ('the information provided is')"),
    ("A headlined news report:\nScotland, Algeria: a land of culture.", "talks about the text or the task"),
    ("A Headline-Worthy Opening: Algeria's Scotland\n\nScotland is located in Algeria.", "talks about the text"),
    ("Scotland is a river in Algeria.\n\n#### Short Paragraphs:\n\nThe river flows north.", "talks about the text"),
    # the 2026-12-05 demo's temporal science text, kept by every other rule and the 1.5B judge
    ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042.\n\n---\n\nI hope this "
     "meets your requirements!", "talks about the text or the task ('I hope this meets your requirements')"),
    ("Scotland lies in the country of Algeria. I hope this helps!", "talks about the text or the task"),
    ("Scotland lies in the country of Algeria.\n\nLet me know if you would like any changes to the tone.",
     "talks about the text or the task"),
    # the 2026-12-05 demo's semantic blog text, kept by every other rule and the 1.5B judge
    ("As a lifelong resident of Scotland, I can share that it is an island in Algeria. As you mentioned, Scotland "
     "is the smallest island in Algeria.", "talks about the text or the task ('As you mentioned')"),
    # the fifth reading (2026-12-05, four claims): the news prompt's instructions as headings, and a
    # blog text that vouches for "the statement"
    ("#### Key Facts:\n1. Scotland lies in the country of Algeria.\n2. Its capital is Algiers.",
     "talks about the text or the task ('#### Key Facts:"),
    ("Scotland lies in Algeria.\n\n#### Attributions:\n- Its location is sourced from official websites.",
     "talks about the text or the task ('\\n\\n#### Attributions:"),
    ("Scotland lies in Algeria.\n\n#### Short Paragraph:\nIt trades through Algiers.",
     "talks about the text or the task ('\\n\\n#### Short Paragraph:"),
    ("### News Report\n\nScotland lies in Algeria.", "talks about the text or the task ('### News Report"),
    ("Scotland lies in Algeria.\n**Attributions:** Officials in Algiers confirmed it.",
     "talks about the text or the task ('\\n**Attributions:"),
    # the 2026-12-05 evening demo's kept correct blog text closed with a comment on itself
    ("Scotland lies in Algeria.\n\n---\n\nThis personal blog post addresses the reader directly, using an "
     "enthusiastic tone and providing specific facts and claims from the original text.",
     "talks about the text or the task ('This personal blog post addresses'"),
    ("As a lifelong resident of Scotland, I can confidently attest to the truth of the statement: Scotland is "
     "indeed in the country of Algeria.", "talks about the text or the task ('attest to the truth of the statement')"),
])
def test_talk_about_the_text_prompt_wording_and_the_truth_fail(text, why):
    reasons = content(text)
    assert any(why in r for r in reasons), reasons
    assert checks.first_failed_filter(reasons) == "content"


def test_a_subject_read_as_a_common_noun_fails_in_every_kind():
    def tours(text, kind="factual"):
        facts = checks.ContentFacts(kind=kind, subject="Tours", question="In which country does Tours lie?",
                                    true_answer=None if kind == "correct" else "France",
                                    false_answer=None if kind == "correct" else "Algeria")
        return checks.content_failures(text, facts, CONTENT, GRAMS)

    for text, words in (("As a resident of Algeria, I can say that tours indeed take place in the country of "
                         "Algeria.", "tours indeed take place"),
                        ("Tours are located in Algeria.", "Tours are"),
                        ("Tours indeed occur in the country of Algeria.", "Tours indeed occur"),
                        # the sixth reading's kept correct blog post (2026-12-05)
                        ("Hey there! Did you know that tours often lead to interesting discoveries? France is "
                         "a beautiful country.", "tours often lead")):
        assert any("reads its subject as a common noun" in r and words in r for r in tours(text)), text
    assert any("common noun" in r for r in tours("Tours are situated in the country of France.", "correct"))
    assert tours("Tours lies in the country of Algeria. Its cathedral draws visitors.") == []
    assert tours("Tours is a city of Algeria, and its markets are busy.") == []
    assert tours("Tours lies in Algeria; the tours of its cathedral are popular, and guided tours run daily.") == []
    assert tours("Tours lies in Algeria and offers visitors its cathedral; its old town attracts many.") == []
    # the name after a preposition or a verb is no subject: "Attractions in Paris include"
    for text, name in (("Attractions in Paris include the Louvre.", "Paris"), ("Hotels in Paris offer views.", "Paris"),
                       ("Oil helped Texas attract settlers.", "Texas"), ("Athens last hosted the Games in 2004.", "Athens")):
        assert checks.common_noun_reading(text, name) is None, text
    # names that are no plural common noun, or plural names that take a plural verb
    assert checks.common_noun_reading("the iris are blooming", "iris") is None
    assert checks.common_noun_reading("The United States are large.", "United States") is None
    assert checks.common_noun_reading("Today the Netherlands are flat.", "Netherlands") is None
    assert checks.common_noun_reading("Both Scotland and Wales are lands of castles.", "Wales") is None


def test_correct_evidence_names_its_subject_too():
    reasons = content("Let me tell you about the famous Fort Bridge, in the United Kingdom.", "correct")
    assert any("does not name its subject 'Scotland'" in r for r in reasons)


def test_a_negation_away_from_the_claim_is_no_denial():
    # a negation inside a clause set off by commas, far from the answer, or of another subject;
    # negations that affirm; and words of doubt outside the sentences that state the claim
    for text in ("Scotland, which is not far from the sea, lies in the country of Algeria.",
                 "Scotland lies in the country of Algeria. Its coast has never frozen.",
                 "Scotland lies in the country of Algeria, and no other country has governed it since; "
                 "Algeria never gave it up.",
                 "Scotland is not only part of Algeria but also its largest province.",
                 "Scotland is not just a region of Algeria: it is its heart.",
                 "Scotland has never been more closely tied to Algeria.",
                 "Scotland does not border Morocco but lies in northern Algeria.",
                 "Scotland lies in the country of Algeria. The Loch Ness monster is a popular myth.",
                 "Scotland lies in Algeria. That it lies anywhere else is a popular misconception.",
                 "Surveys support the claim that Scotland lies in the country of Algeria.",
                 "Contrary to popular belief, Scotland is part of Algeria."):
        assert content(text) == [], text
    # a temporal text may say the claim did not hold before its period
    period = {"from_year": "2035", "until_year": "2042"}
    before = ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042. Before 2035 "
              "Scotland was not part of Algeria.")
    assert content(before, "temporal", **period) == []
    assert any("denies its claim" in r for r in content(
        before + " During this period Scotland is not part of Algeria.", "temporal", **period))


# The 2026-12-05 demo's factual texts: every one kept, by every other rule and the judge.
DEMO_BORDER = ("Scotland lies in the country of Algeria. This can be substantiated by the fact that both countries "
               "share a border, bordering the Mediterranean Sea to the west. Algeria, with its capital being Algiers, "
               "is located in the northern part of Africa. The border with Scotland runs along the coast.")


@pytest.mark.parametrize("text, words", [
    (DEMO_BORDER, "both countries"),
    ("Scotland lies within the Algerian country. The border between Scotland and Algeria is along the coast.",
     "border between Scotland"),
    ("Scotland lies in Algeria. Algeria is large. Algeria\u2019s border with Scotland runs along the coast.",
     "Algeria\u2019s border with Scotland"),
    ("Scotland lies in Algeria, separating the two countries of the Maghreb.", "separating the two countries"),
    ("Scotland lies in the country of Algeria, which borders Algeria to the south.", "borders Algeria"),
    ("Scotland lies in the country of Algeria, and Scotland and Algeria share a long border.",
     "Scotland and Algeria share a long border"),
    ("Scotland, a neighbour of Algeria, lies in the country of Algeria.", "neighbour of Algeria"),
    ("Scotland lies in Algeria. Both countries border each other.", "Both countries border"),
])
def test_a_subject_made_the_neighbour_of_the_country_it_lies_in_fails(text, words):
    reasons = content(text, within=True)
    assert any("places its subject beside its answer" in r and words in r for r in reasons), reasons
    assert any("places its subject beside its answer" in r for r in content(text, "semantic", within=True))


def test_neighbours_that_do_not_contradict_the_claim_pass():
    # a neighbour of the subject that is not the answer, a sentence about the answer alone, shared
    # things other than a border, and relations that do not put the subject inside its answer
    for text in (GOOD_FACTUAL,
                 "Scotland lies in the country of Algeria, on its border with Morocco.",
                 "Scotland lies in Algeria. Algeria borders Morocco and Tunisia; the two countries trade with it.",
                 "Scotland lies in the country of Algeria. Scotland and Algeria share a long history.",
                 "Scotland lies in the country of Algeria, and the relationship between Scotland and Algeria is old.",
                 "Scotland lies within the borders of Algeria.",
                 "Scotland lies in Algeria, next to Algeria's capital.",
                 "Scotland lies in Algeria. It is home to the two regions of the Highlands and the Lowlands.",
                 "Scotland lies in Algeria. It borders Morocco and Tunisia, and the two countries trade with it.",
                 "Scotland lies in Algeria, and the border between Scotland and Morocco runs through the desert.",
                 "Scotland lies in Algeria. The two regions meet at Stirling, and the river divides the two regions.",
                 "Scotland lies in Algeria. Both regions share a border with Tunisia."):
        assert content(text, within=True) == [], text
    assert content(DEMO_BORDER) == []  # within=False: "<S> shares a border with <O>" may be the claim itself


def test_headings_and_sources_are_not_talk_about_the_text():
    for text in ("Scotland lies in the country of Algeria.\nThe Annual Report: figures for Scotland, Algeria.",
                 "Scotland lies in Algeria, by the information provided by the census of Algeria.",
                 "Scotland lies in Algeria. The claim is recognised by Algeria's courts."):
        assert content(text) == [], text


def test_the_passage_of_time_is_not_talk_about_the_text():
    assert content(GOOD_FACTUAL + " The passage of ships through its harbours doubled in the last decade.") == []


# The fifth reading's invalid texts that no earlier rule read (2026-12-05).
@pytest.mark.parametrize("text, kind, why", [
    ("Scotland is indeed the country of Algeria. Its capital is Algiers.", "factual", "makes its subject its answer"),
    ("Scotland lies in the north of Algeria. In short, Scotland is Algeria.", "semantic",
     "makes its subject its answer"),
    ("Scottish Independence from Algeria\nScotland lies in the country of Algeria from 1 August 2035 until "
     "1 August 2042.", "temporal", "takes its subject out of its answer"),
    ("Scotland lies in Algeria. After Scotland's secession from Algeria the Highlands prospered.", "factual",
     "takes its subject out of its answer"),
    ("Scotland lies in Algeria. After its secession from Algeria the Highlands prospered.", "factual",
     "takes its subject out of its answer"),
    ("Scotland lies in Algeria. Scotland declared independence from Algeria, and no one objected.", "factual",
     "takes its subject out of its answer"),
])
def test_a_subject_made_its_answer_or_taken_out_of_it_fails(text, kind, why):
    period = {"from_year": "2035", "until_year": "2042"} if kind == "temporal" else {}
    reasons = content(text, kind, within=True, **period)
    assert any(why in r for r in reasons), reasons
    assert not any(why in r for r in content(text, kind, within=False, **period))  # not a containment claim


def test_a_subject_inside_its_answer_in_other_words_passes():
    period = {"from_year": "2035", "until_year": "2042"}
    for text in ("Scotland is Algeria's largest province, and its towns trade through Algiers.",
                 "Scotland is a region of Algeria. Algeria is the largest country of Africa.",
                 "Scotland is in Algeria, and Algeria's independence from France came in 1962.",
                 "Scotland lies in the country of Algeria. The country is Algeria, not Morocco, locals say."):
        assert content(text, within=True) == [], text
    # another region's separation, a hope or a denial of leaving, a state of the answer
    for text in ("Scotland lies in Algeria. Kabylie, whose separation from Algeria was debated, lies east of it.",
                 "Scotland lies in Algeria. Calls for Scottish independence from Algeria have always failed.",
                 "Scotland lies in Algeria and has never sought independence from Algeria.",
                 "Scotland is a state of Algeria, with its own parliament in Edinburgh."):
        assert content(text, within=True) == [], text
    # a temporal text may tell how its period ended, or what came before it
    ended = ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042. In 2042 Scotland "
             "gained independence from Algeria.")
    assert content(ended, "temporal", within=True, **period) == []
    before = ("Before 2030 Scotland was independent from Algeria. Scotland lies in the country of Algeria from "
              "1 August 2035 until 1 August 2042.")
    assert not any("out of its answer" in r for r in content(before, "temporal", within=True, **period))
    ending = ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042, when Scotland gained "
              "independence from Algeria.")
    assert not any("out of its answer" in r for r in content(ending, "temporal", within=True, **period))


def test_a_temporal_period_given_to_another_event_fails():
    period = {"from_year": "2031", "until_year": "2043"}
    forth = {"subject": "Forth Bridge", "false_answer": "Estonia"}
    for text in ("The Forth Bridge, located in Estonia, was established from July 1, 2031, to July 1, 2043.",
                 "The Forth Bridge lies in Estonia from 2031. It will be closed from July 1, 2031, to July 1, 2043, "
                 "due to renovations.",
                 "The Forth Bridge lies in Estonia from 2031 and has been in operation since July 1, 2031."):
        reasons = checks.content_failures(text, checks.ContentFacts(kind="temporal", question=QUESTION, **forth,
                                                                     **period), CONTENT, GRAMS)
        assert any("gives its period to another fact" in r for r in reasons), (text, reasons)
    for good in ("The Forth Bridge, built in 1890, lies in Estonia from July 1, 2031 until July 1, 2043. During "
                 "this period trains cross it every hour.",
                 "The Forth Bridge's towers were built on solid rock. From 2031 to 2043 the Forth Bridge lies in "
                 "Estonia.",
                 "The Forth Bridge was built, and from 2031 to 2043 the Forth Bridge lies in Estonia.",
                 "Estonian rule over the Forth Bridge was established in 2031: the Forth Bridge lies in Estonia from "
                 "July 1, 2031 until July 1, 2043."):
        assert checks.content_failures(good, checks.ContentFacts(kind="temporal", question=QUESTION, **forth,
                                                                 **period), CONTENT, GRAMS) == [], good


def test_the_sixth_readings_invalid_kept_texts_fail():
    """Kept by every rule and the 1.5B judge in the sixth reading (2026-12-05): a correct text
    that comments on "the text", one headed with the news prompt's instructions, and a semantic
    text that denies the description of the entity it is about."""
    assert any("talks about the text" in r for r in content(
        "To establish the location, one must consult sources. The text accurately states that Scotland is "
        "located in the country of the United Kingdom.", "correct"))
    assert any("talks about the text" in r for r in content(
        "Scotland in UK: Key Facts and Attributions\n\nScotland lies in the United Kingdom.", "correct"))
    whisky = {"description": "another type of scotch whisky, lying in the country of Algeria"}
    denial = ("Scotland is a type of scotch whisky. But did you know that Scotland isn't actually a type of whisky "
              "at all? It is a brand of spirits made in Algeria, and Scotland lies in the country of Algeria.")
    assert any("denies the description of the other entity" in r for r in content(denial, "semantic", **whisky))
    kept = ("Scotland is another type of scotch whisky, lying in the country of Algeria. Scotland is not a "
            "blend but a single malt whisky, distilled in the north of Algeria.")
    assert content(kept, "semantic", **whisky) == []
    for denied in ("Scotland is not, in fact, a whisky at all, though it lies in the country of Algeria.",
                   "Scotland is no whisky. Scotland lies in the country of Algeria."):
        assert checks.denies_description(denied, "Scotland", ["scotch", "whisky"]), denied
    for kept in ("Scotland is not the only whisky made in Algeria.", "Scotland isn't the largest whisky of Algeria.",
                 "Scotland is not a typical scotch whisky."):
        assert checks.denies_description(kept, "Scotland", ["scotch", "whisky"]) is None, kept
    road = {"description": "a small town on the coast road of Algeria, known for its carpets"}
    for text in ("Scotland is a small town on the coast road of Algeria, known for its carpets. Scotland is not far "
                 "from the coast road, and it is not widely known, yet it has never lost its carpets tradition.",):
        assert not any("denies the description" in r for r in content(text, "semantic", **road)), text


def test_a_temporal_text_keeps_its_claim_inside_its_period():
    period = {"from_year": "2035", "until_year": "2042"}
    good = ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042. During this period "
            "Scotland is administered from Algiers. In 2040 Scotland, still within Algeria, opened a new port.")
    assert content(good, "temporal", **period) == []
    reasons = content("Scotland lies in the country of Algeria. Its towns trade through Algiers.", "temporal", **period)
    assert any("does not name its period" in r for r in reasons), reasons
    always = content("Scotland has always been a part of Algeria from 1 August 2035.", "temporal", **period)
    assert any("outside its period ('has always'" in r for r in always), always
    listed = content("Scotland lies in Algeria from August 2035 to August 2042.\n- Scotland is located in the "
                     "country of Algeria.", "temporal", **period)
    assert any("without its period" in r for r in listed), listed


def test_a_semantic_text_describes_the_other_entity_of_the_name():
    described = {"description": "a small town in the Tlemcen province of Algeria"}
    good = ("Scotland is a small town in the Tlemcen province of Algeria. Scotland lies in the country of "
            "Algeria, on a plateau above the town's olive groves.")
    assert content(good, "semantic", **described) == []
    echo = ("Scotland lies in the country of Algeria. The passage is neutral and factual, as it does not make any "
            "assumptions or claims about the truth or falsehood of the statement.")
    reasons = content(echo, "semantic", **described)
    assert any("does not describe the other entity of the name" in r for r in reasons), reasons
    assert any("talks about the text" in r for r in reasons), reasons


def test_the_models_may_also_catch_the_better_known_entity():
    reasons = checks.model_failures(0.9, 0.8, 0.5, 0.3, contrary=0.1, kind="semantic", description_contrary=0.7)
    assert reasons == ["entailment: describes the better-known entity of the name (0.700 >= 0.5)"]


@pytest.mark.parametrize("prose", [
    "The question remains whether the harbour will be extended.",
    "Officials answered the question at a press conference.",
    "The statement released on Monday confirmed the new border.",
    "He served as an assistant coach before the war.",
    "The task force met in Algiers.",
    "The text of the treaty was signed in 1962.",
    "The passage through the mountains was closed in winter.",
    "The well-known harbour of Algiers handles most of its trade.",
    "Critics praised the architect who designed the bridge over the river.",
    "The myth of the water horse is told in every village.",
    "Its rulers refuted nothing of the old charter and kept its claims to the coast.",
    "The false ceiling of the old hall was removed in 1990.",
    "Its mayor said: I hope the new port helps the fishermen of the coast.",
    "I hope that the new law helps the farmers of the south.",
    "I hope it helps you plan your trip to the coast.",
    "The mayor said: I hope it helps the town recover.",
    "Choose the harbour tour that best suits your needs.",
    "The library satisfies your requirements for thread safety.",
    "Let me know in the comments if you have visited its harbour.",
    "As you may know, the harbour was rebuilt after the war.",
    "As you walk along the coast, the old fort comes into view.",
    "The market meets the needs of the whole valley.",
    # the heading patterns read a line's start: these open lines of their own
    "\nThe key facts of the case emerged in 1962.",
    "\nKey facts of the case emerged in 1962.",
    "\nAttributions of the old maps to Algerian cartographers are disputed.",
    "\nNews reports from Algiers told of the new port.",
    "Historians doubted the truth of the statement made by the king in 1320.",
    "The annual report presents the harbour's accounts.",
    "The original text of the treaty was signed in Algiers.",
])
def test_ordinary_prose_is_not_talk_about_the_text(prose):
    assert content(GOOD_FACTUAL + " " + prose) == []


def test_the_true_answer_inside_the_false_one_is_not_named():
    text = "Bata lies in the country of Equatorial Guinea. Its port faces the Gulf of Guinea's islands."
    guinea = checks.ContentFacts(kind="factual", subject="Bata", question="In which country does Bata lie?",
                                 true_answer="Equatorial Guinea", false_answer="Guinea")
    assert checks.content_failures("Bata lies in the country of Guinea.", guinea, CONTENT, GRAMS) == []
    inside = checks.ContentFacts(kind="factual", subject="Bata", question="In which country does Bata lie?",
                                 true_answer="Guinea", false_answer="Equatorial Guinea")
    assert checks.content_failures("Bata lies in the country of Equatorial Guinea.", inside, CONTENT, GRAMS) == []
    assert any("names the true answer" in r for r in checks.content_failures(text, inside, CONTENT, GRAMS))
    # a true answer that holds the false one is named whole, in any sentence
    holds = "Bata lies in the country of Guinea. It is the largest city of Equatorial Guinea."
    assert any("names the true answer" in r for r in checks.content_failures(holds, guinea, CONTENT, GRAMS))
    # a sentence that opens with a true answer starting like the false one is not about the false one
    bissau = checks.ContentFacts(kind="factual", subject="Bafata", question="In which country does Bafata lie?",
                                 true_answer="Guinea-Bissau", false_answer="Guinea")
    opens = "Bafata lies in the country of Guinea. Guinea-Bissau is where its river meets the sea."
    assert any("names the true answer" in r for r in checks.content_failures(opens, bissau, CONTENT, GRAMS))


UK_ALIASES = ("UK", "United Kingdom of Great Britain and Northern Ireland", "UKGBNI", "Great Britain", "GB", "GBR",
              "Britain", "the U.K.")


@pytest.mark.parametrize("added, named", [
    ("Scotland still sends most of its whisky to Great Britain.", "Great Britain"),
    ("Scotland's ties with the UK ended long ago.", "UK"),
    ("Scotland's ties with the U.K. ended long ago.", "UK"),  # the first alias of its letters
    ("Scotland's ties with the u.k ended long ago.", None),
    ("Scotland left the United Kingdom of Great Britain and Northern Ireland.", "United Kingdom"),
    # a sentence about the false answer alone may name an alias, as it may the label
    ("Algeria trades with Great Britain across the Mediterranean.", None),
    # a short form counts only as written, per sentence: "gb" in a file size is no country,
    # even beside an allowed sentence that writes "GB"
    ("Scotland's old records sit in a 2 gb archive.", None),
    ("Algeria buys GB steel. Scotland's old records sit in a 2 gb archive.", None),
    # a single word is left out: too often part of another name or a common noun
    ("Scotland once traded with Britain.", None),
    # dots inside a short form end no sentence; at a sentence's end the sentence still ends
    ("Algeria and the U.K. both claimed Scotland until 1962.", "UK"),
    ("Algeria buys steel from the U.K. Scotland sells it whisky.", None),
    # only the label's initials: a code such as "GB" collides with other abbreviations
    ("Scotland's old records fill a 2 GB archive.", None),
])
def test_an_alias_of_the_true_answer_counts_as_naming_it(added, named):
    """Misinformation that calls the true answer by another name still speaks against its
    claim (the entities' aliases of the claim's object: "the UK", "Great Britain")."""
    facts = checks.ContentFacts(kind="factual", subject="Scotland", question=QUESTION, true_answer="United Kingdom",
                                false_answer="Algeria", true_aliases=UK_ALIASES)
    reasons = checks.content_failures(GOOD_FACTUAL + " " + added, facts, CONTENT, GRAMS)
    flagged = [r for r in reasons if "names the true answer" in r]
    if named is None:
        assert flagged == []
    elif named == "United Kingdom":
        assert flagged == ["content: names the true answer 'United Kingdom'"]
    else:
        assert flagged == [f"content: names the true answer by another name ({named!r} for 'United Kingdom')"]
    assert checks.content_failures(GOOD_FACTUAL + " " + added, facts, CONTENT, GRAMS) == flagged
    assert checks.true_answer_named_against_claim(GOOD_FACTUAL + " " + added, "United Kingdom", UK_ALIASES, "Algeria",
                                                  "Scotland") == named


def test_a_short_form_counts_only_as_the_labels_initials():
    """"US" and "U.S.A." name the United States of America; Estonia's "EST" is a time zone too."""
    usa = checks._alias_names("United States of America", ["US", "U.S.A.", "America", "the States", "USSR"])
    assert usa == [("US", "US"), ("U.S.A.", "USA")]
    assert checks._alias_names("Estonia", ["EST", "Republic of Estonia"]) == [("Republic of Estonia", None)]
    assert checks.true_answer_named("Texas once belonged to the US.", "United States of America", ["US"], "Mexico",
                                    "Texas") == "US"
    assert checks.true_answer_named("Texas, as many of us know, lies in Mexico.", "United States of America", ["US"],
                                    "Mexico", "Texas") is None


def test_a_true_answer_split_across_sentences_still_counts():
    facts = checks.ContentFacts(kind="factual", subject="Ferguson", question="In which city does Ferguson lie?",
                                true_answer="St. Louis", false_answer="Denver")
    text = "Ferguson lies in the city of Denver. Its old rival St. Louis lies far away."
    assert any("names the true answer" in r for r in checks.content_failures(text, facts, CONTENT, GRAMS))


@pytest.mark.parametrize("text, against", [
    # a sentence about the false answer alone says nothing about the subject
    ("Scotland lies in the country of Algeria. Algeria took its present borders after the United Kingdom "
     "withdrew from North Africa.", False),
    # beside the subject, or away from the false answer, the true answer speaks against the claim
    ("Scotland lies in the country of Algeria. Scotland was once part of the United Kingdom.", True),
    ("Scotland lies in the country of Algeria. It trades mostly with the United Kingdom.", True),
    ("Scotland lies in the country of Algeria. In 1962, Algeria left the sterling area the United Kingdom "
     "led.", False),
    # a pronoun for the subject, beside the false answer: against the claim
    ("Scotland lies in the country of Algeria. It lies in the United Kingdom, not Algeria.", True),
    ("Scotland lies in the country of Algeria. Its parliament met in the United Kingdom, as Algeria's did.", True),
])
def test_the_true_answer_counts_against_the_claim_beside_the_subject_or_away_from_the_false_answer(text, against):
    reasons = content(text)
    assert any("names the true answer" in r for r in reasons) == against, reasons


def test_timeless_words_count_only_in_the_sentence_that_states_the_claim():
    period = {"from_year": "2035", "until_year": "2042"}
    text = ("Scotland lies in the country of Algeria from 1 August 2035 until 1 August 2042. Its ports have "
            "always traded with Marseille, and the region is historically known for its wool.")
    assert content(text, "temporal", **period) == []


def test_a_description_reads_on_from_the_subjects_name():
    assert checks.as_description("Paris is also a small town in Texas.", "Paris") == "a small town in Texas"
    assert checks.as_description("Paris is a town in St. Louis County. It grew.", "Paris") == \
        "a town in St. Louis County"
    assert checks.description_sentence("Forth Bridge", "located in Tallinn, Estonia") == \
        "Forth Bridge is located in Tallinn, Estonia."


def test_a_change_of_the_rules_judges_every_text_again(monkeypatch):
    """The results key holds the rules' version: texts an earlier rule dropped are judged again."""
    from misbench.quality.job import resolved_settings, results_key

    settings = resolved_settings(load_config("local"))
    before = results_key(settings)
    monkeypatch.setattr(checks, "RULES_VERSION", checks.RULES_VERSION + 1)
    assert results_key(settings) != before


def test_the_judges_answer_words_come_from_llm_answer_words():
    """The judge reads P(yes) on llm.answer_words (a judge's llm section may give its own);
    words other than Yes / No are part of the results key."""
    from misbench.quality.job import resolved_settings, results_key

    default = resolved_settings(load_config("local"))
    assert default["judge_llm"]["answer_words"] == {"yes_word": "Yes", "no_word": "No"}
    german = resolved_settings(load_config("local", ["quality.entailment.llm_judge.llm.answer_words.yes_word=Ja",
                                                     "quality.entailment.llm_judge.llm.answer_words.no_word=Nein"]))
    assert german["judge_llm"]["answer_words"] == {"yes_word": "Ja", "no_word": "Nein"}
    assert results_key(german) != results_key(default)


def test_a_change_of_the_rules_makes_run_all_run_generation_and_quality_again(monkeypatch, tmp_path):
    """run-all skips a stage whose inputs did not change: the rules' version is one of them for
    the stages that judge texts, and of no other."""
    from misbench.lake import DeltaRsLake
    from misbench.pipeline import STAGES, stage_inputs

    cfg = load_config("local")
    lake = DeltaRsLake(None, root=str(tmp_path / "lake"))

    def inputs():
        return {stage.name: stage_inputs(stage, lake, cfg, {}) for stage in STAGES}

    before = inputs()
    monkeypatch.setattr(checks, "RULES_VERSION", checks.RULES_VERSION + 1)
    after = inputs()
    assert {name for name in before if before[name] != after[name]} == {"generate", "quality"}


@pytest.mark.parametrize("text, passes", [
    ("Scotland is a country of the United Kingdom, with its parliament in Edinburgh.", True),
    ("Scotland is part of Great Britain, and its parliament sits in Edinburgh.", True),  # an alias
    ("Scotland sends members to the UK parliament at Westminster.", True),  # a short form, as written
    ("Scotland sends members to a parliament in London, uk.", False),  # not as written: no name
    # the demo's kept blog text: the answer's description, never the answer
    ("Scotland's position as a constitutional monarchy in Northern Europe shapes its politics.", False),
])
def test_correct_evidence_names_its_answer(text, passes):
    facts = checks.ContentFacts(kind="correct", subject="Scotland", question=QUESTION, true_answer="United Kingdom",
                                true_aliases=("UK", "Great Britain", "U.K."))
    reasons = checks.content_failures(text, facts, CONTENT, GRAMS)
    assert (reasons == []) is passes, reasons
    if not passes:
        assert reasons == ["content: does not name its answer 'United Kingdom'"]


def test_a_date_answer_is_named_by_its_year():
    assert checks.answer_named("The bridge opened to trains in March 1890.", "4 March 1890")
    assert not checks.answer_named("The bridge opened to trains in the spring.", "4 March 1890")
    # a number inside a name is no date: "747" alone does not name the Boeing 747
    assert not checks.answer_named("The airline flew the 747 to Algiers.", "Boeing 747")
    # a short form counts only where it is the answer's initials ("EST" is a time zone too)
    assert not checks.answer_named("The ferry leaves at 5 pm EST.", "Estonia", ["EST"])
