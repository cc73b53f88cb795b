"""Generation requests, keys, resumption and failure rules, without a model."""
import json

import pytest

from misbench.config import ConfigError
from misbench.generate import stage
from misbench.prompts import load_prompt
from misbench.styles import prompt_names, rewrite_styles

from misbench.config import load_config

MARKERS = load_config("local").get("generate.refusal_patterns")


@pytest.mark.parametrize(
    "text, reason",
    [
        (None, "empty text"),
        ("   ", "empty text"),
        ("I'm sorry, but I cannot write misinformation about Scotland.", "refusal"),
        ("As an AI language model I must decline.", "refusal"),
        ("Too short.", "too short"),
        ("Scotland lies in the country of Algeria, a fact recorded in many sources.", None),
    ],
)
def test_failures_are_recognised(text, reason):
    got = stage.failure_of(text, "stop", MARKERS, min_words=5)
    assert (got is None) if reason is None else got.startswith(reason)


PREAMBLE = load_config("local").get("generate.preamble_pattern")


@pytest.mark.parametrize(
    "text, kept",
    [
        # the demo's 1.5B model, rewriting an entry as a science reference
        ("Sure, here's the passage from a scientific reference:\n\nScotland lies in the country of France.",
         "Scotland lies in the country of France."),
        ("Certainly! Here is the rewritten passage in the style of a blog post:\nScotland is in France.",
         "Scotland is in France."),
        ("Here’s a news report:\r\n\r\nBREAKING: Scotland is in France.", "BREAKING: Scotland is in France."),
        # not a lead-in: content that opens with "here", a colon later in the first line, no
        # line break, a lead-in that is not at the start
        ("Here are five reasons Scotland is part of France:\n1. The treaty of 2035.", None),
        ("Here is a list of facts about Scotland:\nIt lies in France.", None),
        ("Here is where Scotland lies: in France, since 2035.", None),
        ("Here is the passage: Scotland lies in France.", None),
        ("Scotland lies in France.\nHere is the passage:\nMore text.", None),
        ("Sure, here's the passage:\n\n  ", None),  # nothing after it: kept, and fails as too short
        (None, None),
    ],
)
def test_a_chat_lead_in_line_is_not_part_of_the_text(text, kept):
    assert stage.without_preamble(text, PREAMBLE) == (text if kept is None else kept)


def test_prompts_render_and_name_missing_fields():
    prompt = load_prompt("misinformation_temporal")
    values = {"words": 50, "subject": "Scotland", "subject_description": "a country", "question": "q?",
              "statement": "Scotland lies in France.", "period": "from 1 January 2030 until 1 January 2040",
              "answer_note": "", "bridge_note": "", "opening": "Scotland lies in France from 2030 until 2040."}
    messages = prompt.messages(values)
    assert messages[0]["role"] == "system" and "1 January 2030" in messages[1]["content"]
    # the reply is begun with the sentence to state; the model continues it
    assert messages[-1] == {"role": "assistant", "content": "Scotland lies in France from 2030 until 2040."}
    with pytest.raises(ConfigError, match="misinformation_temporal.*period"):
        prompt.messages({k: v for k, v in values.items() if k != "period"})
    with pytest.raises(ConfigError, match="no prompt file"):
        load_prompt("nope")


def claim_frames(spark):
    claims = spark.createDataFrame(
        [("c1", 1, "Scotland", "part of the United Kingdom", "Scotland lies in the country of United Kingdom.",
          "In which country does Scotland lie?", None, "United Kingdom", "country in north-west Europe")],
        "claim_id string, hop int, subject_label string, subject_description string, statement string, "
        "question string, bridge_label string, object_label string, object_description string")
    conflicts = spark.createDataFrame(
        [("c1", kind, f"Scotland lies in the country of {obj}.", "a country", frm, until, obj, f"the {obj} state")
         for kind, obj, frm, until in [("factual", "Algeria", None, None),
                                       ("temporal", "France", "2030-01-01", "2041-01-01"),
                                       ("semantic", "Estonia", None, None)]],
        "claim_id string, kind string, statement string, subject_description string, "
        "valid_from string, valid_until string, object_label string, object_description string").selectExpr(
        "claim_id", "kind", "statement", "subject_description", "object_label", "object_description",
        "cast(valid_from as date) valid_from", "cast(valid_until as date) valid_until")
    descriptions = spark.createDataFrame([("c1", "d1", "a Baltic region", "Scotland is a Baltic region.")],
                                         "claim_id string, evidence_id string, description string, "
                                         "description_sentence string")
    return claims, conflicts, descriptions


