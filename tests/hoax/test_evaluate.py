"""`misbench hoax-evaluate` end to end with real Spark, Delta tables and a real MLflow sqlite
store, on hoax questions built from the real slice: the three tasks, the judge and
similarity, metrics with their n per label, resumption, and an imported question set.

The answering model and the judge are the fake backend (the bookkeeping is the point here;
run-all evaluates the real small model); similarity is the real all-MiniLM-L6-v2."""
import pytest
from pyspark.sql import functions as F

from misbench.cli import main
from misbench.evaluate.metrics import HOAX_DIMENSIONS
from misbench.hoax.answers import answer_schema, json_verdict
from misbench.hoax.evaluate_job import run_hoax_evaluate
from misbench.hoax.job import run_hoax
from tests.conftest import PROJECT, copy_lake

pytestmark = pytest.mark.model  # all-MiniLM-L6-v2

# The fake model chooses "I do not know" in the choice task, so every question also goes
# through the justification and the judge.
SMALL = ["llm.backend=fake", "llm.fake.replies={'Read the question carefully': 'I do not know'}", "evaluate.commit_rows=8",
         "hoax.evaluate.justification_max_tokens=60", "hoax.evaluate.json_max_tokens=90"]
SAMPLE = PROJECT / "tests" / "data" / "multihoax-release-sample.jsonl"


@pytest.fixture(scope="module")
def evaluated(spark, cfg, bench_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("hoax-evaluate") / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", *SMALL])
    run_hoax(spark, lake, run_cfg)
    reports = run_hoax_evaluate(spark, lake, run_cfg)
    return lake, run_cfg, reports


def test_each_task_answers_every_question_once(evaluated):
    lake, _, (report,) = evaluated
    questions = {r.question_id: r for r in lake.read("hoax_questions").where("source = 'wikidata'").collect()}
    responses = lake.read("eval_responses").collect()
    by_setting = {}
    for r in responses:
        by_setting.setdefault(r.setting, []).append(r)
        assert r.error is None and r.question_id in questions
    assert len(by_setting["hoax_choice"]) == len(by_setting["hoax_json"]) == len(questions)
    idk = {r.question_id for r in by_setting["hoax_choice"] if r.chosen_role == "idk"}
    assert idk == set(questions)  # as the fake was told: the justification and judge run for each
    assert {r.question_id for r in by_setting.get("hoax_justification", [])} == idk
    assert len(by_setting.get("hoax_judge", [])) == len(idk)
    for r in by_setting["hoax_choice"]:
        assert r.unparsed == (r.chosen_role is None) and r.answer_mode == "logprobs"
        if r.chosen_role:
            assert questions[r.question_id].option_roles[r.letters.index(r.chosen_letter)] == r.chosen_role
    schema = answer_schema()
    for r in by_setting["hoax_json"]:
        verdict, index = json_verdict(r.raw_answer, questions[r.question_id].options, schema)
        assert r.unparsed == (verdict != "valid")
        assert r.chosen_role == (None if index is None else questions[r.question_id].option_roles[index])
    assert report.answers == len(questions) * 2 + len(idk)


def test_metrics_match_the_answers_with_their_n_per_label(evaluated):
    lake, _, (report,) = evaluated
    metrics = lake.read("eval_metrics").where(F.col("setting").startswith("hoax_")).collect()
    overall = {(m.setting, m.metric): m for m in metrics if all(getattr(m, d) is None for d in HOAX_DIMENSIONS)}
    choice = lake.read("eval_responses").where("setting = 'hoax_choice'").collect()
    chosen_idk = sum(r.chosen_role == "idk" for r in choice)
    assert overall[("hoax_choice", "accuracy")].value == pytest.approx(chosen_idk / len(choice))
    assert overall[("hoax_choice", "accuracy")].n == len(choice)
    judged = {r.question_id: r for r in lake.read("hoax_judgements").collect()}
    detected = sum(r.chosen_role == "idk" and bool(judged.get(r.question_id) and judged[r.question_id].names_premise)
                   for r in choice)
    assert overall[("hoax_justification", "accuracy")].value == pytest.approx(detected / len(choice))
    json_rows = lake.read("eval_responses").where("setting = 'hoax_json'").collect()
    assert overall[("hoax_json", "accuracy")].value == pytest.approx(
        sum(r.chosen_role == "idk" for r in json_rows) / len(json_rows))
    assert ("hoax_json", "invalid_json_rate") in overall and ("hoax_choice", "near_miss_rate") in overall
    assert report.headline["hoax_choice"] == ("accuracy", overall[("hoax_choice", "accuracy")].value, len(choice))
    for dimension in HOAX_DIMENSIONS:  # each label splits the questions: the n add up
        rows = [m for m in metrics if m.setting == "hoax_choice" and m.metric == "accuracy" and getattr(m, dimension)]
        assert rows and sum(m.n for m in rows) == len(choice)
    assert len(judged) == len(choice) > 0
    for j in judged.values():
        assert j.judge_yes_probability is not None and j.names_premise == (j.judge_yes_probability >= 0.5)
        assert -1.0 <= j.similarity <= 1.0 and j.judge_model == "fake-echo"


def test_mlflow_run_has_a_nested_run_per_task_with_figures(evaluated):
    import mlflow

    from misbench.evaluate.tracking import open_experiment

    lake, run_cfg, (report,) = evaluated
    experiment = open_experiment(run_cfg)
    parent = mlflow.get_run(report.mlflow_run_id)
    assert parent.data.params["model"] == "fake-echo" and parent.data.params["temperature"] == "0.0"
    assert parent.data.metrics["hoax_choice/accuracy"] == pytest.approx(report.headline["hoax_choice"][1])
    children = mlflow.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{report.mlflow_run_id}'")
    assert set(children["tags.mlflow.runName"]) == {"hoax_choice", "hoax_justification", "hoax_json"}
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(report.mlflow_run_id)}
    assert {"hoax_accuracy_by_label.png", "eval_metrics.json", "hoax_responses.parquet", "summary.json"} <= artifacts


def test_rerun_asks_nothing_and_imported_questions_evaluate_too(spark, evaluated):
    lake, run_cfg, (report,) = evaluated
    # the first run's new answers are the model's answers, the judge's replies not among them
    assert report.answered_now == report.answers
    before = lake.read("eval_responses").count()
    (again,) = run_hoax_evaluate(spark, lake, run_cfg)
    assert again.answered_now == 0 and lake.read("eval_responses").count() == before
    assert again.headline == report.headline
    root = run_cfg.get("lake.root")
    overrides = [f"--set={o}" for o in SMALL]
    assert main(["import-hoax", str(SAMPLE), "--name", "sample", "--lake", root]) == 0
    assert main(["hoax-evaluate", "--source", "sample", "--tasks", "choice", "--lake", root, *overrides]) == 0
    imported = lake.read("eval_metrics").where("source = 'sample' AND setting = 'hoax_choice' AND metric = 'accuracy'")
    rows = imported.where(" AND ".join(f"{d} IS NULL" for d in HOAX_DIMENSIONS)).collect()
    assert len(rows) == 1 and rows[0].n == 4
    # the wikidata rows of the same model are still there: each source is replaced alone
    assert lake.read("eval_metrics").where("source = 'wikidata' AND setting = 'hoax_json'").count() > 0
