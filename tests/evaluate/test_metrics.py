"""The paper's metrics against hand-computed cases, and the strict reading of answers."""
import json
import math

import pytest
from pyspark.sql import functions as F

from misbench.evaluate import metrics
from misbench.evaluate.stage import RESPONSE_SCHEMA, choose, parse_choice, role_probabilities

LETTERS = ["A", "B", "C", "D", "E"]
OPTIONS = ["Paris", "Lyon", "Unsure", "Not in the options", "Nice"]
ROLES = ["memory", "misinformation", "irrelevant", "unsure", "not_in_options"]


@pytest.mark.parametrize("reply, expected", [
    ("B", "B"), (" B ", "B"), ("(B)", "B"), ("B.", "B"), ("B) Lyon", "B"), ("Answer: B", "B"),
    ("The answer is B", "B"), ("B. Lyon", "B"), ("Lyon", "B"), ("Lyon.", "B"), ("not in the options", "D"),
    ("B. Paris", None),            # a letter with another option's text
    ("A or B", None), ("I think it is Lyon, or maybe Paris", None), ("", None), (None, None),
    ("F", None),                   # not an option
    ("a", None),                   # a word, not a letter
    ("Marseille", None),
])
def test_strict_parse_reads_only_unambiguous_replies(reply, expected):
    assert parse_choice(reply, LETTERS, OPTIONS) == expected


def test_choice_from_log_probabilities_and_unreadable_scores():
    assert choose([-3.0, -0.5, -2.0]) == 1
    assert choose([-math.inf, -math.inf]) is None  # nothing to read: unparsed, never option A
    assert choose([-math.inf, -7.0]) == 1
    probabilities = role_probabilities([math.log(0.2), math.log(0.6), math.log(0.2)], ["memory", "misinformation", "x"])
    assert probabilities["misinformation"] == pytest.approx(0.6)
    assert role_probabilities([-math.inf], ["memory"]) is None


def test_formulas_and_their_sign():
    assert metrics.memorization_ratio(3, 1) == 0.75
    assert metrics.memorization_ratio(0, 0) is None
    assert metrics.tendcm(3, 1) == 0.5   # leaning to the correct evidence is positive
    assert metrics.tendcm(1, 3) == -0.5
    assert metrics.tendcm(0, 0) is None


def _row(i, model, setting, question, kind, role, unparsed=False, style="wikipedia", error=None, p_memory=None,
         hop=1, topic="Geography"):
    return {
        "response_id": f"r{i}", "model": model, "backend": "test", "answer_mode": "logprobs", "setting": setting,
        "item_id": f"i{i}", "question_id": question, "claim_id": "c", "kind": kind, "hop": hop, "relation": "P1",
        "topic": topic, "style": style, "evidence_ids": [], "prompt_name": "p", "prompt_hash": "h",
        "letters": LETTERS, "roles": ROLES,
        "raw_answer": None, "chosen_role": None if unparsed else role,
        "chosen_letter": None if unparsed or error else (LETTERS[ROLES.index(role)] if role in ROLES else "B"),
        "option_logprobs": None, "role_probabilities": None if p_memory is None else {"memory": p_memory},
        "unparsed": unparsed and error is None, "error": error, "attempts": 1, "latency_s": 0.0, "load_id": "l",
        "mlflow_run_id": "run", "answered_at": None,
    }


def _frame(spark, rows):
    from pyspark.sql.types import _parse_datatype_string

    schema = _parse_datatype_string(RESPONSE_SCHEMA)
    return spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)


def _value(frame, setting, metric, **dims):
    rows = [r for r in frame.collect() if r.setting == setting and r.metric == metric
            and all(getattr(r, d) == dims.get(d) for d in metrics.DIMENSIONS)]
    assert len(rows) == 1, (setting, metric, dims, rows)
    return rows[0].value, rows[0].n


