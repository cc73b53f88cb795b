"""One engine process per GPU (per machine on CPU), with the smallest shipped model: every client
shares it, concurrent batches run as one engine call, a dead engine fails its callers with a
clear error and the next client starts a new one, another model replaces it, an idle one exits."""
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import asdict

import pytest

from misbench.config import load_config
from misbench.llm import EngineBroken, SamplingParams, worker_backend
from misbench.llm.engine_server import EngineClient, EngineDied, _alive, stop_engines

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"
SHORT = SamplingParams(temperature=0.0, max_tokens=6)


def settings(folder, *extra):
    return load_config("local", [f"llm.llama_cpp.model={MODEL}", "llm.llama_cpp.n_ctx=1024",
                                 f"llm.engine_server.dir={folder}", *extra]).get("llm")


def ask(text):
    return [{"role": "user", "content": text}]


def wait_until_running(engine, timeout_s: float = 60) -> None:
    """Until the engine process reports a call under way (its ``running`` count)."""
    deadline = time.time() + timeout_s
    while engine.info()["running"] == 0:
        assert time.time() < deadline, "the engine never started the call"
        time.sleep(0.05)


@pytest.fixture()
def llm(tmp_path):
    llm = settings(tmp_path)
    yield llm
    stop_engines(llm)


@pytest.mark.model
def test_clients_share_one_engine_and_concurrent_batches_run_together(llm, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as PySpark sets it for a task of one core
    first = worker_backend(llm)
    # the engine serves every task of the machine: it does not inherit one task's share
    assert b"OMP_NUM_THREADS=" not in open(f"/proc/{first.pid}/environ", "rb").read()
    assert isinstance(first, EngineClient) and first.slot == "cpu"
    assert first.load_id.startswith(f"{first.pid}-") and first.pid != os.getpid()
    results, errors = {}, []
    # A long call holds the engine while the three tasks below send their batches: they wait
    # together, so they must run as one engine call after it.
    busy = threading.Thread(target=first.generate, args=(
        [ask("Count from one to one hundred in words.")], SamplingParams(temperature=0.0, max_tokens=160, min_tokens=160)))
    busy.start()
    wait_until_running(first)  # sent and running (it takes several seconds more)

    def client(name):
        try:  # each thread a task of its own: a new client, the same engine
            engine = worker_backend(llm)
            results[name] = (engine.load_id, engine.generate([ask(f"Say the word {name}.")] * 3, SHORT))
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=client, args=(name,)) for name in ("apple", "pear", "plum")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    busy.join()
    assert not errors
    assert {load_id for load_id, _ in results.values()} == {first.load_id}  # loaded once
    assert all(len(texts) == 3 and all(g.error is None and g.text for g in texts) for _, texts in results.values())
    info = first.info()
    assert info["requests"] == 1 + 9 and info["calls"] == 1 + 1  # batches waiting together share a call
    assert info["busy_s"] > 0
    scores = first.option_logprobs_many([ask("Is Paris in France? Answer Yes or No.")] * 2, ["Yes", "No"])
    assert len(scores) == 2 and all(s[0] > s[1] for s in scores)


@pytest.mark.chaos
@pytest.mark.model
def test_a_killed_engine_fails_its_callers_and_the_next_client_starts_another(llm):
    engine = worker_backend(llm)
    failure = []

    def long_call():
        try:
            engine.generate([ask("Count from one to two hundred in words.")],
                            SamplingParams(temperature=0.0, max_tokens=400, min_tokens=400))
        except EngineDied as error:
            failure.append(str(error))

    caller = threading.Thread(target=long_call)
    caller.start()
    wait_until_running(engine)  # the call is in flight
    os.kill(engine.pid, signal.SIGKILL)
    caller.join(timeout=60)
    assert failure and f"engine (pid {engine.pid})" in failure[0] and "Spark retries" in failure[0]
    assert "loaded llama_cpp" in failure[0]  # the engine's log tail comes with it
    again = worker_backend(llm)
    assert again.pid != engine.pid and again.load_id != engine.load_id
    assert again.generate([ask("Say yes.")], SHORT)[0].error is None
    # an old client whose engine went away between calls sends its next call to the new one
    assert engine.generate([ask("Say yes.")], SHORT)[0].error is None and engine.pid == again.pid