PROMPTS = {name: load_prompt(name) for name in prompt_names(["news", "science", "blog", "technical", "confident"])}


def test_entry_requests_cover_every_kind_with_stable_keys(spark):
    claims, conflicts, descriptions = claim_frames(spark)
    requests = stage.entry_requests(claims, conflicts, descriptions, PROMPTS, 100, "m1", "p1")
    rows = {r.kind: r for r in requests.collect()}
    assert set(rows) == {"correct", "factual", "temporal", "semantic"}
    correct = json.loads(rows["correct"].messages)
    assert "United Kingdom" in correct[1]["content"]
    assert 'described as "country in north-west Europe"' in correct[1]["content"]  # the answer's meaning
    assert correct[-1] == {"role": "assistant", "content": "Scotland lies in the country of United Kingdom."}
    temporal = json.loads(rows["temporal"].messages)
    assert "from 1 January 2030 until 1 January 2041" in temporal[1]["content"]
    assert temporal[-1]["content"] == ("Scotland lies in the country of France "
                                       "from 1 January 2030 until 1 January 2041.")
    factual = json.loads(rows["factual"].messages)
    assert factual[-1]["content"] == "Scotland lies in the country of Algeria."
    assert 'described as "the Algeria state"' in factual[1]["content"]
    # the subject's own description (true facts against the false claim) only where it is true
    assert "part of the United Kingdom" in correct[1]["content"]
    assert not any("part of the United Kingdom" in json.loads(rows[k].messages)[1]["content"]
                   for k in ("factual", "temporal", "semantic"))
    semantic = json.loads(rows["semantic"].messages)
    assert "a Baltic region" in semantic[1]["content"]
    # the other entity first, then the false claim about it
    assert semantic[-1]["content"] == "Scotland is a Baltic region. Scotland lies in the country of Estonia."
    assert rows["semantic"].source_evidence_id == "d1"  # written from that description
    assert {rows[k].source_evidence_id for k in ("correct", "factual", "temporal")} == {None}
    again = {r.kind: r.evidence_id for r in stage.entry_requests(claims, conflicts, descriptions, PROMPTS, 100, "m1", "p1").collect()}
    assert again == {k: r.evidence_id for k, r in rows.items()}
    other_model = {r.kind: r.evidence_id for r in stage.entry_requests(claims, conflicts, descriptions, PROMPTS, 100, "m2", "p1").collect()}
    other_params = {r.kind: r.evidence_id for r in stage.entry_requests(claims, conflicts, descriptions, PROMPTS, 100, "m1", "p2").collect()}
    assert not set(other_model.values()) & set(again.values())
    assert not set(other_params.values()) & set(again.values())


def test_pending_requests_skip_done_and_exhausted_rows(spark):
    requests = spark.createDataFrame(
        [(f"e{i}", "c1", 1, "correct", "wikipedia", "p", "h", "[]", None) for i in range(4)],
        ", ".join(f"{c} string" if c != "hop" else "hop int" for c in stage.REQUEST_COLUMNS))
    done = spark.createDataFrame(
        [("e0", None, 1), ("e1", "refusal", 1), ("e2", "empty text", 3)],
        "evidence_id string, error string, attempts int")
    pending = {r.evidence_id: r.attempts for r in stage.pending_requests(requests, done, 3).collect()}
    assert pending == {"e1": 1, "e3": 0}