def test_metrics_by_hand(spark):
    m = "model-x"
    rows = [
        # probe: q1, q2, q3 known (memory); q4 wrong; q5 unparsed -> Unknown
        _row(1, m, "probe", "q1", "factual", "memory"), _row(2, m, "probe", "q2", "factual", "memory"),
        _row(3, m, "probe", "q3", "temporal", "memory"), _row(4, m, "probe", "q4", "temporal", "irrelevant"),
        _row(5, m, "probe", "q5", "factual", None, unparsed=True),
        # single: on Memory questions q1 memory, q2 misinformation, q3 misinformation; q4 (Unknown) memory
        _row(6, m, "single", "q1", "factual", "memory", p_memory=0.9),
        _row(7, m, "single", "q2", "factual", "misinformation", p_memory=0.2),
        _row(8, m, "single", "q3", "temporal", "misinformation", p_memory=0.1),
        _row(9, m, "single", "q4", "temporal", "memory", p_memory=0.7),
        _row(10, m, "single", "q5", "factual", None, unparsed=True),
        # pair: 3 correct-evidence answers, 1 misinformation, 1 unsure
        _row(11, m, "pair", "q1", "factual", "memory"), _row(12, m, "pair", "q2", "factual", "memory"),
        _row(13, m, "pair", "q3", "temporal", "memory"), _row(14, m, "pair", "q4", "temporal", "misinformation"),
        _row(15, m, "pair", "q5", "factual", "unsure"),
        # detection: 2 of 3 misinformation passages flagged; 1 of 2 correct passages flagged; one engine error
        _row(16, m, "detection", "q1", "factual", "misinformation"),
        _row(17, m, "detection", "q2", "factual", "not_misinformation"),
        _row(18, m, "detection", "q3", "temporal", "misinformation"),
        _row(19, m, "detection", "q1", "correct", "misinformation"),
        _row(20, m, "detection", "q2", "correct", "not_misinformation"),
        _row(21, m, "detection", "q4", "temporal", None, error="RuntimeError: engine died"),
    ]
    responses = _frame(spark, rows)
    with_memory = metrics.with_memory(responses, responses)
    frame = metrics.compute_metrics(with_memory, ["probe", "single", "pair", "detection", "rtd"]).cache()

    assert _value(frame, "probe", "accuracy") == (3 / 5, 5)
    assert _value(frame, "probe", "unparsed_rate") == (1 / 5, 5)
    assert _value(frame, "probe", "top_letter_share") == (3 / 4, 4)  # 3 of the 4 read answers on A
    # MR on Memory questions q1-q3: c=1, m=2
    assert _value(frame, "single", "memorization_ratio") == (pytest.approx(1 / 3), 3)
    assert _value(frame, "single", "memorization_ratio", kind="temporal") == (0.0, 1)
    assert _value(frame, "single", "memorization_ratio", memory="unknown") == (None, 0)  # empty: null, n = 0
    assert _value(frame, "single", "memory_answer_rate") == (2 / 5, 5)
    assert _value(frame, "single", "unparsed_rate") == (1 / 5, 5)
    assert _value(frame, "single", "memory_option_probability", memory="memory") == (pytest.approx(0.4), 3)
    # TendCM: (3 - 1) / (3 + 1); positive = leaning to the correct evidence
    assert _value(frame, "pair", "tendcm") == (0.5, 4)
    assert _value(frame, "pair", "tendcm", memory="memory") == (1.0, 3)
    assert _value(frame, "pair", "tendcm", memory="unknown") == (-1.0, 1)
    assert _value(frame, "detection", "success_rate") == (2 / 3, 3)
    assert _value(frame, "detection", "success_rate", kind="temporal") == (1.0, 1)
    assert _value(frame, "detection", "false_alarm_rate") == (0.5, 2)
    assert _value(frame, "detection", "error_rate") == (1 / 6, 6)
    assert _value(frame, "detection", "success_rate", kind="factual", memory="memory") == (0.5, 2)
    # a setting with no responses gives no rows, not zeros
    assert frame.where("setting = 'rtd'").count() == 0


def test_memory_joins_by_question_and_model_not_by_position(spark):
    rows = [
        _row(1, "a", "probe", "q2", "factual", "memory"), _row(2, "a", "probe", "q1", "factual", "irrelevant"),
        _row(3, "b", "probe", "q1", "factual", "memory"),
        _row(4, "a", "single", "q1", "factual", "memory"), _row(5, "a", "single", "q2", "factual", "memory"),
        _row(6, "b", "single", "q1", "factual", "memory"), _row(7, "b", "single", "q2", "factual", "memory"),
    ]
    responses = metrics.with_memory(_frame(spark, rows), _frame(spark, rows))
    labels = {(r.model, r.setting, r.question_id): r.memory for r in responses.collect()}
    assert labels[("a", "single", "q1")] == "unknown" and labels[("a", "single", "q2")] == "memory"
    assert labels[("b", "single", "q1")] == "memory" and labels[("b", "single", "q2")] == "no_probe"


