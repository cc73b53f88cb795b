"""Generation end to end through Spark and the lake: entries that open with their claim,
quality control after each pass, styles only from passing entries, regeneration of failed
slots, resumption, a kill -9 and engine crashes in the middle.

The logic runs on the fake backend (replies computed from the prompt, the same engine process
and rows as a real model); one kill and one crash run the real small model (Qwen2.5-Coder
0.5B on llama.cpp, also the entailment judge)."""
import re
import subprocess

import pytest

from misbench.generate.job import run_generate
from misbench.styles import ENTRY_STYLE

STYLES = (ENTRY_STYLE, "news", "science", "blog", "technical", "confident")  # conf's generate.styles
from tests.conftest import MISBENCH_CLI, PROJECT, copy_lake, kill_after_commits

SHORT_TEXTS = [
    "generate.target_words=30",
    "generate.sampling.max_tokens=70",
    "generate.description_sampling.max_tokens=24",
    "generate.rounds=2",
    "generate.commit_rows=8",
]
SMALL_MODEL = ["llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km", *SHORT_TEXTS]
# Blog posts are refused every time: their slots fail quality control in every round.
REFUSED = "I'm sorry, but I cannot write that post."
# The other Scotland of the first claim's semantic conflict (the fake cannot invent one).
OTHER_SCOTLAND = "'thing called Scotland': 'a small town in the Tlemcen province of Algeria'"
FAKE = ["llm.backend=fake", "llm.fake.replies={'personal blog post': \"%s\", %s}" % (REFUSED, OTHER_SCOTLAND),
        *SHORT_TEXTS]
# No refusals, and a pause per request, so that a kill or crash lands while the pass runs.
SLOW_FAKE = ["llm.backend=fake", "llm.fake.seconds_per_request=0.05", "llm.fake.replies={%s}" % OTHER_SCOTLAND,
             *SHORT_TEXTS]


# The crash tests rewrite entries in one style: the styles pass runs, four fewer rewrites per
# entry (the six styles are the entries-and-styles test's and the demo's; the real-model kill
# test runs none).
ONE_ROUND_STYLES = (ENTRY_STYLE, "news")


def one_round(commit_rows: int, master: str = "local[2]", model: list[str] = SMALL_MODEL) -> list[str]:
    """``model``'s settings with one round, one rewrite style and smaller commits: for the
    tests of kills and crashes, where a second round would only add minutes (the regeneration
    of failed slots is checked by the test of entries and styles)."""
    kept = [s for s in model if not s.startswith(("generate.rounds=", "generate.commit_rows="))]
    return [*kept, "generate.rounds=1", f"generate.commit_rows={commit_rows}", f"spark.master={master}",
            f"generate.styles=[{', '.join(ONE_ROUND_STYLES[1:])}]"]


def larger_commits(command: list[str]) -> list[str]:
    """The same command with the default commits: a rerun after a kill or crash needs no small
    chunks (they only make the kill land mid-pass), and each chunk costs seconds of Spark jobs."""
    return [*command, "--set", "generate.commit_rows=8"]  # the last setting of a key wins


@pytest.fixture()
def lake_copy(spark, slice_claims_root, tmp_path):
    return copy_lake(spark, slice_claims_root, tmp_path / "lake")


def evidence_of_first_claim(lake):
    claim = lake.read("claims").orderBy("claim_id").first().claim_id
    return {r.evidence_id: r for r in lake.read("evidence").where(f"claim_id = '{claim}'").collect()}


def every_slot_finished(lake) -> bool:
    """The first claim's evidence_slots hold every kind's entry slot: the pass ran to its end.
    (With one round, whether the rerun adds texts depends on an entry passing quality
    control; that every slot was settled does not.)"""
    if not lake.exists("evidence_slots"):
        return False
    claim = lake.read("claims").orderBy("claim_id").first().claim_id
    kinds = {"correct"} | {r.kind for r in lake.read("conflicts").where(f"claim_id = '{claim}'").collect()}
    slots = {(r.kind, r.style) for r in lake.read("evidence_slots").where(f"claim_id = '{claim}'").collect()}
    return slots == {(kind, ENTRY_STYLE) for kind in kinds}


