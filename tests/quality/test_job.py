"""`misbench quality` end to end on texts generated from the real slice, plus hand-made bad
texts; then the human-evaluation round trip through the CLI on filled CSV and XLSX sheets.

The writer and the LLM judge are the fake backend (its judge says yes exactly when the text
makes the statement word for word, so every verdict below is known in advance); question
similarity is the real all-MiniLM-L6-v2. The real judge is tested in test_scorers.py and
end to end by run-all."""
import datetime as dt

import pytest
from pyspark.sql import functions as F

from misbench.cli import main
from misbench.generate.job import run_generate
from misbench.generate.stage import GENERATED_SCHEMA
from misbench.quality import checks, human
from misbench.quality.job import run_quality
from tests.conftest import MISBENCH_CLI, copy_lake, kill_after_commits, rerun_in_this_process
from tests.generate.test_job import FAKE, SLOW_FAKE
from tests.quality.test_scorers import CONTRADICTING, OFF_TOPIC, SUPPORTING

QUALITY = [*FAKE, "quality.commit_rows=10"]

pytestmark = pytest.mark.model  # all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def generated_root(spark, cfg, slice_claims_root, tmp_path_factory):
    """The real slice's claims, generation for the first claim, plus hand-made texts about London."""
    root = tmp_path_factory.mktemp("quality") / "lake"
    run_cfg = cfg.with_overrides([f"lake.root={root}", *QUALITY])
    lake = copy_lake(spark, slice_claims_root, root)
    # One round: the texts to check are what matters here, not the regeneration of failed slots.
    run_generate(spark, lake, run_cfg.with_overrides(["generate.rounds=1"]), limit=1)
    london = lake.read("claims").where("subject_label = 'London' AND hop = 1").first()
    factual = lake.read("conflicts").where(f"claim_id = '{london.claim_id}' AND kind = 'factual'").first()
    conflict_text = f"{factual.statement} " + SUPPORTING.replace(
        "United Kingdom", factual.object_label).replace("south-east England", factual.object_label)
    handmade = {
        "handmade-good": ("correct", SUPPORTING + " " + london.statement),
        "handmade-refusal": ("correct", "I'm sorry, but I cannot write that passage, because it would "
                                        "present a statement about London that I have not verified myself."),
        "handmade-contradicts": ("correct", CONTRADICTING),
        "handmade-off-topic": ("correct", OFF_TOPIC),
        "handmade-misinformation": ("factual", conflict_text),
        # misinformation that keeps the truth beside its false claim
        "handmade-misinformation-and-truth": ("factual", f"{factual.statement} " + SUPPORTING),
        # ...or by another of its names (an alias of the United Kingdom in entities)
        "handmade-misinformation-and-alias": ("factual", f"{conflict_text} London is also the largest city of "
                                                         "Great Britain."),
        # "correct evidence" that asserts the factual conflict
        "handmade-correct-states-conflict": ("correct", conflict_text),
    }
    now = dt.datetime.now(dt.timezone.utc)
    rows = [(evidence_id, london.claim_id, 1, kind, "handmade", text, "test", "hand", None, None, None,
             0, 0, "stop", 0.0, None, 1, "hand", None, now) for evidence_id, (kind, text) in handmade.items()]
    lake.upsert(spark.createDataFrame(rows, GENERATED_SCHEMA), "evidence", ["evidence_id"])
    return root


