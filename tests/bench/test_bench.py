"""`misbench bench`, import and exports on claims built from the real slice, with hand-written
texts standing in for generated ones (generation and quality have their own tests): which
texts enter, the option rules, what is left out and counted, letters spread evenly."""
import pandas as pd
import pytest
import yaml

from misbench.bench import stage
from misbench.bench.job import run_bench, run_import
from misbench.evaluate.job import run_export
from tests.conftest import TEST_DATA, copy_lake

pytestmark = pytest.mark.slow  # bench jobs over lakes built from the real slice

@pytest.fixture()
def bench_lake(spark, bench_root, tmp_path):
    return copy_lake(spark, bench_root, tmp_path / "lake")


def test_questions_follow_the_option_rules_and_only_passing_texts_enter(spark, cfg, bench_lake):
    lake = bench_lake
    claims = {r.claim_id: r for r in lake.read("claims").collect()}
    conflicts = {(r.claim_id, r.kind): r for r in lake.read("conflicts").collect()}
    questions = lake.read("questions").collect()
    ordered = sorted(claims)
    # one question per claim, its kinds those with a passing text (claim 0's temporal failed)
    assert sorted(q.claim_id for q in questions) == ordered
    assert {(q.claim_id, k) for q in questions for k in q.kinds} == \
        {(c, k) for (c, k) in conflicts if not (c == ordered[0] and k == "temporal")}
    assert stage.options_problems(lake.read("questions")).count() == 0
    texts = {r.evidence_id: r for r in lake.read("bench_texts").collect()}
    passed = {r.evidence_id for r in lake.read("evidence_qc").where("passed").collect()}
    assert set(texts) == passed
    for q in questions:
        options = dict(zip(q.roles, q.options))
        assert sorted(q.roles) == sorted(stage.ROLES)
        assert options["memory"] == claims[q.claim_id].object_label
        for kind in q.kinds:  # every kind of the claim states the same false answer
            assert options["misinformation"] == conflicts[(q.claim_id, kind)].object_label
            assert options["irrelevant"] == conflicts[(q.claim_id, kind)].irrelevant_label
        assert [q.letters[role] for role in q.roles] == list(stage.LETTERS)
        assert len({x for x in (normalized_text(o) for o in q.options)}) == 5
        assert sorted(q.misinformation_texts) == q.kinds
        for kind, by_style in q.misinformation_texts.items():
            for style, evidence_id in by_style.items():
                text = texts[evidence_id]
                assert (text.claim_id, text.kind, text.style) == (q.claim_id, kind, style)
        for style, evidence_id in q.correct_texts.items():
            assert (texts[evidence_id].kind, texts[evidence_id].style) == ("correct", style)
    by_claim = {q.claim_id: q for q in questions}
    assert "pair" not in by_claim[ordered[1]].settings  # its correct entry failed
    assert "single" in by_claim[ordered[1]].settings
    # claim 2's factual entry failed: single and pair show its other kinds only
    assert {"single", "pair", "style"} <= set(by_claim[ordered[2]].settings)
    assert "wikipedia" not in by_claim[ordered[2]].misinformation_texts["factual"]
    stats = lake.read("bench_stats").collect()
    left = {(r.setting, r.kind, r.reason): r["count"] for r in stats if r.stat == "left_out"}
    assert left[("all", "temporal", "no passing misinformation text")] == 1
    assert left[("pair", "factual", "no passing misinformation entry")] == 1
    assert left[("single", "factual", "no passing misinformation entry")] == 1
    assert sum(v for (s, _, r), v in left.items() if s == "pair" and r == "no passing correct entry") >= 1
    shown = {(r.setting, r.kind): r["count"] for r in stats if r.stat == "questions"}
    assert shown[("probe", None)] == len(questions) and ("probe", "factual") not in shown
    assert shown[("style", "factual")] == len(questions)
    assert shown[("single", "factual")] == len(questions) - 1  # claim 2's factual entry failed
    assert shown[("style", "temporal")] == sum("temporal" in q.kinds for q in questions)


