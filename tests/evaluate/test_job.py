"""`misbench evaluate` end to end with real Spark, Delta tables and a real MLflow sqlite store,
on questions built from the real slice: every setting, RtD and +Desc, metrics with their n,
resumption and a kill -9. The shared evaluation runs the real small model (Qwen2.5-Coder 0.5B
on llama.cpp: the log-prob answer path); the tests of parsing, kills and several models run the
fake backend."""
import json
import os
import subprocess

import pytest
from pyspark.sql import functions as F

from misbench.cli import main
from misbench.evaluate.job import run_evaluate
from misbench.evaluate.stage import SETTINGS
from tests.conftest import MISBENCH_CLI, PROJECT, copy_lake, kill_after_commits, rerun_in_this_process

SMALL = ["llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km", "evaluate.commit_rows=24",
         "evaluate.rtd.reconstruct_words=25", "evaluate.limit=2"]
FAKE = ["llm.backend=fake", *SMALL[1:]]


def internal(lake, name):
    """The rows of every command's and model's ``name`` work table (``work_table``): these
    tests evaluate one model at a time."""
    tables = [t for t in lake.discovered_tables(internal=True) if t.startswith(f"{name}_")]
    assert tables, f"no {name}_* table"
    rows = lake.read(tables[0])
    for table in tables[1:]:
        rows = rows.unionByName(lake.read(table))
    return rows


@pytest.fixture(scope="module")
def evaluated(spark, cfg, bench_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate") / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", *SMALL])
    reports = run_evaluate(spark, lake, run_cfg)
    return lake, run_cfg, reports


@pytest.mark.model
def test_every_item_of_every_setting_gets_one_answer(evaluated):
    lake, _, reports = evaluated
    (report,) = reports
    items = internal(lake, "eval_items")
    responses = lake.read("eval_responses")
    assert responses.count() == items.count() == report.items
    assert responses.select("response_id").distinct().count() == responses.count()
    assert {r.setting for r in responses.select("setting").distinct().collect()} == set(SETTINGS)
    questions = {r.question_id for r in lake.read("questions").orderBy("question_id").limit(2).collect()}
    assert {r.question_id for r in responses.collect()} <= questions
    for row in responses.collect():
        assert row.error is None
        assert row.unparsed == (row.chosen_role is None)
        if not row.unparsed:
            assert row.roles[row.letters.index(row.chosen_letter)] == row.chosen_role
            assert len(row.option_logprobs) == len(row.letters)
            assert sum(row.role_probabilities.values()) == pytest.approx(1.0)
        assert row.model == "qwen2.5-coder-0.5b-instruct-q4km" and row.answer_mode == "logprobs"
    # detection items: two options, yes and no, each passage once per setting
    detection = responses.where("setting = 'detection'").collect()
    assert all(sorted(r.roles) == ["misinformation", "not_misinformation"] for r in detection)
    assert len({tuple(r.evidence_ids) for r in detection}) == len(detection)


@pytest.mark.model
def test_rtd_steps_are_stored_and_feed_desc_and_rtd(evaluated):
    lake, _, _ = evaluated
    entities = lake.read("rtd_entities").collect()
    passages = {tuple(r.evidence_ids) for r in lake.read("eval_responses").where("setting = 'rtd'").collect()}
    assert {(e.passage_id,) for e in entities} == passages
    assert all(e.extracted for e in entities)
    labels = {r.id: r for r in lake.read("entities").collect()}
    for e in entities:  # a name found in entities is that entity, with its description
        if e.entity_id is not None:
            assert plain(labels[e.entity_id].label) == plain(e.extracted) or \
                plain(e.extracted) in {plain(a) for a in labels[e.entity_id].aliases or []}
            assert e.description == labels[e.entity_id].description
    rebuilt = [json.loads(r.messages)[1]["content"] for r in internal(lake, "rtd_requests_reconstruct").collect()]
    for e in entities:
        assert any(e.entity in text and (e.description or "(no description found)") in text for text in rebuilt)
    steps = lake.read("rtd_steps").groupBy("style").count().collect()
    assert {r.style: r["count"] for r in steps} == {"rtd_entity": len(entities), "rtd_reconstruct": len(entities)}
    rtd_prompt = internal(lake, "eval_items").where("setting = 'rtd'").first().messages
    reference = lake.read("rtd_steps").where("style = 'rtd_reconstruct'").first().text
    assert any(reference[:40] in json.loads(x.messages)[1]["content"]
               for x in internal(lake, "eval_items").where("setting = 'rtd'").collect())
    # the paper's last step: the passage and the reconstruction as Text 1 and Text 2, in a
    # seeded order; naming the passage is what counts as calling it misinformation
    texts = {r.evidence_id: r.text for r in lake.read("bench_texts").collect()}
    for item in internal(lake, "eval_items").where("setting = 'rtd'").collect():
        content = json.loads(item.messages)[1]["content"]
        first, second = content.split("Text 1: ", 1)[1].split("\n\nText 2: ", 1)
        passage = texts[item.evidence_ids[0]]
        assert (passage in first) == (item.roles[0] == "misinformation") != (passage in second.split("\n\nQuestion")[0])
        assert "A. Text 1" in content and "B. Text 2" in content
    assert "Text 1:" in rtd_prompt