@pytest.fixture(scope="module")
def checked(spark, cfg, generated_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("quality-run") / "lake"
    lake = copy_lake(spark, generated_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", *QUALITY])
    report = run_quality(spark, lake, run_cfg)
    return lake, run_cfg, report


def test_every_evidence_row_gets_one_verdict_and_the_stats_add_up(checked):
    lake, _, report = checked
    evidence = lake.read("evidence").count()
    qc = {r.evidence_id: r for r in lake.read("evidence_qc").collect()}
    assert len(qc) == evidence == report.evidence > 8  # the generated texts and the 8 hand-made
    # generation checked its own texts as it went; this run checked the hand-made ones it added
    handmade = [r for r in qc.values() if r.evidence_id.startswith("handmade-")]
    assert report.checked == len(handmade) == 8
    # Each model loads once per worker process (PySpark may start more than one worker).
    loads = {r.load_id for r in handmade if r.complete}
    assert report.model_loads == len(loads) == len({load.split("-")[0] for load in loads})
    assert report.passed == sum(r.passed for r in qc.values()) > 0
    for row in qc.values():
        assert row.passed == (not row.reasons) == (row.failed_filter is None)
        if row.complete:
            assert row.entailment_score is not None and row.similarity_score is not None
            assert row.entailment_model == "fake-echo"
            assert row.similarity_model == "sentence-transformers/all-MiniLM-L6-v2"
    stats = lake.read("quality_stats").collect()
    groups = {(r.kind, r.style, r.hop) for r in stats}
    for group in groups:
        steps = sorted((r for r in stats if (r.kind, r.style, r.hop) == group), key=lambda r: r.step)
        assert steps[0].filter == "completeness"
        assert steps[0].rows_in == sum(1 for r in qc.values() if (r.kind, r.style, r.hop) == group)
        for before, after in zip(steps, steps[1:]):
            assert after.rows_in == before.rows_out
        assert steps[0].rows_in == steps[-1].rows_out * (len(steps) == len(checks.FILTERS)) + sum(s.rows_dropped for s in steps)
    assert sum(r.rows_in for r in stats if r.filter == "completeness") == evidence
    assert sum(r.rows_out for r in stats if r.filter == "similarity") == report.passed
    dropped = {name: sum(r.rows_dropped for r in stats if r.filter == name) for name in checks.FILTERS}
    assert dropped == report.dropped_by_filter
    for r in stats:  # every dropped row is counted under at least one rule of its filter
        assert (sum(r.dropped_by_rule.values()) >= r.rows_dropped) and all(
            rule.startswith(r.filter + ":") and "(" not in rule for rule in r.dropped_by_rule)
    rules = {rule for r in stats for rule in r.dropped_by_rule}
    assert "completeness: refusal or disclaimer" in rules and "content: names the true answer" in rules
    assert "content: names the true answer by another name" in rules  # the hand-made Great Britain text


def test_hand_made_bad_texts_are_dropped_for_the_right_reason(checked):
    lake, _, _ = checked
    qc = {r.evidence_id: r for r in lake.read("evidence_qc").where("style = 'handmade'").collect()}
    assert qc["handmade-good"].passed, qc["handmade-good"].reasons
    refusal = qc["handmade-refusal"]
    assert refusal.failed_filter == "completeness" and "refusal" in refusal.reasons[0]
    assert refusal.entailment_score is None  # incomplete texts never reach the models
    contradicts = qc["handmade-contradicts"]
    # correct evidence that never names its answer fails the rules first (hypotheses() gives
    # correct rows their own answer); the judge still scores it, and finds the claim not entailed
    assert contradicts.failed_filter == "content" and contradicts.on_topic
    assert "content: does not name its answer 'United Kingdom'" in contradicts.reasons
    assert any(r.startswith("entailment: ") for r in contradicts.reasons), contradicts.reasons
    assert contradicts.hypothesis == qc["handmade-good"].hypothesis  # the claim's own statement
    off_topic = qc["handmade-off-topic"]
    assert any(r.startswith("similarity: off topic") for r in off_topic.reasons) and not off_topic.on_topic
    # Misinformation is judged against its conflicting claim, not the true one.
    misinformation = qc["handmade-misinformation"]
    assert misinformation.passed, misinformation.reasons
    assert misinformation.hypothesis != contradicts.hypothesis
    assert misinformation.contrary_hypothesis == contradicts.hypothesis  # must not entail the truth
    assert misinformation.names_true_answer is False
    # ...and only its false claim: naming the true answer, or entailing a contrary claim, fails.
    with_truth = qc["handmade-misinformation-and-truth"]
    assert with_truth.names_true_answer and not with_truth.passed
    assert with_truth.contrary_hypothesis == contradicts.hypothesis and with_truth.contrary_score is not None
    assert "content: names the true answer 'United Kingdom'" in with_truth.reasons
    with_alias = qc["handmade-misinformation-and-alias"]
    assert with_alias.names_true_answer and not with_alias.passed
    assert "content: names the true answer by another name ('Great Britain' for 'United Kingdom')" in with_alias.reasons
    states_conflict = qc["handmade-correct-states-conflict"]
    assert states_conflict.contrary_hypothesis == misinformation.hypothesis  # same text, same statement:
    assert states_conflict.contrary_score == pytest.approx(misinformation.entailment_score)  # same score
    assert any(r.startswith("entailment: also states the factual conflict") for r in states_conflict.reasons)


def test_a_rerun_checks_nothing_and_a_changed_text_is_checked_again(spark, checked):
    lake, run_cfg, _ = checked
    before = {r.evidence_id: (r.qc_key, r.passed) for r in lake.read("evidence_qc").collect()}
    again = run_quality(spark, lake, run_cfg)
    assert again.checked == 0 and again.model_loads == 0
    assert {r.evidence_id: (r.qc_key, r.passed) for r in lake.read("evidence_qc").collect()} == before
    changed = lake.read("evidence").where("evidence_id = 'handmade-good'").withColumn(
        "text", F.lit("I'm sorry, I cannot help with this request about London and its country today."))
    lake.upsert(changed, "evidence", ["evidence_id"])
    third = run_quality(spark, lake, run_cfg)
    assert third.checked == 1
    row = lake.read("evidence_qc").where("evidence_id = 'handmade-good'").first()
    assert not row.passed and row.failed_filter == "completeness"
    assert lake.read("evidence_qc").count() == len(before)


def test_human_evaluation_round_trip_on_filled_csv_and_xlsx(spark, checked, tmp_path, capsys):
    import openpyxl
    import pandas as pd

    lake, _, _ = checked
    lake_arg = ["--lake", lake.root, *[x for s in QUALITY for x in ("--set", s)]]
    out = tmp_path / "sheets"
    assert main(["human-eval", "export", *lake_arg, "--out", str(out), "--size", "12"]) == 0
    sheet = pd.read_csv(out / "human_eval_sample.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    complete = lake.read("evidence_qc").where("complete").count()
    assert len(sheet) == min(12, complete) and sheet["evidence_id"].is_unique
    assert {"passed", "entailment_score"}.isdisjoint(sheet.columns)  # annotators rate blind
    assert (sheet.loc[sheet["kind"] == "correct", "conflict_1"] == "n/a").all()

    # Annotators 1 and 2 agree with the entailment filter; annotator 3 rates everything 2.
    entailed = {r.evidence_id: r.entailed for r in lake.read("evidence_qc").collect()}
    for column in ("entailment_1", "entailment_2"):
        sheet[column] = ["2" if entailed[e] else "0" for e in sheet["evidence_id"]]
    for column in ("conflict_1", "conflict_2"):
        sheet[column] = ["n/a" if k == "correct" else "2" for k in sheet["kind"]]
    sheet.to_csv(tmp_path / "annotators-1-2.csv", index=False)
    book = openpyxl.load_workbook(out / "human_eval_sample.xlsx")
    table = book["sample"]
    header = [c.value for c in table[1]]
    for row in table.iter_rows(min_row=2):
        row[header.index("entailment_3")].value = 2
        if row[header.index("kind")].value != "correct":
            row[header.index("conflict_3")].value = 1
    book.save(tmp_path / "annotator-3.xlsx")

    capsys.readouterr()
    assert main(["human-eval", "import", *lake_arg, str(tmp_path / "annotators-1-2.csv"),
                 str(tmp_path / "annotator-3.xlsx")]) == 0
    assert "human_eval_report" in capsys.readouterr().out
    report = {(r.metric, r.rubric, r.annotator): r for r in lake.read("human_eval_report").collect()}
    assert report[("accuracy", "entailment_filter", None)].value == 1.0
    assert report[("accuracy", "entailment_filter", None)].items == len(sheet)
    assert report[("agreement_with_majority", "entailment", 1)].value == 1.0
    twos = sum(entailed[e] for e in sheet["evidence_id"])
    assert report[("agreement_with_majority", "entailment", 3)].value == pytest.approx(twos / len(sheet))
    counts = [[0, 0, 3] if entailed[e] else [2, 0, 1] for e in sheet["evidence_id"]]
    assert report[("fleiss_kappa", "entailment", None)].value == pytest.approx(human.fleiss_kappa(counts))
    labels = lake.read("human_eval_labels")
    assert labels.where("rubric = 'entailment'").count() == 3 * len(sheet)

    # A bad cell is reported, not imported.
    sheet.loc[0, "entailment_1"] = "yes"
    sheet.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["human-eval", "import", *lake_arg, str(tmp_path / "bad.csv")]) == 2
    assert "entailment_1: 'yes'" in capsys.readouterr().err


@pytest.mark.chaos
def test_kill_during_quality_then_rerun_loses_and_duplicates_nothing(spark, generated_root, tmp_path):
    lake = copy_lake(spark, generated_root, tmp_path / "lake")
    command = [*MISBENCH_CLI, "quality", "--lake", lake.root,
               "--set", "spark.master=local[2]", *[x for s in SLOW_FAKE for x in ("--set", s)],
               "--set", "quality.commit_rows=3"]
    # Generation already committed its own verdicts: the kill comes two commits of this run later.
    kill_after_commits(command, lake.root + "/evidence_qc/_delta_log", 2)
    evidence = lake.read("evidence").count()
    before = {r.evidence_id: r.checked_at for r in lake.read("evidence_qc").collect()}
    # The 8 hand-made rows go in 3 chunks (by their ids' hash): two commits leave some
    # checked and some not.
    handmade = [e for e in before if e.startswith("handmade-")]
    assert 0 < len(handmade) < 8 and len(before) < evidence, "the kill did not land mid-run"

    # the rerun in one chunk and without pauses: only the kill needed them
    code, stderr = rerun_in_this_process(command, "--set", "quality.commit_rows=16",
                                         "--set", "llm.fake.seconds_per_request=0")
    assert code == 0, stderr[-3000:]
    after = {r.evidence_id: r.checked_at for r in lake.read("evidence_qc").collect()}
    assert len(after) == lake.read("evidence_qc").count() == evidence  # one verdict each, no duplicates
    assert all(after[e] == checked_at for e, checked_at in before.items())  # finished work kept
    stats = lake.read("quality_stats").where("filter = 'completeness'").agg(F.sum("rows_in")).first()[0]
    assert stats == evidence