def test_a_lake_of_the_old_layout_is_named_and_rebuilt(spark, cfg, bench_lake, tmp_path, caplog):
    """Conflicts with a false object per kind stop bench with what to run; an old questions
    table (one question per claim and kind) is replaced and its imported sets named."""
    from pyspark.sql import functions as F

    run_cfg = cfg.with_overrides([f"lake.root={tmp_path / 'lake'}"])
    conflicts = bench_lake.read("conflicts")
    current = conflicts.toPandas()
    first = sorted(current["claim_id"])[0]
    # a date or label answer has no entity id: its label tells the objects apart
    semantic = (F.col("claim_id") == first) & (F.col("kind") == "semantic")
    mixed = conflicts.withColumn("object_id", F.lit(None).cast("string")) \
        .withColumn("object_label", F.when(semantic, F.lit("Another place")).otherwise(F.col("object_label")))
    bench_lake.write(mixed, "conflicts")
    with pytest.raises(RuntimeError, match=r"bench: .*1 claims name a different false object.*run-all --from claims"):
        run_bench(spark, bench_lake, run_cfg)
    # the remedy the message names: claims rebuilt, the slots written for the old semantic
    # conflict removed (their texts name another place), the rest kept
    from misbench.claims.job import run_claims

    slots_before = bench_lake.row_count("evidence_slots")
    assert run_claims(spark, bench_lake, run_cfg).retired_slots == 3  # wikipedia, news, blog
    assert bench_lake.row_count("evidence_slots") == slots_before - 3
    assert bench_lake.read("evidence_slots").where(f"claim_id = '{first}' AND kind = 'semantic'").count() == 0

    old = bench_lake.read("questions").select("question_id", "source", "claim_id", F.lit("factual").alias("kind"))
    bench_lake.write(old.unionByName(old.limit(1).withColumn("source", F.lit("release"))), "questions",
                     partition_by=["source"])
    with pytest.raises(RuntimeError, match="export: .*earlier misbench.*run-all --from claims"):
        run_export(spark, bench_lake, run_cfg, "hf", tmp_path / "hf", "wikidata")
    with caplog.at_level("WARNING"):  # an import replaces the old table as bench does
        run_import(spark, bench_lake, run_cfg, [str(TEST_DATA / "misbench-release-sample.jsonl")], "release")
    assert "imported sets dropped, import them again: release" in caplog.text
    run_bench(spark, bench_lake, run_cfg)
    stored = bench_lake.read("questions")
    assert "kinds" in stored.columns and "kind" not in stored.columns
    assert stored.where("source = 'wikidata'").count() == len(set(current["claim_id"]))
    assert stored.where("source = 'release'").count() == 4
    assert stored.where(f"claim_id = '{first}'").first().kinds == ["factual"]  # its temporal failed, semantic retired


def normalized_text(text):
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def test_a_rerun_gives_the_same_questions_and_orders(spark, cfg, bench_lake, tmp_path):
    before = {r.question_id: (r.options, r.roles) for r in bench_lake.read("questions").collect()}
    run_bench(spark, bench_lake, cfg.with_overrides([f"lake.root={tmp_path / 'lake'}"]))
    after = {r.question_id: (r.options, r.roles) for r in bench_lake.read("questions").collect()}
    assert before == after


def test_memory_positions_are_dealt_evenly_over_the_letters(spark):
    from pyspark.sql import functions as F

    rows = [(f"c{i}", 1, "P1", "Topic", "thing", f"Q{i}", f"S{i}", f"Question {i}?", f"Answer {i}") for i in range(503)]
    claims = spark.createDataFrame(rows, "claim_id string, hop int, relation string, topic string, answer_type string, "
                                         "subject_id string, subject_label string, question string, object_label string")
    conflicts = spark.createDataFrame([(f"c{i}", "factual", f"Wrong {i}", f"Other {i}") for i in range(503)],
                                      "claim_id string, kind string, object_label string, irrelevant_label string")
    texts = spark.createDataFrame([(f"e{i}", "wikidata", f"c{i}", "factual", "wikipedia", "text") for i in range(503)],
                                  "evidence_id string, source string, claim_id string, kind string, style string, text string")
    questions, _ = stage.questions(claims, conflicts, texts, seed=7)
    spread = {r.letter: r["count"] for r in stage.position_spread(questions).where("role = 'memory'").collect()}
    assert sorted(spread) == list(stage.LETTERS)
    assert max(spread.values()) - min(spread.values()) <= 1, spread
    # many small groups (one question per relation) spread evenly too, not all at A
    small = claims.withColumn("relation", F.col("claim_id"))
    few, _ = stage.questions(small, conflicts, texts, seed=7)
    spread = {r.letter: r["count"] for r in stage.position_spread(few).where("role = 'memory'").collect()}
    assert sorted(spread) == list(stage.LETTERS) and min(spread.values()) > 503 / 5 * 0.6, spread
    others = {r.letter: r["count"] for r in stage.position_spread(questions).where("role = 'misinformation'").collect()}
    assert min(others.values()) > 503 / 5 * 0.6  # shuffled around the memory answer, not fixed
    assert stage.options_problems(questions).count() == 0