def test_model_names_pick_a_backend_or_keep_the_configured_one(cfg):
    from misbench.evaluate.job import model_config

    assert model_config(cfg, "openai:gpt-4o-mini").get("llm.backend") == "openai"
    assert model_config(cfg, "openai:gpt-4o-mini").get("llm.openai.model") == "gpt-4o-mini"
    local = model_config(cfg, "qwen2.5-coder-0.5b-instruct-q4km")
    assert local.get("llm.backend") == "llama_cpp"
    assert local.get("llm.llama_cpp.model") == "qwen2.5-coder-0.5b-instruct-q4km"
    assert model_config(cfg, "vllm:Qwen/Qwen2.5-7B-Instruct").get("llm.vllm.model") == "Qwen/Qwen2.5-7B-Instruct"
    # a colon inside a model name that is no backend stays part of the name
    assert model_config(cfg, "models/x:y.gguf").get("llm.llama_cpp.model") == "models/x:y.gguf"
    # a GGUF file given by path is named after the file (the name its rows and MLflow run carry)
    from misbench.llm import model_identity

    assert model_identity(model_config(cfg, "llama_cpp:/models/second-model.gguf").get("llm")) == "second-model"
    assert model_identity(model_config(cfg, "fake:second").get("llm")) == "second"


def test_stratified_sample_keeps_relation_shares(spark):
    from misbench.evaluate.job import stratified_sample

    rows = [(f"q{i}", "P17" if i < 600 else "P27" if i < 897 else "P31") for i in range(900)]
    questions = spark.createDataFrame(rows, "question_id string, relation string")
    sample = stratified_sample(questions, 90, seed=3)
    counts = {r.relation: r["count"] for r in sample.groupBy("relation").count().collect()}
    assert counts == {"P17": 60, "P27": 30, "P31": 1}  # a relation of 3 questions keeps one
    assert {r.question_id for r in stratified_sample(questions, 90, seed=3).collect()} == \
        {r.question_id for r in sample.collect()}


def test_key_entity_is_resolved_by_name_and_the_claims_subject_wins_a_tie(spark):
    from pyspark.sql import functions as F

    from misbench.evaluate.stage import entity_name, resolve_entities

    labels = spark.createDataFrame([
        ("Q90", "Paris", "capital of France", [], ["City of Light"]),
        ("Q830149", "Paris", "city in Texas", [], []),
        ("Q7", "Douglas Adams", "English writer", [], ["Douglas Noel Adams"]),
    ], "id string, label string, description string, instance_of array<string>, aliases array<string>")
    claims = spark.createDataFrame([("c1", "Q90"), ("c2", "Q7"), ("c3", "Q1")], "claim_id string, subject_id string")
    replies = spark.createDataFrame([
        ("p1", "c1", "Paris."), ("p2", "c2", '"douglas noel adams"'), ("p3", "c3", "The entity is: Paris\nmore"),
        ("p4", "c3", "Atlantis"),
    ], "passage_id string, claim_id string, reply string")
    named = replies.select("passage_id", "claim_id", entity_name(F.col("reply")).alias("extracted"))
    rows = {r.passage_id: r for r in resolve_entities(named, labels, claims).collect()}
    assert (rows["p1"].entity_id, rows["p1"].subject_match, rows["p1"].description) == ("Q90", True, "capital of France")
    assert (rows["p2"].entity_id, rows["p2"].entity) == ("Q7", "Douglas Adams")  # by alias
    assert rows["p3"].extracted == "Paris" and rows["p3"].entity_id == "Q830149"  # no subject among them: smallest id
    assert (rows["p4"].entity_id, rows["p4"].entity, rows["p4"].description) == (None, "Atlantis", None)