def plain(text):
    return "".join(ch for ch in text.casefold() if ch.isalnum())


@pytest.mark.model
def test_metrics_carry_their_n_and_the_mlflow_runs(evaluated):
    lake, cfg, (report,) = evaluated
    metrics = lake.read("eval_metrics")
    responses = lake.read("eval_responses")
    for setting in SETTINGS:
        overall = metrics.where(f"setting = '{setting}' AND metric = 'unparsed_rate'").where(
            " AND ".join(f"{d} IS NULL" for d in ("kind", "hop", "style", "topic", "memory"))).collect()
        assert len(overall) == 1
        assert overall[0].n == responses.where(f"setting = '{setting}'").count()
    probe = metrics.where("setting = 'probe' AND metric = 'accuracy' AND kind IS NULL AND hop IS NULL AND "
                          "style IS NULL AND topic IS NULL AND memory IS NULL").first()
    known = responses.where("setting = 'probe' AND chosen_role = 'memory'").count()
    assert probe.value == pytest.approx(known / probe.n)
    mr = metrics.where("setting = 'single' AND metric = 'memorization_ratio' AND kind IS NULL AND memory IS NULL "
                       "AND style IS NULL AND hop IS NULL AND topic IS NULL").first()
    assert (mr.value is None) == (mr.n == 0)
    assert metrics.where(F.col("mlflow_run_id").isNull()).count() == 0

    import mlflow

    from misbench.evaluate.tracking import store_location

    uri, _ = store_location(cfg)
    assert uri.startswith("sqlite:///") and "_mlflow" in uri
    client = mlflow.MlflowClient(tracking_uri=uri)
    parent = client.get_run(report.mlflow_run_id)
    assert parent.data.params["model"] == "qwen2.5-coder-0.5b-instruct-q4km"
    assert parent.data.params["prompt.probe"].startswith("eval_probe:")
    assert {d.dataset.name for d in parent.inputs.dataset_inputs} >= {"questions", "bench_texts"}
    children = client.search_runs([parent.info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.info.run_name for c in children} == set(SETTINGS)
    assert {r.mlflow_run_id for r in metrics.collect()} == {c.info.run_id for c in children}
    # every breakdown a metric name of its setting's run, with its n; the headlines on the parent
    pair = next(c for c in children if c.info.run_name == "pair")
    from misbench.evaluate.run import metric_key

    rows = [r.asDict() for r in metrics.where("setting = 'pair'").collect()]
    assert rows and all(f"n/{metric_key(r)}" in pair.data.metrics for r in rows)
    assert "n/tendcm/kind_semantic/memory_unknown" in pair.data.metrics
    ordered = parent.data.params["settings"].split(",")
    assert list(report.headline) == [s for s in ordered if s in report.headline]
    for setting, (metric, value, n) in report.headline.items():
        if value is not None:
            assert parent.data.metrics[f"{setting}/{metric}"] == pytest.approx(value)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"eval_responses.parquet", "eval_metrics.json", "summary.json", "bench_stats.json"} <= artifacts
    assert any(path.endswith(".png") for path in artifacts)