def test_a_refresh_keeps_earlier_letters_and_deals_new_questions_to_the_letters_held_least(spark):
    from pyspark.sql import functions as F

    def frames(ids):
        claims = spark.createDataFrame(
            [(f"c{i}", 1, "P1", "Topic", "thing", f"Q{i}", f"S{i}", f"Question {i}?", f"Answer {i}") for i in ids],
            "claim_id string, hop int, relation string, topic string, answer_type string, "
            "subject_id string, subject_label string, question string, object_label string")
        conflicts = spark.createDataFrame([(f"c{i}", "factual", f"Wrong {i}", f"Other {i}") for i in ids],
                                          "claim_id string, kind string, object_label string, irrelevant_label string")
        texts = spark.createDataFrame([(f"e{i}", "wikidata", f"c{i}", "factual", "wikipedia", "text") for i in ids],
                                      "evidence_id string, source string, claim_id string, kind string, style string, "
                                      "text string")
        return claims, conflicts, texts

    def memory_letters(questions):
        return {r.claim_id: r.letters["memory"] for r in questions.collect()}

    first, _ = stage.questions(*frames(range(100)), seed=7)
    before = memory_letters(first)
    # a week later: 12 questions gone, all of them from letter A and B; 9 new ones
    gone = sorted(c for c, letter in before.items() if letter in "AB")[:12]
    ids = [i for i in range(100) if f"c{i}" not in gone] + list(range(100, 109))
    earlier = first.select("claim_id", (F.array_position("roles", "memory") - 1).cast("int").alias("memory_position"))
    refreshed, _ = stage.questions(*frames(ids), seed=7, earlier_positions=earlier)
    after = memory_letters(refreshed)
    assert all(after[c] == before[c] for c in after if c in before)  # kept letters stay
    counts = {letter: list(after.values()).count(letter) for letter in stage.LETTERS}
    new = [after[f"c{i}"] for i in range(100, 109)]
    assert set(new) <= {"A", "B"}, (counts, new)  # the gaps are filled first
    assert max(counts.values()) - min(counts.values()) <= 2, counts
    assert stage.options_problems(refreshed).count() == 0


def test_options_equal_after_normalisation_leave_the_question_out(spark):
    claims = spark.createDataFrame([("c1", 1, "P1", "T", "x", "Q1", "S", "Q?", "São Paulo")],
                                   "claim_id string, hop int, relation string, topic string, answer_type string, "
                                   "subject_id string, subject_label string, question string, object_label string")
    conflicts = spark.createDataFrame([("c1", "factual", "Sao-Paulo", "Lima")],
                                      "claim_id string, kind string, object_label string, irrelevant_label string")
    texts = spark.createDataFrame([("e1", "wikidata", "c1", "factual", "wikipedia", "t")],
                                  "evidence_id string, source string, claim_id string, kind string, style string, text string")
    questions, left_out = stage.questions(claims, conflicts, texts, seed=1)
    assert questions.count() == 0
    assert [r.reason for r in left_out.collect()] == ["options not distinct after normalisation"]


