"""The model servers misbench starts, one per GPU slot (one per machine on CPU): every client
shares its slot's server, a dead server fails its callers with a clear error and the next client
starts another, another model replaces it, an idle one exits, a GPU task can free its GPU.
The plumbing runs on the fake server (a real server process, no weights); what only a real
model shows runs the smallest shipped one."""
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from misbench.config import load_config
from misbench.llm import EngineDied, SamplingParams
from misbench.llm.client import RowFailed, model_client
from misbench.llm.servers import OWNER_VARIABLE, PRIVATE_REGISTRY_VARIABLE, alive, log_tail, server_command, stop_servers

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"
SHORT = SamplingParams(temperature=0.0, max_tokens=6)


def fake(folder, *extra):
    return load_config("local", ["llm.backend=fake", f"llm.server.dir={folder}", *extra]).get("llm")


def small_model(folder, *extra):
    return load_config("local", [f"llm.llama_cpp.model={MODEL}", "llm.llama_cpp.n_ctx=512",
                                 f"llm.server.dir={folder}", *extra]).get("llm")


def command_of(process) -> str:
    """A process's command line; empty for one that ended (a zombie not yet reaped has none)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def ask(text):
    return [{"role": "user", "content": text}]


@pytest.fixture()
def folder(tmp_path):
    yield tmp_path
    stop_servers(fake(tmp_path))


def test_clients_share_one_server_that_serves_every_task_of_the_machine(folder, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as PySpark sets it for a task of one core
    first = model_client(fake(folder), "test")
    assert first.entry["slot"] == "cpu" and first.entry["server_pid"] != os.getpid()
    # the server serves every task of the machine: it does not inherit one task's share
    assert "OMP_NUM_THREADS" not in psutil.Process(first.entry["server_pid"]).environ()
    results, errors = {}, []

    def task(name):
        try:  # each thread a task of its own: a new client, the same server
            client = model_client(fake(folder, "llm.client.max_concurrency=2"), "test")
            results[name] = (client.load_id, client.generate([ask(f"Say the word {name} please.")] * 3, SHORT))
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=task, args=(name,)) for name in ("apple", "pear", "plum")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert {load_id for load_id, _ in results.values()} == {first.load_id}  # started once
    assert all(len(texts) == 3 and all(g.error is None and g.text for g in texts) for _, texts in results.values())


@pytest.mark.chaos
def test_a_killed_server_fails_its_callers_and_the_next_client_starts_another(folder):
    llm = fake(folder, "llm.fake.seconds_per_request=0.5")
    client = model_client(llm, "test")
    failure = []

    def long_call():
        try:
            client.generate([ask(f"Question {i}.") for i in range(20)], SHORT)
        except EngineDied as error:
            failure.append(str(error))

    caller = threading.Thread(target=long_call)
    caller.start()
    time.sleep(1.5)  # requests are in flight
    killed, killed_load = client.entry["server_pid"], client.load_id
    os.kill(killed, signal.SIGKILL)
    caller.join(timeout=60)
    assert failure and f"server (pid {killed}) for cpu went away" in failure[0] and "Spark retries" in failure[0]
    assert "fake fake-echo serves" in failure[0]  # the server's log tail comes with it
    # the worker's client, asked for again, follows the slot's new server
    again = model_client(llm, "test")
    assert again.entry["server_pid"] != killed and again.load_id != killed_load
    assert again.generate([ask("Say yes.")], SHORT)[0].error is None


def test_another_model_replaces_the_server_and_an_idle_server_exits(folder):
    first = model_client(fake(folder, "llm.server.idle_seconds=300"), "test")
    # other client settings: the same server (generation and a judge of one model share it)
    assert model_client(fake(folder, "llm.client.max_concurrency=3"), "test").load_id == first.load_id
    other = model_client(fake(folder, "llm.server.idle_seconds=3", "llm.fake.model=other"), "test")
    assert other.load_id != first.load_id
    assert not alive(first.entry["pid"]) and not alive(first.entry["server_pid"])  # never two on one slot
    deadline = time.time() + 60
    while time.time() < deadline and (folder / "cpu.json").exists():
        time.sleep(0.5)
    assert not (folder / "cpu.json").exists(), "the idle server did not exit"
    while time.time() < deadline and alive(other.entry["server_pid"]):  # unregistered, then stopped
        time.sleep(0.2)
    assert not alive(other.entry["server_pid"])


def test_a_server_that_fails_to_start_says_why(folder):
    from misbench.llm.servers import ServerFailedToStart

    llm = fake(folder)
    llm["fake"]["replies"] = "not a section"  # the fake server fails as it reads its settings
    with pytest.raises(ServerFailedToStart, match=r"(?s)fake server for cpu exited while loading \(exit code 3\).*"
                                                  r"AttributeError"):
        model_client(llm, "test")


def test_a_server_is_not_blamed_for_an_earlier_servers_crash(tmp_path):
    log = tmp_path / "cpu.log"
    log.write_text("t server supervisor 11 starting on cpu\nFatal Python error: Segmentation fault\n")
    start = log.stat().st_size  # where the next server begins to write
    with open(log, "a") as handle:
        handle.write("t server supervisor 12 starting on cpu\n")
    assert log_tail(log, offset=start) == "t server supervisor 12 starting on cpu"
    assert "Fatal Python error: Segmentation fault" in log_tail(log)


def test_a_gpu_task_frees_its_gpu_of_an_idle_server_before_another_model_loads(folder, monkeypatch):
    """The NLI scorer of quality control loads beside no LLM: a server an earlier pass or job
    task of the same command left on the task's GPU is stopped first; one on another GPU stays,
    and so does one another running command started."""
    from misbench.llm import servers
    from misbench.llm.servers import free_task_gpus

    llm = fake(folder)
    llm_other = fake(folder, "llm.fake.model=other")
    # the servers are started as another command's, one that still runs (its process lives)
    another = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setenv(OWNER_VARIABLE, f"{another.pid}-another")
    try:
        cpu = model_client(llm, "test")  # not in a GPU task: a CPU server other than vLLM is left alone
        assert free_task_gpus(llm) is False and alive(cpu.entry["server_pid"])
        monkeypatch.setattr(servers, "task_gpus", lambda: ["1"])  # as Spark gives GPU 1
        other_gpu = model_client(llm, "test")
        monkeypatch.setattr(servers, "task_gpus", lambda: ["0"])
        this_gpu = model_client(llm, "test")
        assert (this_gpu.entry["slot"], other_gpu.entry["slot"]) == ("gpu0", "gpu1")
        assert psutil.Process(this_gpu.entry["server_pid"]).environ()["CUDA_VISIBLE_DEVICES"] == "0"
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-this")  # this command sees the other's
        assert free_task_gpus(llm) is False and alive(this_gpu.entry["server_pid"])
        with pytest.raises(RuntimeError, match="another running misbench command"):  # nor for another model
            model_client(llm_other, "test")
        assert model_client(llm, "test").load_id == this_gpu.load_id  # the same model: shared
        monkeypatch.setenv(OWNER_VARIABLE, f"{another.pid}-another")  # the command that started them
        assert free_task_gpus(llm) is True
        assert not alive(this_gpu.entry["server_pid"]) and not (folder / "gpu0.json").exists()
        assert alive(other_gpu.entry["server_pid"]) and (folder / "gpu1.json").exists()
        assert free_task_gpus(llm) is False  # already free
        # the next LLM call on that GPU starts a new server
        assert this_gpu.generate([ask("Say yes.")], SHORT)[0].error is None and alive(this_gpu.entry["server_pid"])
        # a server an earlier command of this same process left is this process's to replace
        monkeypatch.setattr(servers, "task_gpus", lambda: ["2"])
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-earlier")
        earlier = model_client(llm, "test")
        monkeypatch.setenv(OWNER_VARIABLE, f"{os.getpid()}-later")
        assert model_client(llm_other, "test").load_id != earlier.load_id
    finally:
        another.kill()


def test_a_server_ends_when_the_command_that_started_it_has_died(folder, monkeypatch):
    """A command killed before it could stop its servers (SIGKILL) leaves no server of its own
    registry running on: the supervisor sees its owner gone and stops it, unregistered."""
    command = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setenv(OWNER_VARIABLE, f"{command.pid}-killed")
    monkeypatch.setenv(PRIVATE_REGISTRY_VARIABLE, "1")  # the command's own registry, as the CLI makes
    try:
        client = model_client(fake(folder), "test")
        assert client.generate([ask("Say yes.")], SHORT)[0].error is None  # serving while its command runs
        command.kill()
        command.wait()
        deadline = time.time() + 60
        while alive(client.entry["server_pid"]) and time.time() < deadline:
            time.sleep(0.5)
        assert not alive(client.entry["server_pid"]) and not (folder / "cpu.json").exists()
    finally:
        command.kill()


def test_vllm_is_served_by_vllm_serve_with_its_settings():
    llm = load_config("local", ["llm.backend=vllm", "llm.vllm.model=/models/qwen", "llm.vllm.served_name=qwen",
                                "llm.vllm.tensor_parallel_size=2", "llm.vllm.server_options.enable_prefix_caching=true",
                                "llm.vllm.server_options.max_num_seqs=64",
                                "llm.vllm.server_options.enable_log_requests=false"]).get("llm")
    command, client_needs = server_command(llm, 8123)
    # vLLM's own CLI, run by this interpreter: its virtualenv's bin/ need not be on PATH
    assert command[:5] == [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "/models/qwen"]
    flags = " ".join(command)
    for expected in ("--served-model-name qwen", "--tensor-parallel-size 2", "--max-model-len 4096",
                     "--gpu-memory-utilization 0.9", "--max-logprobs 20", "--host 127.0.0.1 --port 8123",
                     "--enable-prefix-caching", "--max-num-seqs 64", "--no-enable-log-requests"):
        assert expected in flags, flags
    assert "--generation-config vllm" in flags  # sampling as asked, not generation_config.json's
    # per-request seeds, except on vLLM's CPU build (not installed here)
    assert client_needs == {"begun_reply": "continue_final_message", "per_request_seed": True}
    for secret in ("api_key", "hf-token"):
        with pytest.raises(ValueError, match="secret"):
            server_command(load_config("local", ["llm.backend=vllm", f"llm.vllm.server_options.{secret}=x"]).get("llm"), 1)
    tuned = server_command(load_config("local", ["llm.backend=vllm", "llm.vllm.server_options.max_num_batched_tokens=8192",
                                                 "llm.vllm.server_options.tokenizer_mode=auto"]).get("llm"), 1)[0]
    assert "--max-num-batched-tokens 8192" in " ".join(tuned) and "--tokenizer-mode auto" in " ".join(tuned)


def test_a_server_that_does_not_answer_in_time_is_stopped(tmp_path, monkeypatch):
    """The supervisor (run here, in this process) gives a server that never answers
    ``start_timeout_seconds``, then ends it and exits with its own code, which ``ensure_server``
    reports as a start that timed out, not as a crash."""
    from misbench.llm import servers

    monkeypatch.setattr(servers, "server_command", lambda settings, port: (
        [sys.executable, "-c", "import time; time.sleep(120)"], {}))
    spec = {"settings": fake(tmp_path), "key": "k", "idle_seconds": 60, "start_timeout_seconds": 1}
    sigterm = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    try:
        assert servers.supervise(tmp_path, "cpu", spec) == servers.START_TIMEOUT_EXIT
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert time.monotonic() - started < 15
    assert not [p for p in psutil.Process().children(recursive=True) if "time.sleep(120)" in command_of(p)]
    assert not (tmp_path / "cpu.json").exists()


def test_an_entry_whose_process_id_was_reused_is_neither_trusted_nor_signalled(folder):
    """A supervisor killed with -9 leaves its entry; its process id may come to name another
    process (here: this test's own)."""
    import json

    from misbench.llm.servers import settings_key, server_settings

    llm = fake(folder)
    me = psutil.Process()
    stale = {"pid": me.pid, "pid_created": me.create_time() - 100, "server_pid": me.pid,
             "server_pid_created": me.create_time() - 100, "slot": "cpu", "backend": "fake",
             "base_url": "http://127.0.0.1:9/v1", "model": "fake-echo",
             "settings_key": settings_key(server_settings(llm)), "load_id": "x", "owner": None}
    (folder / "cpu.json").write_text(json.dumps(stale))
    client = model_client(llm, "test")  # not the dead endpoint: a server of its own
    assert client.entry["pid"] != me.pid and client.generate([ask("hello")], SHORT)[0].error is None
    (folder / "cpu.json").write_text(json.dumps(stale))
    assert stop_servers(llm) == 1 and not (folder / "cpu.json").exists()  # and this test still runs


@pytest.mark.model
def test_the_small_models_server_refuses_an_over_long_prompt_for_its_row_only(tmp_path):
    llm = small_model(tmp_path)
    try:
        client = model_client(llm, "test")
        too_long = ask("word " * 1500)
        scores = client.option_logprobs_many([ask("Is Paris in France? Answer Yes or No."), too_long], ["Yes", "No"])
        assert scores[0][0] > scores[0][1] and isinstance(scores[1], RowFailed)
        assert "refused the prompt" in scores[1]
        fine, refused = client.generate([ask("Say yes."), too_long], SHORT)
        assert fine.error is None and fine.text and refused.text is None and "refused the prompt" in refused.error
    finally:
        stop_servers(llm)


def test_a_supervisor_whose_slot_another_took_stops_its_server(folder):
    """Two servers for one slot (a task killed while loading let the next start another): the
    one whose registry entry was replaced stops, and leaves the other's entry alone."""
    import json

    client = model_client(fake(folder), "test")
    first = client.entry
    me = psutil.Process()
    (folder / "cpu.json").write_text(json.dumps(dict(first, pid=me.pid, pid_created=me.create_time())))
    try:
        deadline = time.time() + 20
        while time.time() < deadline and (alive(first["pid"]) or alive(first["server_pid"])):
            time.sleep(0.2)
        assert not alive(first["pid"]) and not alive(first["server_pid"])
        assert json.loads((folder / "cpu.json").read_text())["pid"] == me.pid
        assert f"supervisor {me.pid} serves cpu now" in (folder / "cpu.log").read_text()
    finally:
        (folder / "cpu.json").unlink()  # it names this test's process: never stopped


@pytest.mark.parametrize("code", [-signal.SIGKILL, -signal.SIGTERM, 3])
def test_a_supervisor_ends_as_its_server_did(code):
    """A server killed while it loads (the chaos tests kill them every half second) ends its
    supervisor by the same signal, which ensure_server reports as a death Spark retries; a
    SIGKILL once ended it with a Python error (exit code 1) instead: a failed start."""
    ended = subprocess.run([sys.executable, "-c", f"from misbench.llm.servers import exit_as; exit_as({code})"],
                           capture_output=True, text=True)
    assert ended.returncode == code, ended.stderr
