"""Generation end to end with a real small model (Qwen2.5-Coder 0.5B, llama.cpp on CPU), through
Spark and the lake: every style and kind, resumption, and a kill -9 in the middle."""
import subprocess
import sys

import pytest

from misbench.claims.job import run_claims
from misbench.generate.job import run_generate
from misbench.generate.stage import EVIDENCE_KINDS, STYLES
from misbench.ingest.job import run_ingest
from misbench.lake import DeltaRsLake
from tests.conftest import PROJECT, SLICE_JSON, copy_lake, kill_after_commits, require_slice

SMALL_MODEL = [
    "llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km",
    "generate.target_words=30",
    "generate.sampling.max_tokens=70",
    "generate.description_sampling.max_tokens=24",
    "generate.commit_rows=8",
]


@pytest.fixture(scope="module")
def claims_root(spark, cfg, tmp_path_factory):
    require_slice()
    root = tmp_path_factory.mktemp("generate") / "lake"
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    lake = DeltaRsLake(spark, root=str(root))
    run_ingest(spark, lake, run_cfg, [str(SLICE_JSON)])
    run_claims(spark, lake, run_cfg)
    return root


@pytest.fixture()
def lake_copy(spark, claims_root, tmp_path):
    return copy_lake(spark, claims_root, tmp_path / "lake")


def evidence_of_first_claim(lake):
    claim = lake.read("claims").orderBy("claim_id").first().claim_id
    return {r.evidence_id: r for r in lake.read("evidence").where(f"claim_id = '{claim}'").collect()}


def test_every_kind_in_every_style_then_a_rerun_only_retries_failures(spark, cfg, lake_copy):
    run_cfg = cfg.with_overrides([f"lake.root={lake_copy.root}", *SMALL_MODEL])
    report = run_generate(spark, lake_copy, run_cfg, limit=1)
    rows = evidence_of_first_claim(lake_copy)
    assert {(r.kind, r.style) for r in rows.values()} == {(k, s) for k in EVIDENCE_KINDS for s in STYLES}
    assert len(rows) == 24
    ok = [r for r in rows.values() if r.error is None]
    assert len(ok) >= 18  # a 0.5B model occasionally writes too little; those are retried
    for r in ok:
        assert len(r.text.split()) >= 5 and "sorry" not in r.text.lower()[:100]
        assert (r.backend, r.model) == ("llama_cpp", "qwen2.5-coder-0.5b-instruct-q4km")
        assert r.tokens_out > 0 and r.finish_reason in ("stop", "length") and r.attempts >= 1
    descriptions = lake_copy.read("semantic_descriptions").collect()
    assert len(descriptions) == 1 and descriptions[0].style == "description"
    # the model is loaded once per worker process, never per batch
    loads = {r.load_id for r in rows.values()}
    assert len(loads) == len({load.split("-")[0] for load in loads})
    assert report.model_loads == len(loads)
    runs = lake_copy.read("generation_runs").collect()
    assert {r["pass"] for r in runs} == {"descriptions", "entries", "styles"}
    assert sum(r.rows for r in runs) == report.generated == 25

    failed_before = {i for i, r in rows.items() if r.error is not None}
    again = run_generate(spark, lake_copy, run_cfg, limit=1)
    after = evidence_of_first_claim(lake_copy)
    assert set(after) == set(rows)
    for evidence_id, row in rows.items():
        if row.error is None:  # finished rows are never generated again
            assert after[evidence_id].text == row.text and after[evidence_id].attempts == row.attempts
    assert again.generated == len(failed_before)


def test_kill_during_generation_then_rerun_loses_and_duplicates_nothing(lake_copy):
    root = str(lake_copy.root)
    command = [sys.executable, "-m", "misbench.cli", "generate", "--limit", "1", "--lake", root,
               "--set", "spark.master=local[2]"]
    for setting in SMALL_MODEL:
        command += ["--set", setting]
    command[-1] = "generate.commit_rows=2"
    kill_after_commits(command, lake_copy.root + "/evidence/_delta_log", 2)
    before = evidence_of_first_claim(lake_copy)
    assert 0 < len(before) < 24, "the kill did not land mid-generation"

    rerun = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = evidence_of_first_claim(lake_copy)
    assert len(after) == 24
    ids = [r.evidence_id for r in lake_copy.read("evidence").collect()]
    assert len(ids) == len(set(ids))
    for evidence_id, row in before.items():
        if row.error is None:
            assert after[evidence_id].text == row.text


@pytest.mark.parametrize("signal_name, cause", [
    ("SIGSEGV", "Fatal Python error: Segmentation fault"),        # a crash in native code
    ("SIGKILL", "killed without a Python traceback"),             # what the OOM killer does
])
def test_a_crashed_worker_ends_with_a_short_error_and_keeps_committed_rows(lake_copy, signal_name, cause):
    """A worker that holds the engine dies for real, mid-pass: the command names the stage,
    pass, backend and model, the cause and what to try; the Python traceback (faulthandler)
    and Spark's Java stack traces go to the log file, not the terminal; committed rows stay."""
    import signal

    from tests.conftest import crash_workers_after_commits

    root = str(lake_copy.root)
    settings = [*(s for s in SMALL_MODEL if not s.startswith("generate.commit_rows=")),
                "generate.commit_rows=2", "spark.master=local[2]"]
    command = [sys.executable, "-m", "misbench.cli", "generate", "--limit", "1", "--lake", root]
    for setting in settings:
        command += ["--set", setting]
    # one entries chunk committed, the second one running in the workers that hold the engine
    finished, hits = crash_workers_after_commits(command, root + "/evidence/_delta_log", 1,
                                                 getattr(signal, signal_name))
    assert hits > 0, "no Python worker was found to crash"
    assert finished.returncode == 4, finished.stderr[-3000:]
    error = finished.stderr
    assert "misbench generate: error: generate entries: " in error  # the stage and its pass
    assert "llama_cpp model qwen2.5-coder-0.5b-instruct-q4km" in error
    assert f"died ({cause}" in error
    assert "rerun the same command" in error and "Try:" in error
    assert "at org.apache" not in error and "Caused by" not in error and "Traceback" not in error
    logged = lake_copy.root + "/_logs/misbench.log"
    with open(logged, encoding="utf-8") as handle:
        log_text = handle.read()
    assert "WARN TaskSetManager: Lost task" in log_text  # Spark's own log4j output
    assert "Traceback (most recent call last)" in log_text  # misbench's detail of the failure
    if signal_name == "SIGSEGV":
        assert "Fatal Python error: Segmentation fault" in log_text  # faulthandler's dump
    assert f"Full traceback and Spark's log: {logged}" in error

    kept = evidence_of_first_claim(lake_copy)
    assert len(kept) == 2  # the chunk committed before the crash
    rerun = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = evidence_of_first_claim(lake_copy)
    assert len(after) == 24
    for evidence_id, row in kept.items():
        if row.error is None:
            assert after[evidence_id].text == row.text
    # progress lines reached the terminal while the passes ran
    assert "generate styles: " in rerun.stderr and "rows (" in rerun.stderr and "tokens/s" in rerun.stderr