def test_items_show_each_kind_and_ask_the_probe_once_per_claim(spark):
    """One question per claim: the probe once, single and pair once per kind with an entry,
    style and detection once per kind and style, the correct texts once; RtD's last step
    (compare) shows the passage and the reconstruction in a seeded order."""
    from misbench.bench.stage import questions as build_questions
    from misbench.evaluate.stage import (
        PROMPTS, RTD_LAST_STEPS, choice_items, detection_passages, rtd_compare_items)
    from misbench.prompts import load_prompt

    claims = spark.createDataFrame(
        [(f"c{i}", 1, "P1", "T", "x", f"Q{i}", f"S{i}", f"Where is S{i}?", f"Right {i}") for i in range(6)],
        "claim_id string, hop int, relation string, topic string, answer_type string, subject_id string, "
        "subject_label string, question string, object_label string")
    conflicts = spark.createDataFrame(
        [(f"c{i}", kind, f"Wrong {i}", f"Other {i}") for i in range(6) for kind in ("factual", "temporal", "semantic")],
        "claim_id string, kind string, object_label string, irrelevant_label string")
    texts = [(f"e{i}{k}{s}", "wikidata", f"c{i}", k, s, f"{k} {s} text {i}")
             for i in range(6) for k in ("correct", "factual", "semantic") for s in ("wikipedia", "news")]
    texts = spark.createDataFrame(texts, "evidence_id string, source string, claim_id string, kind string, "
                                         "style string, text string")
    questions, _ = build_questions(claims, conflicts, texts, seed=1)
    prompts = {setting: load_prompt(name) for setting, name in PROMPTS.items()}
    items = choice_items(questions, texts, prompts).collect()
    count = {}
    for item in items:
        count[(item.setting, item.kind)] = count.get((item.setting, item.kind), 0) + 1
    assert count == {("probe", None): 6, ("single", "factual"): 6, ("single", "semantic"): 6,
                     ("pair", "factual"): 6, ("pair", "semantic"): 6, ("style", "factual"): 12,
                     ("style", "semantic"): 12}
    assert len({i.item_id for i in items}) == len(items)
    passages = detection_passages(questions, texts)
    assert sorted((r.kind, r["count"]) for r in passages.groupBy("kind").count().collect()) == \
        [("correct", 12), ("factual", 12), ("semantic", 12)]

    entries = detection_passages(questions, texts, styles=["wikipedia"])
    references = entries.select("passage_id", F.lit("S").alias("entity"),
                                F.concat(F.lit("rebuilt "), F.col("passage")).alias("reference"))
    compare = rtd_compare_items(entries, references, {"rtd": load_prompt(RTD_LAST_STEPS["compare"])}, seed=1)
    orders = set()
    by_id = {r.evidence_id: r.text for r in texts.collect()}
    for item in compare.collect():
        content = json.loads(item.messages)[1]["content"]
        first = content.split("Text 1: ", 1)[1].split("\n\nText 2: ", 1)[0]
        passage = by_id[item.evidence_ids[0]]
        passage_first = first == passage
        assert first in (passage, "rebuilt " + passage)
        assert item.roles == (["misinformation", "not_misinformation"] if passage_first
                              else ["not_misinformation", "misinformation"])
        orders.add(passage_first)
    assert orders == {True, False}  # 18 passages, both orders


def test_style_results_normalise_mr_across_the_styles_of_each_hop(spark):
    """The style_results view: raw MR with its n per style and hop, min-max normalised across
    the styles of the same model and hop (null where the styles do not differ)."""
    from misbench.views import view_definitions

    rows = [("m", "logprobs", "wikidata", "style", "memorization_ratio", value, n, hop, style)
            for hop, style, value, n in [(1, "news", 0.2, 10), (1, "blog", 0.6, 8), (1, "wikipedia", 1.0, 9),
                                         (2, "news", 0.5, 4), (2, "blog", 0.5, 4), (None, "news", 0.3, 14)]]
    rows.append(("m", "logprobs", "wikidata", "style", "memory_option_probability_when_chosen", 0.7, 5, 1, "news"))
    rows.append(("m", "logprobs", "wikidata", "single", "memorization_ratio", 0.9, 3, 1, "news"))  # another setting
    frame = spark.createDataFrame(rows, "model string, answer_mode string, source string, setting string, "
                                        "metric string, value double, n long, hop int, style string")
    for column in ("kind", "topic", "memory", "benchmark_version"):
        frame = frame.withColumn(column, F.lit(None).cast("string"))
    frame.createOrReplaceTempView("eval_metrics")
    try:
        found = {(r.hop, r.style): r for r in spark.sql(view_definitions()["style_results"]).collect()}
    finally:  # the session is shared: no other test may see this table
        spark.catalog.dropTempView("eval_metrics")
    assert set(found) == {(1, "news"), (1, "blog"), (1, "wikipedia"), (2, "news"), (2, "blog"), (None, "news")}
    assert found[(1, "news")].memorization_ratio == 0.2 and found[(1, "news")].memorization_ratio_n == 10
    assert [found[(1, s)].memorization_ratio_normalised for s in ("news", "blog", "wikipedia")] == \
        pytest.approx([0.0, 0.5, 1.0])
    assert found[(1, "news")].memory_option_probability_when_chosen == 0.7
    assert found[(2, "news")].memorization_ratio_normalised is None  # the styles do not differ
    assert found[(None, "news")].memorization_ratio_normalised is None  # one style alone


