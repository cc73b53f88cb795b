"""Shared fixtures: one local Spark session for the test run, a fresh lake per test, the real
Wikidata slice shipped in tests/data (see its README for provenance)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
TEST_DATA = PROJECT / "tests" / "data"
SLICE_JSON = TEST_DATA / "wikidata-dump-slice-49.json"
SLICE_BZ2 = TEST_DATA / "wikidata-dump-slice-49.json.bz2"

# Facts of the real slice, counted independently (see tests/data/README.md).
SLICE_ENTITIES = 49
SLICE_VALUE_TRIPLES = 4277  # statements whose main snak has a value
SLICE_STATEMENTS = 4282  # all statements: 5 more are 'unknown value' / 'no value'
SLICE_ENTITY_VALUED = 1965


# Every model server the tests start, in process or through CLI subprocesses, registers here, apart
# from any misbench run of the user's on this machine; the session stops them all at its end.
ENGINES = tempfile.mkdtemp(prefix="misbench-test-engines-")
os.environ["MISBENCH_ENGINE_DIR"] = ENGINES


# Fixtures that cost a minute or more, and the markers that keep a test using them out of the
# fast tier: a test that asks for one without such a marker is a collection error.
EXPENSIVE_FIXTURES = {"run_all_lake": {"e2e"}, "slice_claims_root": {"slow", "model", "chaos", "e2e"},
                      "bench_root": {"slow", "model", "chaos", "e2e"}}


def pytest_collection_modifyitems(config, items):
    wrong = []
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        for fixture, allowed in EXPENSIVE_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()) and not marks & allowed:
                wrong.append(f"{item.nodeid} uses {fixture} but is marked none of {sorted(allowed)}")
    if wrong:
        raise pytest.UsageError("tests that belong outside the fast tier:\n" + "\n".join(wrong))


def require_slice() -> None:
    if not SLICE_JSON.is_file():
        pytest.fail(f"the real Wikidata slice is missing: {SLICE_JSON}")


@pytest.fixture(scope="session")
def test_config_overrides(tmp_path_factory):
    return [
        "spark.master=local[2]",
        f"lake.root={tmp_path_factory.mktemp('lake-default')}",
        "llm.server.idle_seconds=300",
        *settings_to_try(),
    ]


def settings_to_try() -> list[str]:
    """More settings for one test run, to try one (MISBENCH_TEST_SET="key=value;key=value"):
    in every test's configuration and in run-all's. The backend stays as each test sets it (a
    `model` test must run its real model)."""
    return [s for s in os.environ.get("MISBENCH_TEST_SET", "").split(";") if s and not s.startswith("llm.backend")]



def check_counts(spark, lake, cfg, checks_file, **parameters) -> dict[str, int]:
    """Each query of a checks file (notebooks/*.sql: one count per query, named by its alias)
    run over ``lake``, its parameters filled in from ``cfg`` as `misbench sql` does (or as
    given)."""
    from misbench.sql_parameters import run_sql

    text = "\n".join(line for line in checks_file.read_text().splitlines() if not line.startswith("--"))
    lake.register_views()
    return {query.split(" AS ")[1].split()[0]: run_sql(spark, cfg, query, **parameters).first()[0]
            for query in (q.strip() for q in text.split(";")) if query}

@pytest.fixture(scope="session")
def cfg(test_config_overrides):
    from misbench.config import load_config

    return load_config("local", test_config_overrides)


@pytest.fixture(scope="session")
def spark(cfg):
    from misbench.spark import get_spark

    session = get_spark(cfg)
    yield session
    session.stop()
    from misbench.llm.servers import stop_servers

    stop_servers(cfg.get("llm"))  # every server the tests started (their registry is ENGINES)


@pytest.fixture()
def lake_root(tmp_path) -> Path:
    return tmp_path / "lake"


@pytest.fixture()
def lake(spark, lake_root):
    from misbench.lake import DeltaRsLake

    return DeltaRsLake(spark, root=str(lake_root))


@pytest.fixture()
def run_cfg(cfg, lake_root):
    return cfg.with_overrides([f"lake.root={lake_root}"])


def copy_lake(spark, source, destination):
    """A fresh copy of a lake built once by a module fixture, for a test to change."""
    import shutil

    from misbench.lake import DeltaRsLake

    shutil.copytree(source, destination)
    return DeltaRsLake(spark, root=str(destination))


def _commits(delta_log: str) -> int:
    return len([f for f in os.listdir(delta_log) if f.endswith(".json")]) if os.path.isdir(delta_log) else 0


# misbench as the tests start it in a process of its own. Such a process lives 10 to 60
# seconds, too short for the JVM's optimising compiler to pay back its compile time on 2 cores:
# C1 only (a JIT setting, nothing Spark computes depends on it) made such a command about a
# sixth faster. The tests' own session, 20 minutes long, is slower with it and keeps the default.
MISBENCH_CLI = [sys.executable, "-m", "misbench.cli",
                "--set", "spark.conf.spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1"]


def kill_after_commits(command, delta_log: str, commits: int, timeout_s: float = 300, poll_s: float = 0.2) -> None:
    """Start a misbench command, SIGKILL its whole process group once ``delta_log`` holds
    ``commits`` commits more than before it started (or the command ends, or the timeout
    passes)."""
    import os
    import signal
    import subprocess
    import time

    commits += _commits(delta_log)  # a table earlier stages wrote already has commits
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    job = subprocess.Popen(command, cwd=PROJECT, env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout_s
    while job.poll() is None and time.time() < deadline:
        if _commits(delta_log) >= commits:
            break
        time.sleep(poll_s)
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
    job.wait()


def rerun_in_this_process(command, *more: str) -> tuple[int, str]:
    """Run again, in the tests' own process, a misbench command a test killed: the same CLI
    (``misbench.cli.main``, same arguments) on the tests' warm Spark session. A fresh process
    would spend a JVM start and its warm-up (about a third of a rerun, measured) on what the
    killed one already proves: the command runs as its own process. What differs from a
    process: the command's ``spark.*`` settings have no effect (the session exists, local[2]
    as theirs); misbench's progress lines reach neither this stderr nor the lake's log (the
    tests' logging setup comes first), so a rerun that checks them runs as a process (the
    real-model generation kill's); Spark's own log is the session's. Returns (exit code,
    stderr)."""
    import contextlib
    import io

    from misbench.cli import main

    assert list(command[:len(MISBENCH_CLI)]) == MISBENCH_CLI, command[:len(MISBENCH_CLI)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([*command[len(MISBENCH_CLI):], *more])  # the JIT setting: no new JVM here
    return code, err.getvalue()


def server_processes() -> list[int]:
    """The model servers the tests started (registry ENGINES): the children of their
    supervisors (misbench.llm.servers)."""
    import psutil

    pids = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if "misbench.llm.servers" in command and ENGINES in command:
            with contextlib.suppress(psutil.Error):
                pids += [child.pid for child in process.children()]
    return pids


def crash_workers_after_commits(command, delta_log: str, commits: int, signal_number: int,
                                timeout_s: float = 300, times: int = 0):
    """Run a misbench command; once ``delta_log`` holds ``commits`` commits, send
    ``signal_number`` to the processes that hold its model (again every half second, or only
    ``times`` times) until the command ends: the model servers. Returns the finished process (stdout, stderr)
    and how many were hit. ``commits`` counts this command's commits, as in kill_after_commits."""
    import os
    import subprocess
    import time

    commits += _commits(delta_log)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    job = subprocess.Popen(command, cwd=PROJECT, env=env, start_new_session=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import threading

    output = {}
    reader = threading.Thread(target=lambda: output.update(zip(("stdout", "stderr"), job.communicate())))
    reader.start()
    deadline = time.time() + timeout_s
    hits = 0
    while job.poll() is None and time.time() < deadline:
        committed = _commits(delta_log) >= commits
        if committed and (not times or hits < times):
            for pid in server_processes():
                try:
                    os.kill(pid, signal_number)
                    hits += 1
                except ProcessLookupError:
                    pass
        time.sleep(0.5)
    if job.poll() is None:
        os.killpg(job.pid, 9)
    reader.join()
    return subprocess.CompletedProcess(command, job.returncode, output.get("stdout", ""),
                                       output.get("stderr", "")), hits


@pytest.fixture(scope="session")
def slice_claims_root(spark, cfg, tmp_path_factory):
    """Ingest and claims of the real slice, once per test run: tests copy it (copy_lake)."""
    from misbench.claims.job import run_claims
    from misbench.ingest.job import run_ingest
    from misbench.lake import DeltaRsLake

    require_slice()
    root = tmp_path_factory.mktemp("slice-claims") / "lake"
    lake = DeltaRsLake(spark, root=str(root))
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    run_ingest(spark, lake, run_cfg, [str(SLICE_JSON)])
    run_claims(spark, lake, run_cfg)
    return root


@pytest.fixture(scope="session")
def bench_root(spark, cfg, slice_claims_root, tmp_path_factory):
    """The real slice's claims, hand-written texts, then misbench bench."""
    from misbench.bench.job import run_bench
    from tests.bench.handmade import FAILING, handmade_texts

    root = tmp_path_factory.mktemp("bench") / "lake"
    lake = copy_lake(spark, slice_claims_root, root)
    handmade_texts(spark, lake, FAILING)
    run_bench(spark, lake, cfg.with_overrides([f"lake.root={root}"]))
    return root


RUN_ALL_SMALL = [
    "spark.master=local[2]",
    "llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km",
    "generate.target_words=30", "generate.sampling.max_tokens=70", "generate.description_sampling.max_tokens=24",
    # one rewrite style: run-all's end to end needs the styles pass, not five real-model
    # rewrites per entry (the six styles are the entries-and-styles test's and the demo's)
    "generate.rounds=1", "generate.styles=[news]", "evaluate.limit=2", "evaluate.rtd.reconstruct_words=25",
    "hoax.evaluate.justification_max_tokens=60", "hoax.evaluate.json_max_tokens=90",
]


def run_all(root, *extra) -> tuple[int, str]:
    """misbench run-all on the real slice, one claim's texts, the smallest shipped model."""
    import contextlib
    import io

    from misbench.cli import main

    settings = [part for setting in [*RUN_ALL_SMALL, *settings_to_try()] for part in ("--set", setting)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--lake", str(root), *settings, "run-all", "--dump", str(SLICE_BZ2), "--limit", "1", *extra])
    return code, out.getvalue()


@pytest.fixture(scope="session")
def run_all_lake(spark, tmp_path_factory):
    """A lake made by one run-all (shared by the run-all and the notebook tests)."""
    require_slice()
    root = tmp_path_factory.mktemp("run-all") / "lake"
    code, out = run_all(root)
    return root, code, out
