"""Generation requests, keys, resumption and failure rules, without a model."""
import json

import pytest

from misbench.config import ConfigError
from misbench.generate import stage
from misbench.prompts import load_prompt

MARKERS = ["I'm sorry", "As an AI"]


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


def test_prompts_render_and_name_missing_fields():
    prompt = load_prompt("misinformation_temporal")
    messages = prompt.messages({"words": 50, "subject": "Scotland", "subject_description": "a country",
                                "statement": "Scotland lies in France.", "valid_from": "2030-01-01",
                                "valid_until": "2040-01-01"})
    assert messages[0]["role"] == "system" and "2030-01-01" in messages[1]["content"]
    with pytest.raises(ConfigError, match="misinformation_temporal.*valid_until"):
        prompt.messages({"words": 50, "subject": "S", "subject_description": "d", "statement": "s",
                         "valid_from": "x"})
    with pytest.raises(ConfigError, match="no prompt file"):
        load_prompt("nope")


def claim_frames(spark):
    claims = spark.createDataFrame(
        [("c1", 1, "Scotland", None, "Scotland lies in the country of United Kingdom.")],
        "claim_id string, hop int, subject_label string, subject_description string, statement string")
    conflicts = spark.createDataFrame(
        [("c1", kind, f"Scotland lies in the country of {obj}.", "a country", frm, until)
         for kind, obj, frm, until in [("factual", "Algeria", None, None),
                                       ("temporal", "France", "2030-01-01", "2041-01-01"),
                                       ("semantic", "Estonia", None, None)]],
        "claim_id string, kind string, statement string, subject_description string, "
        "valid_from string, valid_until string").selectExpr(
        "claim_id", "kind", "statement", "subject_description",
        "cast(valid_from as date) valid_from", "cast(valid_until as date) valid_until")
    descriptions = spark.createDataFrame([("c1", "a Baltic region")], "claim_id string, text string")
    return claims, conflicts, descriptions


PROMPTS = {name: load_prompt(name) for name in stage.PROMPT_NAMES}


def test_entry_requests_cover_every_kind_with_stable_keys(spark):
    claims, conflicts, descriptions = claim_frames(spark)
    requests = stage.entry_requests(claims, conflicts, descriptions, PROMPTS, 100, "m1", "p1")
    rows = {r.kind: r for r in requests.collect()}
    assert set(rows) == {"correct", "factual", "temporal", "semantic"}
    assert "United Kingdom" in json.loads(rows["correct"].messages)[1]["content"]
    assert "2041-01-01" in json.loads(rows["temporal"].messages)[1]["content"]
    assert "a Baltic region" in json.loads(rows["semantic"].messages)[1]["content"]
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