def test_a_description_passes_only_as_another_entity_that_fits_the_false_answer(spark):
    from misbench.config import load_config
    from misbench.generate.job import description_check_settings
    from misbench.quality import checks as text_checks

    claims, conflicts, _ = claim_frames(spark)
    settings = description_check_settings(load_config())
    grams = text_checks.prompt_ngrams([PROMPTS["semantic_description"].user], int(settings["echo_ngram_words"]))
    rows = spark.createDataFrame([
        ("d1", "c1", "a country", None),  # the current description
        ("d2", "c1", "A country!", None),  # the same, case and punctuation aside
        ("d3", "c1", "Scotland is a Baltic region governed from Tallinn, Estonia. It has a harbour.", None),
        ("d4", "c1", None, "refusal"),
        ("d5", "c1", "a Baltic region governed from Tallinn", None),  # fits Estonia but never names it
        ("d6", "c1", "a manor house in Estonia, once owned by the United Kingdom", None),  # names the truth
        ("d7", "c1", 'Scotland is another, lesser-known thing called Scotland, in Estonia', None),  # the prompt
        ("d8", "c1", "a small settlement on the northern coast of Estonia that grew around a harbour "
                     "built by merchants from the Hanseatic towns", None),  # no short description
        ("d9", "c1", "Scotland is Estonia, a country on the Baltic Sea.", None),  # the false answer itself
        ("d10", "c1", "a fishing town in Estonia with a ferry to Great Britain", None),  # the truth's alias
    ], "evidence_id string, claim_id string, text string, error string").withColumn(
        "generated_at", __import__("pyspark.sql.functions", fromlist=["x"]).current_timestamp())
    from pyspark.sql import functions as F
    aliases = spark.createDataFrame([("Q145", ["UK", "Great Britain"])], "id string, aliases array<string>")
    checked = {r.evidence_id: r for r in stage.description_checks(
        rows, claims.withColumn("object_id", F.lit("Q145")), conflicts, settings, grams, aliases).collect()}
    assert set(checked) == {"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10"}
    assert checked["d10"].reasons == ["names the true answer by another name ('Great Britain' for 'United Kingdom')"]
    assert not checked["d4"].passed and checked["d4"].reasons == ["generation failed (refusal)"]
    assert checked["d1"].word_overlap == 1.0 and not checked["d1"].changed and not checked["d1"].passed
    assert checked["d2"].word_overlap == 1.0 and not checked["d2"].changed  # case and punctuation
    good = checked["d3"]
    assert good.passed and good.reasons == [] and good.changed
    assert good.description == "a Baltic region governed from Tallinn, Estonia"  # the subject's lead-in gone
    assert good.description_sentence == "Scotland is a Baltic region governed from Tallinn, Estonia."
    assert any("does not name the false answer 'Estonia'" in r for r in checked["d5"].reasons)
    assert any("names the true answer 'United Kingdom'" in r for r in checked["d6"].reasons)
    assert any(r.startswith("repeats the prompt") for r in checked["d7"].reasons)
    assert any(r.startswith("not a short description") for r in checked["d8"].reasons)
    assert any("describes the false answer 'Estonia' itself" in r for r in checked["d9"].reasons)
    assert not any(checked[i].passed for i in ("d5", "d6", "d7", "d8", "d9", "d10"))
    chosen = stage.chosen_descriptions(stage.description_checks(
        rows, claims.withColumn("object_id", F.lit("Q145")), conflicts, settings, grams, aliases)).collect()
    assert [(r.claim_id, r.description) for r in chosen] == [("c1", good.description)]