def test_figure_7_draws_one_panel_per_hop():
    import pandas as pd

    from misbench.evaluate.figures import memory_logprob_by_style

    roles = ["memory", "misinformation", "irrelevant", "unsure", "not_in_options"]
    rows = [{"setting": "style", "chosen_role": "memory", "hop": hop, "style": style, "roles": roles,
             "option_logprobs": [-0.1 * i, -2.0, -3.0, -4.0, -5.0]}
            for i, (hop, style) in enumerate([(1, "news"), (1, "blog"), (2, "news"), (1, "news")])]
    rows.append({**rows[0], "chosen_role": "misinformation"})  # not chosen: not drawn
    figure = memory_logprob_by_style(pd.DataFrame(rows), "m")
    panels = figure.get_axes()
    assert [a.get_title().split(",")[1].split(":")[0].strip() for a in panels] == ["one-hop", "2-hop"]
    # the entries' style first (none here), then the rewrites by name (styles.style_order)
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["blog\n(n=1)", "news\n(n=2)"]
    assert memory_logprob_by_style(pd.DataFrame(rows[-1:]), "m") is None


def test_later_runs_deal_the_options_again_and_metrics_average_over_runs(spark):
    """evaluate.runs: run 0 is the stored dealing; run 1 moves the letters (the same five
    options, each still named by its role) and gets its own item ids; metrics of the runs
    become their mean, spread, runs and summed n."""
    from misbench.bench.stage import questions as build_questions
    from misbench.evaluate.stage import PROMPTS, choice_items, dealt_for_run
    from misbench.prompts import load_prompt

    claims = spark.createDataFrame(
        [(f"c{i}", 1, "P1", "T", "x", f"Q{i}", f"S{i}", f"Where is S{i}?", f"Right {i}") for i in range(40)],
        "claim_id string, hop int, relation string, topic string, answer_type string, subject_id string, "
        "subject_label string, question string, object_label string")
    conflicts = spark.createDataFrame([(f"c{i}", "factual", f"Wrong {i}", f"Other {i}") for i in range(40)],
                                      "claim_id string, kind string, object_label string, irrelevant_label string")
    texts = spark.createDataFrame([(f"e{i}", "wikidata", f"c{i}", "factual", "wikipedia", f"text {i}") for i in range(40)],
                                  "evidence_id string, source string, claim_id string, kind string, style string, text string")
    questions, _ = build_questions(claims, conflicts, texts, seed=1)
    stored = {q.question_id: q for q in questions.collect()}
    first = {q.question_id: q for q in dealt_for_run(questions, 0, seed=5).collect()}
    second = {q.question_id: q for q in dealt_for_run(questions, 1, seed=5).collect()}
    assert all(first[k].roles == stored[k].roles and first[k].run == 0 for k in stored)
    # the true answer moves two letters from where the bench dealt it: every question moves,
    # and the run stays as balanced over A-E as the bench's dealing
    assert all(second[k].letters["memory"] != stored[k].letters["memory"] for k in stored)
    spread = {}
    for q in second.values():
        spread[q.letters["memory"]] = spread.get(q.letters["memory"], 0) + 1
    assert sorted(spread) == ["A", "B", "C", "D", "E"] and max(spread.values()) - min(spread.values()) <= 1
    for k, q in second.items():
        assert dict(zip(q.roles, q.options)) == dict(zip(stored[k].roles, stored[k].options))
        assert [q.letters[r] for r in q.roles] == ["A", "B", "C", "D", "E"]
    prompts = {setting: load_prompt(name) for setting, name in PROMPTS.items()}
    ids = [choice_items(dealt_for_run(questions, run, 5), texts, prompts).select("item_id").collect() for run in (0, 1)]
    assert not {r.item_id for r in ids[0]} & {r.item_id for r in ids[1]}
    plain = {r.item_id for r in choice_items(questions, texts, prompts).select("item_id").collect()}
    assert plain == {r.item_id for r in ids[0]}  # run 0's items are the items of a one-run evaluation

    per_run = spark.createDataFrame(
        [("m", "logprobs", "probe", run, "accuracy", value, 10, 10, None) for run, value in ((0, 0.5), (1, 0.7), (2, 0.6))]
        + [("m", "logprobs", "single", 0, "memorization_ratio", None, 0, 4, None)],
        "model string, answer_mode string, setting string, run int, metric string, value double, n long, "
        "items long, kind string")
    rows = {r.setting: r for r in metrics.over_runs(per_run).collect()}
    assert rows["probe"].value == pytest.approx(0.6) and rows["probe"].value_spread == pytest.approx(0.1)
    assert (rows["probe"].runs, rows["probe"].n, rows["probe"].items) == (3, 30, 30)
    assert rows["single"].value is None and rows["single"].runs == 0 and rows["single"].n == 0