def test_import_of_release_records_and_their_rejects(spark, cfg, bench_lake, tmp_path):
    run_cfg = cfg.with_overrides([f"lake.root={tmp_path / 'lake'}"])
    report = run_import(spark, bench_lake, run_cfg, [str(TEST_DATA / "misbench-release-sample.jsonl")], "release")
    assert report.records == 7 and report.rejects == 3
    reasons = sorted(r.reason.split(" (")[0].split(":")[0] for r in bench_lake.read("import_rejects").collect())
    assert reasons == ["duplicate of an earlier record", "missing object", "not a JSON object"]
    questions = bench_lake.read("questions").where("source = 'release'").collect()
    assert sorted(tuple(q.kinds) for q in questions) == [("factual",), ("factual",), ("factual",),
                                                         ("factual", "semantic", "temporal")]
    curie = {"University of Paris", "Flying University"}
    for q in questions:
        options = dict(zip(q.roles, q.options))
        assert options["irrelevant"] in {"University of Hamburg", "home tutoring"} | curie
        assert normalized_text(options["irrelevant"]) not in {normalized_text(options["memory"]),
                                                              normalized_text(options["misinformation"])}
        if options["memory"] in curie:  # Marie Curie's other school is true for her: never a false option
            assert options["irrelevant"] not in curie
    deterding = [q for q in questions if q.question.startswith("Which educational")]
    assert {dict(zip(q.roles, q.options))["memory"] for q in deterding} == {"University of Hamburg"}
    assert all("pair" in q.settings for q in deterding)
    # the wikidata questions are untouched by the import
    assert bench_lake.read("questions").where("source = 'wikidata'").count() > 0


def test_exports_for_hugging_face_and_lm_eval(spark, cfg, bench_lake, tmp_path):
    run_cfg = cfg.with_overrides([f"lake.root={tmp_path / 'lake'}"])
    run_export(spark, bench_lake, run_cfg, "hf", tmp_path / "hf", "wikidata")
    frame = pd.read_parquet(tmp_path / "hf" / "data" / "test.parquet")
    questions = {r.question_id: r for r in bench_lake.read("questions").collect()}
    assert len(frame) == len(questions)
    for row in frame.itertuples():
        assert list(row.options)[stage.LETTERS.index(row.answer)] == dict(zip(questions[row.question_id].roles,
                                                                            questions[row.question_id].options))["memory"]
    texts = {r.evidence_id: r.text for r in bench_lake.read("bench_texts").collect()}
    # one column per kind and style: the entries', then generate.styles in its order (null where
    # no text passed: the hand-made texts have wikipedia, news and blog only)
    styles = ["wikipedia", "news", "science", "blog", "technical", "confident"]
    assert [c for c in frame.columns if c.startswith("misinformation_factual_")] == \
        [f"misinformation_factual_{style}" for style in styles]
    for row in frame.itertuples():  # the misinformation columns hold the question's texts by kind and style
        q = questions[row.question_id]
        for kind in ("factual", "temporal", "semantic"):
            for style in styles:
                expected = texts.get((q.misinformation_texts.get(kind) or {}).get(style))
                assert getattr(row, f"misinformation_{kind}_{style}") == expected, (kind, style)
    assert any(row.misinformation_factual_news for row in frame.itertuples())
    card = (tmp_path / "hf" / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["configs"][0]["data_files"][0]["path"] == "data/test.parquet"

    run_export(spark, bench_lake, run_cfg, "lm-eval", tmp_path / "lm", "wikidata")
    task = yaml.safe_load((tmp_path / "lm" / "misbench_probe.yaml").read_text())
    assert task["output_type"] == "multiple_choice" and task["doc_to_choice"] == list(stage.LETTERS)
    docs = pd.read_parquet(task["dataset_kwargs"]["data_files"]["test"])
    assert len(docs) == len(questions)
    for doc in docs.itertuples():
        q = questions[doc.question_id]
        assert f"{stage.LETTERS[doc.label]}. {dict(zip(q.roles, q.options))['memory']}" in doc.text
        assert q.question in doc.text and "Passage" not in doc.text
    single = pd.read_parquet(yaml.safe_load((tmp_path / "lm" / "misbench_single.yaml").read_text())
                             ["dataset_kwargs"]["data_files"]["test"])
    # one single item per question and kind with a passing entry
    assert len(single) == sum(len(q.misinformation_texts[k].get("wikipedia") and [k] or [])
                              for q in questions.values() if "single" in q.settings for k in q.kinds)
    assert set(single["kind"]) <= {"factual", "temporal", "semantic"}
    assert all("Passage:" in text for text in single["text"])