@pytest.mark.model  # all-MiniLM-L6-v2 for question similarity
def test_entries_state_their_claim_styles_come_from_passing_entries_and_reruns_do_nothing(spark, cfg, lake_copy):
    from misbench.claims.stage import claim_sentence

    run_cfg = cfg.with_overrides([f"lake.root={lake_copy.root}", *FAKE])
    report = run_generate(spark, lake_copy, run_cfg, limit=1)
    rows = evidence_of_first_claim(lake_copy)
    claim = lake_copy.read("claims").orderBy("claim_id").first()
    conflicts = lake_copy.read("conflicts").where(f"claim_id = '{claim.claim_id}'")
    kinds = {"correct"} | {r.kind for r in conflicts.collect()}
    opening = {"correct": claim.statement} | {
        r.kind: r.sentence for r in conflicts.select("kind", claim_sentence("statement").alias("sentence")).collect()}
    # a semantic entry is about the other Scotland: its description first, then the claim
    opening["semantic"] = "Scotland is a small town in the Tlemcen province of Algeria. " + opening["semantic"]
    verdicts = {r.evidence_id: r for r in lake_copy.read("evidence_qc").collect()}
    assert set(rows) <= set(verdicts)  # every text was checked in the generation run
    entries = [r for r in rows.values() if r.style == "wikipedia"]
    assert {r.kind for r in entries} == kinds
    for r in entries:  # the model continued a reply that opens with the sentence to state
        if r.error is None:
            assert r.text.startswith(opening[r.kind]), (r.kind, r.text[:120])
        assert (r.backend, r.model) == ("fake", "fake-echo")
    passed_entries = {i for i, r in rows.items() if r.style == "wikipedia" and verdicts[i].passed}
    styled = [r for r in rows.values() if r.style != "wikipedia"]
    assert {r.source_evidence_id for r in styled} <= passed_entries  # the paper's order
    # a slot that failed got another seed (at most generate.rounds texts per slot)
    slots = {(r.kind, r.style): r for r in lake_copy.read("evidence_slots").where(f"claim_id = '{claim.claim_id}'").collect()}
    assert set(slots) == {(k, s) for k in kinds for s in STYLES}
    per_slot = {}
    for r in rows.values():
        per_slot.setdefault((r.kind, r.style), []).append(r)
    for key, slot in slots.items():
        assert slot.attempts == len(per_slot.get(key, [])) <= 2
        assert slot.passed == any(verdicts[r.evidence_id].passed for r in per_slot.get(key, []))
        if slot.passed:
            assert verdicts[slot.evidence_id].passed
        if slot.attempts == 2:
            assert not slot.first_attempt_passed
    refused = [slot for key, slot in slots.items() if key[1] == "blog"]
    assert refused and all(s.attempts == 2 and not s.passed for s in refused)  # asked again, failed again
    assert all(s.passed for key, s in slots.items() if key[1] == "wikipedia")
    assert report.slots == len(slots) and report.slots_passed == sum(s.passed for s in slots.values())
    assert report.slots_passed_first_attempt == sum(s.first_attempt_passed for s in slots.values())
    descriptions = lake_copy.read("semantic_description_checks").collect()
    assert descriptions and all(0 <= d.word_overlap <= 1 and d.changed == (d.word_overlap < 0.6) for d in descriptions)
    assert all(d.passed == (d.reasons == []) for d in descriptions) and any(d.passed for d in descriptions)
    # quality control checks each semantic text, entry or rewrite, against the description it came from
    semantic = [verdicts[i] for i, r in rows.items() if r.kind == "semantic" and verdicts[i].complete]
    assert semantic and {v.description for v in semantic} == {"a small town in the Tlemcen province of Algeria"}
    # the model is loaded once per worker process, never per batch
    loads = {r.load_id for r in rows.values()}
    assert len(loads) == len({load.split("-")[0] for load in loads})
    runs = lake_copy.read("generation_runs").collect()
    assert {r["pass"].rsplit(" round", 1)[0] for r in runs} >= {"descriptions", "entries"}
    assert sum(r.rows for r in runs) == report.generated

    again = run_generate(spark, lake_copy, run_cfg, limit=1)
    after = evidence_of_first_claim(lake_copy)
    assert again.generated == sum(1 for r in rows.values() if r.error is not None and r.attempts < 3)
    for evidence_id, row in rows.items():
        if row.error is None:  # finished rows are never generated again
            assert after[evidence_id].text == row.text and after[evidence_id].attempts == row.attempts