@pytest.mark.model
def test_another_model_replaces_the_engine_and_an_idle_engine_exits(tmp_path):
    first = worker_backend(settings(tmp_path, "llm.engine_server.idle_seconds=300"))
    # other tasks per machine: the same engine (generation and a judge of one model share it)
    assert worker_backend(settings(tmp_path, "llm.llama_cpp.workers=7")).pid == first.pid
    other = worker_backend(settings(tmp_path, "llm.engine_server.idle_seconds=6", "llm.llama_cpp.n_ctx=512"))
    try:
        assert other.pid != first.pid
        assert not _alive(first.pid)  # never two engines on one slot
        deadline = time.time() + 60
        while time.time() < deadline and (tmp_path / "cpu.json").exists():
            time.sleep(1)
        assert not (tmp_path / "cpu.json").exists(), "the idle engine did not exit"
    finally:
        stop_engines(settings(tmp_path))


def _run_failing_batch(error: Exception) -> None:
    from misbench.llm.engine_server import _Job, _run_batch

    class Failing:  # an engine that fails as a GPU engine can (no such failure runs here)
        def generate(self, prompts, params):
            raise error

    job = _Job(("generate", [ask("Say yes.")], asdict(SHORT)))
    _run_batch(Failing(), [job])
    os._exit(0 if job.reply[0] == "error" else 1)  # replied: the engine process goes on


@pytest.mark.parametrize("error, exit_code", [(EngineBroken("inside the engine"), 3), (RuntimeError("one call"), 0)])
def test_an_engine_that_broke_ends_its_process_and_a_failed_call_does_not(error, exit_code):
    # Ending the process is what turns a broken engine into EngineDied for its callers, a retry
    # by Spark and a new engine (the killed-engine test above); a call's own error is replied.
    process = multiprocessing.get_context("fork").Process(target=_run_failing_batch, args=(error,))
    process.start()
    try:
        process.join(timeout=60)
        assert process.exitcode == exit_code
    finally:
        process.kill()


def test_an_engine_that_died_loading_is_not_blamed_for_an_earlier_engines_crash(tmp_path):
    from misbench.llm.engine_server import _log_tail

    log = tmp_path / "cpu.log"
    log.write_text("t engine 11 starting on cpu\nFatal Python error: Segmentation fault\n")
    start = log.stat().st_size  # where the next engine begins to write
    with open(log, "a") as handle:
        handle.write("t engine 12 loading the model\n")
    assert "Fatal Python error" not in _log_tail(log, pid=12, offset=start)
    assert _log_tail(log, pid=12, offset=start) == "t engine 12 loading the model"
    assert "Fatal Python error: Segmentation fault" in _log_tail(log, pid=11)


@pytest.mark.model
def test_a_refused_prompt_fails_only_its_own_batch_of_a_shared_call(tmp_path):
    """The engine runs several tasks' batches as one call: a prompt the engine refuses (over
    its context) fails the batch that sent it, not the others that shared the call."""
    from misbench.llm import load_backend
    from misbench.llm.engine_server import _Job, _run_batch

    engine = load_backend(settings(tmp_path, "llm.llama_cpp.n_ctx=512"))
    too_long = ask("word " * 1500)
    with pytest.raises(Exception):
        engine.option_logprobs_many([too_long], ["Yes", "No"])  # refused on its own
    fine = _Job(("option_logprobs_many", [ask("Is Paris in France? Answer Yes or No.")] * 2, ["Yes", "No"]))
    refused = _Job(("option_logprobs_many", [ask("Is Rome in Italy?"), too_long], ["Yes", "No"]))
    _run_batch(engine, [fine, refused])
    assert fine.reply[0] == "ok" and len(fine.reply[1]) == 2 and all(s[0] > s[1] for s in fine.reply[1])
    assert refused.reply[0] == "error"