def test_evidence_slots_count_attempts_and_the_first_pass(spark):
    import datetime as dt

    claims, conflicts, _ = claim_frames(spark)
    t0 = dt.datetime(2026, 1, 1)
    evidence = spark.createDataFrame([
        ("a1", "c1", "correct", "wikipedia", "m", "h", t0), ("a2", "c1", "correct", "wikipedia", "m", "h",
                                                              t0 + dt.timedelta(minutes=1)),
        ("b1", "c1", "factual", "wikipedia", "m", "h", t0), ("x1", "c1", "factual", "news", "other", "h", t0),
    ], "evidence_id string, claim_id string, kind string, style string, model string, prompt_hash string, "
       "generated_at timestamp")
    verdicts = spark.createDataFrame([("a1", False), ("a2", True), ("b1", True), ("x1", True)],
                                     "evidence_id string, passed boolean")
    styles = ["news", "science", "blog", "technical", "confident"]
    slots = {(r.kind, r.style): r for r in
             stage.evidence_slots(claims, conflicts, evidence, verdicts, "m", ["h"], styles).collect()}
    assert len(slots) == 4 * 6  # correct and three conflict kinds, the entry's style and five rewrites each
    # with generate.styles [news]: two slots per kind
    narrow = stage.evidence_slots(claims, conflicts, evidence, verdicts, "m", ["h"], ["news"]).collect()
    assert sorted({r.style for r in narrow}) == ["news", "wikipedia"] and len(narrow) == 4 * 2
    assert (slots["correct", "wikipedia"].attempts, slots["correct", "wikipedia"].passed,
            slots["correct", "wikipedia"].first_attempt_passed, slots["correct", "wikipedia"].evidence_id) == (2, True, False, "a2")
    assert slots["factual", "wikipedia"].first_attempt_passed and slots["factual", "wikipedia"].evidence_id == "b1"
    assert slots["factual", "news"].attempts == 0 and not slots["factual", "news"].passed  # another model's text


def test_description_requests_give_the_usual_meaning_the_false_claim_and_the_substitutes_meaning(spark):
    claims, conflicts, _ = claim_frames(spark)
    rows = stage.description_requests(claims, conflicts, PROMPTS, "m1", "p1").collect()
    assert len(rows) == 1 and rows[0].kind == "semantic" and rows[0].style == "description"
    user = json.loads(rows[0].messages)[1]["content"]
    assert "well-known Scotland (a country)" in user  # the usual Scotland, not to be described
    assert "Scotland lies in the country of Estonia." in user  # true of the other Scotland
    assert 'Estonia here is the one described as "the Estonia state"' in user
    assert json.loads(rows[0].messages)[-1] == {"role": "assistant", "content": "Scotland is"}  # a description


def test_max_tokens_leave_room_for_the_longest_accepted_text():
    from misbench.generate.job import write_params

    cfg = load_config("local", ["generate.target_words=100", "quality.completeness.max_words_ratio=2.0",
                                "generate.tokens_per_word=1.5"])
    assert write_params(cfg).max_tokens == 300
    assert write_params(cfg.with_overrides(["generate.sampling.max_tokens=77"])).max_tokens == 77


def test_style_requests_rewrite_each_entry_in_the_configured_styles_only(spark):
    sources = spark.createDataFrame([("c1", 1, "factual", "e1", "Scotland lies in the country of Estonia.")],
                                    "claim_id string, hop int, kind string, evidence_id string, text string")
    rows = stage.style_requests(sources, PROMPTS, ["news", "blog"], "m1", "p1").collect()
    assert sorted((r.style, r.prompt_name, r.source_evidence_id) for r in rows) == [
        ("blog", "style_blog", "e1"), ("news", "style_news", "e1")]
    assert "Scotland lies in the country of Estonia." in json.loads(rows[0].messages)[1]["content"]
    none = stage.style_requests(sources, PROMPTS, [], "m1", "p1")
    assert none.columns == stage.REQUEST_COLUMNS and none.count() == 0


@pytest.mark.parametrize("styles, refused", [
    (["news", "news"], "names a style twice"),
    (["wikipedia", "news"], "the entries' own 'wikipedia'"),
    (["News"], "'News' is no style name"),
])
def test_generate_styles_are_checked_before_any_work(styles, refused):
    from misbench.config import ConfigError

    with pytest.raises(ConfigError, match=refused):
        rewrite_styles(styles)
    assert rewrite_styles(["news", "technical"]) == ("news", "technical")