@pytest.mark.model
def test_a_rerun_asks_nothing_and_sql_answers_success_rate_by_style(spark, evaluated, capsys):
    lake, cfg, (first,) = evaluated
    before = {r.response_id: r.chosen_letter for r in lake.read("eval_responses").collect()}
    (again,) = run_evaluate(spark, lake, cfg)
    assert again.answered_now == 0 and again.items == first.items
    assert {r.response_id: r.chosen_letter for r in lake.read("eval_responses").collect()} == before
    code = main(["sql", "--lake", lake.root, "--format", "json", "SELECT style, value, n FROM eval_metrics "
                 "WHERE model = 'qwen2.5-coder-0.5b-instruct-q4km' AND setting = 'detection' "
                 "AND metric = 'success_rate' AND style IS NOT NULL AND kind IS NULL AND hop IS NULL "
                 "AND memory IS NULL AND topic IS NULL ORDER BY style"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["style"] for r in rows] == ["blog", "news", "wikipedia"]
    assert all(r["n"] > 0 for r in rows)


@pytest.mark.slow  # an evaluation job over the bench lake, fake backend
def test_generated_answers_are_parsed_strictly(spark, cfg, bench_root, tmp_path):
    root = tmp_path / "lake"
    lake = copy_lake(spark, bench_root, root)
    # the probe is answered in words, the other settings with a letter
    run_cfg = cfg.with_overrides([f"lake.root={root}", *FAKE, "evaluate.answer_mode=generate",
                                  "llm.fake.replies={'Answer from what you know': 'None of these, I would say.'}"])
    (report,) = run_evaluate(spark, lake, run_cfg, settings=["probe", "single"])
    rows = lake.read("eval_responses").collect()
    assert report.answer_mode == "generate" and len(rows) == report.items > 0
    assert {r.setting for r in rows if r.unparsed} == {"probe"} and any(not r.unparsed for r in rows)
    for row in rows:
        assert row.raw_answer is not None and row.option_logprobs is None
        assert row.unparsed == (row.chosen_letter is None)
        if row.chosen_letter:
            reply = row.raw_answer.strip()
            assert reply.startswith(row.chosen_letter) or reply.lower().startswith(("answer", "the"))  \
                or row.chosen_letter in reply


@pytest.mark.chaos
def test_kill_during_evaluation_then_rerun_loses_and_duplicates_nothing(spark, bench_root, tmp_path):
    lake = copy_lake(spark, bench_root, tmp_path / "lake")
    command = [*MISBENCH_CLI, "evaluate", "--lake", lake.root, "--settings", "probe",
               "detection", "--set", "spark.master=local[2]"]
    for setting in FAKE:
        command += ["--set", setting]
    command += ["--set", "evaluate.commit_rows=3", "--set", "evaluate.limit=2", "--set", "llm.fake.seconds_per_request=0.2"]
    kill_after_commits(command, lake.root + "/eval_responses/_delta_log", 2)
    assert lake.exists("eval_responses") and not lake.exists("eval_metrics"), "the kill did not land mid-run"
    before = {r.response_id: r.chosen_letter for r in lake.read("eval_responses").collect()}
    # the rerun without pauses (only the kill needed them), in several chunks again: it finds the
    # work table the killed run left (the other kill tests rerun in one chunk)
    code, stderr = rerun_in_this_process(command, "--set", "llm.fake.seconds_per_request=0")
    assert code == 0, stderr[-3000:]
    after = lake.read("eval_responses").collect()
    ids = [r.response_id for r in after]
    assert len(ids) == len(set(ids)) == internal(lake, "eval_items").count()
    assert all({r.response_id: r.chosen_letter for r in after}[k] == v for k, v in before.items())


@pytest.mark.chaos  # three real processes on one lake
def test_evaluations_of_two_models_and_a_hoax_evaluation_on_one_lake_at_once(spark, cfg, bench_root, tmp_path):
    """Three commands started together on one lake: evaluate of two models and hoax-evaluate
    of the first (what a user tried: with the same model, evaluate died with a Java
    FILE_NOT_EXIST on a work table the other command's commit had replaced). Each command's
    items, queue and chunks are its own tables, commits that race are redone: all three
    finish with one answer per item and their metrics."""
    from misbench.hoax.job import run_hoax

    lake = copy_lake(spark, bench_root, tmp_path / "lake")
    run_hoax(spark, lake, cfg.with_overrides([f"lake.root={lake.root}", "llm.backend=fake"]))
    assert lake.row_count("hoax_questions") and lake.row_count("questions")
    earlier_tables = set(lake.discovered_tables(internal=True))

    def command(name, model, seconds, *more):
        args = [*MISBENCH_CLI, name, "--lake", lake.root, "--model", f"fake:{model}", *more,
                "--set", "spark.master=local[1]"]
        for setting in ["evaluate.commit_rows=2", f"llm.fake.seconds_per_request={seconds}"]:
            args += ["--set", setting]
        return args

    # as a user runs them: each command with its own engine registry (the tests' shared one
    # would hold one engine per slot for all)
    env = {k: v for k, v in os.environ.items() if k != "MISBENCH_ENGINE_DIR"}
    # each evaluate asks the first 2 of the bench lake's 5 questions by id, at 2 s an answer and
    # a commit every 2 answers: its answers span tens of seconds, over the hoax-evaluate's and
    # each other's (with all 5 questions, 60 answers each made this test 3.5 minutes long)
    two_questions = ("--settings", "probe", "detection", "--set", "evaluate.limit=2")
    commands = [command("evaluate", "first-model", 2.0, *two_questions),
                command("evaluate", "second-model", 2.0, *two_questions),
                command("hoax-evaluate", "first-model", 4.0, "--tasks", "choice")]
    jobs = [subprocess.Popen(c, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            for c in commands]
    outputs = [job.communicate(timeout=900)[0] for job in jobs]
    for job, output in zip(jobs, outputs):
        assert job.returncode == 0, output[-3000:]
    responses = lake.read("eval_responses").where("model IN ('first-model', 'second-model')").collect()
    ids = [r.response_id for r in responses]
    assert len(ids) == len(set(ids)) and all(r.error is None for r in responses)
    groups = {
        "evaluate first-model": [r for r in responses if r.model == "first-model" and not r.setting.startswith("hoax_")],
        "evaluate second-model": [r for r in responses if r.model == "second-model"],
        "hoax-evaluate first-model": [r for r in responses if r.model == "first-model" and r.setting.startswith("hoax_")],
    }
    assert len(groups["hoax-evaluate first-model"]) == lake.row_count("hoax_questions")
    # each evaluate command's own items table: its model's responses are exactly its items
    tables = [t for t in set(lake.discovered_tables(internal=True)) - earlier_tables if t.startswith("eval_items_")]
    asked = [{r.response_id for r in lake.read(t).select("response_id").collect()} for t in tables]
    assert len(tables) == 3 and all(asked)
    for name, rows in groups.items():
        assert rows and {r.response_id for r in rows} in asked, name
    # the races this is about: evaluate answered while hoax-evaluate of the same model did, and
    # while the other model's evaluate did (the hoax set is small: it may end before the third
    # command's first answer)
    spans = [(min(r.answered_at for r in rows), max(r.answered_at for r in rows)) for rows in groups.values()]
    for pair in ((spans[0], spans[2]), (spans[0], spans[1])):
        assert max(start for start, _ in pair) < min(end for _, end in pair), spans
    metrics = {(r.model, r.setting) for r in lake.read("eval_metrics").where("metric = 'accuracy'").collect()}
    assert {("first-model", "probe"), ("second-model", "probe"), ("first-model", "hoax_choice")} <= metrics
    assert not [t for t in lake.discovered_tables(internal=True) if t.startswith(("chunk_", "work_", "replace_"))]


@pytest.mark.slow  # an evaluation job over the bench lake, fake backend
def test_several_models_in_one_call_each_with_its_own_run_and_rows(spark, cfg, bench_root, tmp_path):
    root = tmp_path / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", *FAKE, "evaluate.limit=1"])
    # two models: one of the configured backend by name, one given as backend:model
    models = ["first-model", "fake:second-model"]
    reports = run_evaluate(spark, lake, run_cfg, models=models, settings=["probe", "single"])
    assert [r.model for r in reports] == ["first-model", "second-model"]
    assert len({r.mlflow_run_id for r in reports}) == 2
    responses = lake.read("eval_responses").collect()
    by_model = {m: [r for r in responses if r.model == m] for m in (r.model for r in reports)}
    assert all(len(rows) == report.items > 0 for report, rows in zip(reports, by_model.values()))
    metrics = lake.read("eval_metrics").where("metric = 'accuracy'").collect()
    assert {r.model for r in metrics} == set(by_model)


@pytest.mark.slow  # an evaluation job over the bench lake, fake backend
def test_runs_are_averaged_with_their_spread_and_n(spark, cfg, bench_root, tmp_path):
    """evaluate.runs=2: every item twice, the second run with its own letters; eval_metrics
    holds the mean of the two runs, its spread and n over both; a rerun asks nothing."""
    root = tmp_path / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", *FAKE, "evaluate.limit=2", "evaluate.runs=2"])
    (report,) = run_evaluate(spark, lake, run_cfg, settings=["probe", "single", "detection"])
    items = internal(lake, "eval_items").collect()
    per_run = {run: sorted((i.setting, i.question_id, i.kind or "", i.style or "", tuple(i.evidence_ids))
                           for i in items if i.run == run) for run in (0, 1)}
    assert per_run[0] and per_run[0] == per_run[1] and len(items) == 2 * len(per_run[0]) == report.items
    responses = {r.item_id: r for r in lake.read("eval_responses").collect()}
    probes = {(i.run, i.question_id): responses[i.item_id] for i in items if i.setting == "probe"}
    assert any(probes[(0, q)].letters != probes[(1, q)].letters or probes[(0, q)].roles != probes[(1, q)].roles
               for (_, q) in probes)
    row = lake.read("eval_metrics").where(
        "setting = 'probe' AND metric = 'accuracy' AND kind IS NULL AND hop IS NULL AND style IS NULL "
        "AND topic IS NULL AND memory IS NULL").first()
    values = [sum(probes[(run, q)].chosen_role == "memory" for (r, q) in probes if r == run) / 2 for run in (0, 1)]
    assert row.runs == 2 and row.n == 4 and row.value == pytest.approx(sum(values) / 2)
    assert row.value_spread == pytest.approx(abs(values[0] - values[1]) / 2 ** 0.5)
    (again,) = run_evaluate(spark, lake, run_cfg, settings=["probe", "single", "detection"])
    assert again.answered_now == 0


@pytest.mark.slow  # an evaluation job over the bench lake, fake backend
def test_api_model_without_logprobs_falls_back_to_parsed_replies_on_a_stratified_sample(spark, cfg, bench_root,
                                                                                         tmp_path):
    from tests.llm.test_client import Endpoint

    # a remote API that returns no log-probabilities: every reply is "B", or for detection
    # "Maybe" (unreadable)
    server = Endpoint(logprobs=False, answer=lambda body: "Maybe" if "misinformation?" in
                      body["messages"][-1]["content"] else "B")
    root = tmp_path / "lake"
    lake = copy_lake(spark, bench_root, root)
    run_cfg = cfg.with_overrides([f"lake.root={root}", f"llm.openai.base_url={server.url}",
                                  "evaluate.api_sample=2", "llm.client.retries=0"])
    try:
        (report,) = run_evaluate(spark, lake, run_cfg, models=["openai:test-model"],
                                 settings=["probe", "detection"])
    finally:
        server.close()
    assert report.backend == "openai" and report.model == "test-model" and report.answer_mode == "logprobs"
    responses = lake.read("eval_responses").collect()
    questions = lake.read("questions").where("source = 'wikidata'")
    sampled = {r.question_id for r in responses}
    # asked for 2 of 5 questions (one per claim): at least one of every relation, fewer than all
    assert 2 <= len(sampled) < questions.count()
    assert {r.relation for r in responses} == {r.relation for r in questions.collect()}
    for row in responses:  # no log-probs came back: every item was asked again for a reply
        assert row.option_logprobs is None or all(v is None for v in row.option_logprobs)
        if row.setting == "probe":
            assert row.raw_answer == "B" and row.chosen_letter == "B" and not row.unparsed
        else:
            assert row.raw_answer == "Maybe" and row.unparsed and row.chosen_letter is None
    assert any(body.get("logprobs") for body in server.bodies)
    assert any(not body.get("logprobs") for body in server.bodies)
    assert all("Authorization" not in json.dumps(body) for body in server.bodies)
