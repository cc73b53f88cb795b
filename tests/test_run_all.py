"""`misbench run-all` end to end on the real slice with the smallest shipped model: every stage
in order, the summary, a record per stage in pipeline_runs; a rerun skips everything and
changes nothing; a changed setting reruns only the stages that depend on it; a failed stage
stops the run and is recorded."""
import pytest

from misbench.lake import DeltaRsLake
from misbench.pipeline import STAGE_NAMES
from tests.conftest import run_all as run

pytestmark = [pytest.mark.e2e, pytest.mark.model]

def counts(lake) -> dict:
    return {t.name: t.rows for t in lake.tables() if t.name != "pipeline_runs"}


@pytest.fixture(scope="module")
def first_run(spark, run_all_lake):
    root, code, out = run_all_lake
    return root, DeltaRsLake(spark, root=str(root)), code, out


def test_every_stage_runs_in_order_and_the_summary_says_where_everything_is(first_run):
    root, lake, code, out = first_run
    assert code == 0, out[-3000:]
    started = [line.split("] ")[1].split(":")[0] for line in out.splitlines() if line.endswith(": running")]
    assert started == list(STAGE_NAMES)
    runs = lake.read("pipeline_runs").collect()
    assert sorted(r.stage for r in runs) == sorted(STAGE_NAMES) and {r.status for r in runs} == {"succeeded"}
    assert all(r.summary and r.seconds > 0 for r in runs)
    summary = out[out.index("run-all: finished"):]
    for table in ("entities", "triples", "claims", "evidence", "evidence_qc", "hoax_questions", "pipeline_runs"):
        assert f"  {table} " in summary
    assert "ingest_staging" not in summary and "eval_queue" not in summary  # internal tables stay out
    assert f"Lake: {root}" in summary and "mlflow ui --backend-store-uri" in summary
    hoax_choice = lake.read("eval_metrics").where(
        "setting = 'hoax_choice' AND metric = 'accuracy' AND country IS NULL AND category IS NULL "
        "AND reasoning_type IS NULL AND answer_type IS NULL AND false_premise_type IS NULL").first()
    assert f"n={hoax_choice.n}" in summary and hoax_choice.mlflow_run_id in summary


def test_a_rerun_skips_every_finished_stage_and_changes_nothing(first_run):
    root, lake, code, _ = first_run
    assert code == 0
    before = counts(lake)
    code, out = run(root)
    assert code == 0, out[-3000:]
    skipped = [line.split("] ")[1].split(":")[0] for line in out.splitlines() if line.endswith("same inputs")]
    assert skipped == [s for s in STAGE_NAMES if s != "views"]  # views are cheap: always stored again
    assert counts(lake) == before


def test_a_changed_setting_reruns_only_the_stages_that_use_it(first_run):
    root, lake, code, _ = first_run
    assert code == 0
    responses = lake.row_count("eval_responses")
    code, out = run(root, "--set", "hoax.evaluate.json_max_tokens=91")
    assert code == 0, out[-3000:]
    ran = [line.split("] ")[1].split(":")[0] for line in out.splitlines() if line.endswith(": running")]
    assert ran == ["hoax-evaluate", "views"]
    assert lake.row_count("eval_responses") == responses  # answers are kept by key: none asked again


def test_a_failed_stage_stops_the_run_is_recorded_and_the_next_run_starts_there(first_run):
    root, lake, code, _ = first_run
    assert code == 0
    code, out = run(root, "--from", "hoax-evaluate", "--force", "--set", "hoax.evaluate.tasks=[no_such_task]")
    assert code == 2
    assert "[8/9] hoax-evaluate: running" in out and "views" not in out  # nothing after it ran
    failed = lake.read("pipeline_runs").where("status = 'failed'").collect()
    assert [r.stage for r in failed] == ["hoax-evaluate"] and "no_such_task" in failed[0].summary
    code, out = run(root)
    assert code == 0, out[-3000:]
    ran = [line.split("] ")[1].split(":")[0] for line in out.splitlines() if line.endswith(": running")]
    assert ran == ["hoax-evaluate", "views"]  # its newest run failed: it runs again, the rest is skipped


def test_a_stage_whose_output_changed_since_runs_again(first_run):
    root, lake, code, _ = first_run
    assert code == 0
    from deltalake import DeltaTable, write_deltalake

    # hoax's output rewritten outside run-all (an analyst's edit, a standalone command): hoax
    # runs again because its output changed, hoax-evaluate because a table it reads did
    questions = DeltaTable(lake.location("hoax_questions"))
    before = questions.version()
    write_deltalake(questions, questions.to_pyarrow_table(), mode="overwrite",
                    partition_by=questions.metadata().partition_columns or None)
    assert DeltaTable(lake.location("hoax_questions")).version() == before + 1
    code, out = run(root)
    assert code == 0, out[-3000:]
    ran = [line.split("] ")[1].split(":")[0] for line in out.splitlines() if line.endswith(": running")]
    assert ran == ["hoax", "hoax-evaluate", "views"]