@pytest.mark.model
def test_a_gpu_task_frees_its_gpu_of_an_idle_engine_before_another_model_loads(tmp_path, monkeypatch):
    """The NLI scorer of quality control loads beside no engine: an engine an earlier pass or
    job task of the same command left on the task's GPU is stopped first; one on another GPU
    stays, and so does one another running command started."""
    from misbench.llm import engine_server
    from misbench.llm.engine_server import OWNER_VARIABLE, free_task_gpus

    import subprocess
    import sys

    llm = settings(tmp_path)
    # the engines are started as another command's, one that still runs (its process lives)
    another = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setenv(OWNER_VARIABLE, f"{another.pid}-another")
    try:
        cpu_engine = worker_backend(llm)  # not in a GPU task: llama.cpp on the CPU is left alone
        assert free_task_gpus(llm) is False and _alive(cpu_engine.pid)
        monkeypatch.setattr(engine_server, "task_gpus", lambda: ["1"])  # as Spark gives GPU 1
        other_gpu = worker_backend(llm)
        monkeypatch.setattr(engine_server, "task_gpus", lambda: ["0"])
        this_gpu = worker_backend(llm)
        assert this_gpu.slot == "gpu0" and other_gpu.slot == "gpu1" and this_gpu.pid != other_gpu.pid
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-this")  # this command sees the other's
        assert free_task_gpus(llm) is False and _alive(this_gpu.pid)
        with pytest.raises(RuntimeError, match="another running misbench command"):  # nor for another model
            worker_backend(settings(tmp_path, "llm.llama_cpp.n_ctx=512"))
        assert _alive(this_gpu.pid) and worker_backend(llm).pid == this_gpu.pid  # the same model: shared
        monkeypatch.setenv(OWNER_VARIABLE, f"{another.pid}-another")  # the command that started them
        assert free_task_gpus(llm) is True
        assert not _alive(this_gpu.pid) and not (tmp_path / "gpu0.json").exists()
        assert _alive(other_gpu.pid) and (tmp_path / "gpu1.json").exists()
        assert free_task_gpus(llm) is False  # already free
        # the next LLM call on that GPU starts a new engine
        assert this_gpu.generate([ask("Say yes.")], SHORT)[0].error is None and _alive(this_gpu.pid)
        # an engine an earlier command of this same process left is this process's to replace
        monkeypatch.setattr(engine_server, "task_gpus", lambda: ["2"])
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-earlier")
        earlier = worker_backend(llm)
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-later")
        assert worker_backend(settings(tmp_path, "llm.llama_cpp.n_ctx=512")).pid != earlier.pid
    finally:
        another.kill()
        stop_engines(llm)


@pytest.mark.model
def test_an_engine_ends_when_the_command_that_started_it_has_died(tmp_path, monkeypatch):
    """A command killed before it could stop its engines (SIGKILL) leaves no engine of its own
    registry running on: the engine sees its owner gone and exits, unregistered."""
    import subprocess
    import sys

    from misbench.llm.engine_server import OWNER_VARIABLE, PRIVATE_REGISTRY_VARIABLE

    command = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setenv(OWNER_VARIABLE, f"{command.pid}-killed")
    monkeypatch.setenv(PRIVATE_REGISTRY_VARIABLE, "1")  # the command's own registry, as the CLI makes
    llm = settings(tmp_path)
    try:
        engine = worker_backend(llm)
        assert engine.generate([ask("Say yes.")], SHORT)[0].error is None  # serving while its command runs
        command.kill()
        command.wait()
        deadline = time.time() + 60
        while _alive(engine.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert not _alive(engine.pid) and not (tmp_path / "cpu.json").exists()
    finally:
        command.kill()
        stop_engines(llm)