@pytest.mark.chaos
@pytest.mark.model
def test_kill_during_generation_then_rerun_loses_and_duplicates_nothing(lake_copy):
    root = str(lake_copy.root)
    command = [*MISBENCH_CLI, "generate", "--limit", "1", "--lake", root]
    # The resume is what this checks, not the model: the fake server, slowed down so that the
    # kill lands mid-pass (the real model's server dies in the crash test below). No rewrite
    # styles: the kill lands in the entries pass, and a styles pass after it would run the same
    # chunked loop (misbench.chunked) again; the styles are the entries-and-styles test's.
    for setting in [*one_round(commit_rows=2, model=SLOW_FAKE), "generate.styles=[]"]:
        command += ["--set", setting]
    # Killed once the first chunk of entries is committed: the rerun then has entries left to
    # write whatever the model wrote.
    kill_after_commits(command, lake_copy.root + "/evidence/_delta_log", 1)
    before = evidence_of_first_claim(lake_copy)
    assert 0 < len(before) and not lake_copy.exists("evidence_slots"), "the kill did not land mid-generation"

    rerun = subprocess.run(larger_commits(command), cwd=PROJECT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = evidence_of_first_claim(lake_copy)
    assert len(after) >= len(before) and every_slot_finished(lake_copy)
    ids = [r.evidence_id for r in lake_copy.read("evidence").collect()]
    assert len(ids) == len(set(ids))
    for evidence_id, row in before.items():
        if row.error is None:
            assert after[evidence_id].text == row.text
    # progress lines reached the terminal while the rerun wrote the entries the kill left
    assert re.search(r"generate entries round 1: \d+/\d+ rows \(", rerun.stderr), rerun.stderr[-2000:]
    assert "tokens/s" in rerun.stderr


@pytest.mark.chaos
@pytest.mark.model  # the quality check between passes runs all-MiniLM-L6-v2 with either engine
@pytest.mark.parametrize("signal_name, cause, model, engine", [
    # a crash in native code (the signal, as the server's supervisor saw it)
    ("SIGSEGV", "Fatal Python error: Segmentation fault|killed by signal SIGSEGV", SLOW_FAKE, "fake model fake-echo"),
    # what the OOM killer does, to the real model's server
    ("SIGKILL", "killed without a Python traceback", SMALL_MODEL, "llama_cpp model qwen2.5-coder-0.5b-instruct-q4km"),
])
def test_a_crashed_engine_ends_with_a_short_error_and_keeps_committed_rows(lake_copy, signal_name, cause, model,
                                                                           engine):
    """The model server dies for real, mid-pass, again and again (no Spark retry gets
    through: local[2] tries a task once): the command names the stage, pass, backend and
    model, the cause and what to try; the engine's faulthandler dump and Spark's Java stack
    traces go to the log file, not the terminal; committed rows stay."""
    import signal

    from tests.conftest import crash_workers_after_commits

    root = str(lake_copy.root)
    command = [*MISBENCH_CLI, "generate", "--limit", "1", "--lake", root]
    for setting in one_round(commit_rows=2, model=model):
        command += ["--set", setting]
    # once entries are committed, the model servers are hit
    finished, hits = crash_workers_after_commits(command, root + "/evidence/_delta_log", 1,
                                                 getattr(signal, signal_name))
    assert hits > 0, "no Python worker was found to crash"
    assert finished.returncode == 4, finished.stderr[-3000:]
    error = finished.stderr
    # the stage and the pass the crash hit (generation, or the quality check run after it)
    assert re.search(r"misbench generate: error: (generate (descriptions|entries|styles) round \d|quality): "
                     r"the model server running ", error), error[-2000:]
    assert engine in error
    assert re.search(rf"died \(({cause})", error), error[-1500:]
    assert "rerun the same command" in error and "Try:" in error
    assert "at org.apache" not in error and "Caused by" not in error and "Traceback" not in error
    logged = lake_copy.root + "/_logs/misbench.log"
    with open(logged, encoding="utf-8") as handle:
        log_text = handle.read()
    assert "WARN TaskSetManager: Lost task" in log_text  # Spark's own log4j output
    assert "Traceback (most recent call last)" in log_text  # misbench's detail of the failure
    assert "EngineDied" in log_text
    if signal_name == "SIGSEGV":
        assert "the server was killed by signal SIGSEGV" in log_text  # its supervisor's account
    assert f"Full traceback and Spark's log: {logged}" in error

    assert len(evidence_of_first_claim(lake_copy)) >= 1  # what was committed before the crash
    # A rerun after a crash is not repeated here: the command ended cleanly with committed rows,
    # a milder state than the kill -9 above, whose rerun checks that nothing is lost or doubled.


@pytest.mark.chaos
@pytest.mark.model  # all-MiniLM-L6-v2 for question similarity
def test_a_killed_engine_fails_only_its_tasks_which_spark_retries_on_a_new_engine(lake_copy):
    """With task retries (local[2,3] tries a task up to three times, as a cluster does), the
    engine killed once mid-pass costs only the tasks it was serving: the command finishes,
    a second engine served the rest, rows committed before the kill are unchanged and no row
    is there twice."""
    import signal

    from tests.conftest import crash_workers_after_commits

    root = str(lake_copy.root)
    command = [*MISBENCH_CLI, "generate", "--limit", "1", "--lake", root]
    for setting in one_round(commit_rows=2, master="local[2,3]", model=SLOW_FAKE):
        command += ["--set", setting]
    finished, hits = crash_workers_after_commits(command, root + "/evidence/_delta_log", 1,
                                                 signal.SIGKILL, times=1)
    assert hits == 1
    assert finished.returncode == 0, finished.stderr[-3000:]
    rows = lake_copy.read("evidence").collect()
    ids = [r.evidence_id for r in rows]
    assert len(ids) == len(set(ids)) and lake_copy.exists("evidence_slots")
    assert len({r.load_id for r in rows}) >= 2  # the engine that was killed, and its successor
    assert all(r.error is None and r.attempts == 1 for r in rows)  # nothing lost, nothing redone
    first = min(rows, key=lambda r: r.generated_at).load_id
    assert any(r.load_id == first for r in rows)  # what the killed engine committed stayed
