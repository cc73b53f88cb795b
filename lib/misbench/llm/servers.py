"""Standard OpenAI-compatible model servers that misbench starts itself, one per GPU slot.

Where the configuration names no endpoint (``llm.backend`` other than ``openai``), the first
task that needs a model starts its slot's server (the GPUs Spark gave the task, or the machine's
CPU) and every later task, pass and stage of the job uses it: ``vllm serve`` on GPUs,
``python -m llama_cpp.server`` for the embedded default (through ``misbench.llm.llama_server``),
``misbench.llm.fake_server`` for tests. So a model loads once per GPU per job, however Spark
schedules its Python workers, and vLLM batches every task's requests continuously.

A small supervisor process (``python -m misbench.llm.servers``) starts the server, waits until
it answers, records it in a registry folder (``llm.server.dir``, else $MISBENCH_ENGINE_DIR,
else one in the temporary folder: ``<slot>.json``, ``<slot>.log``, ``<slot>.used``) and watches
it: a server without requests for ``idle_seconds`` is stopped, one that dies is unregistered
(the tasks it served fail with ``EngineDied``, Spark retries them and the retry starts another).
Nothing here speaks the model's protocol: that is ``misbench.llm.client``'s one code path.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from filelock import FileLock

from misbench.llm import EngineDied
from misbench.workers import cpu_threads, settings_key

log = logging.getLogger(__name__)
# Set by a command that starts servers; the servers its tasks start record it as their owner.
OWNER_VARIABLE = "MISBENCH_ENGINE_OWNER"
# Set where the registry is the command's own (the CLI's private folder in local mode).
PRIVATE_REGISTRY_VARIABLE = "MISBENCH_ENGINE_DIR_PRIVATE"


STOP_GRACE_SECONDS = 5.0
START_TIMEOUT_EXIT = 4  # the supervisor's exit code when its server did not answer in time
START_TIME_TOLERANCE_S = 60.0
# Variables that would make a managed server demand an API key (vLLM's; llama.cpp's settings).
SERVER_KEY_VARIABLES = ("VLLM_API_KEY", "API_KEY")
# server_options that carry secrets: they would land in the server's command line and log.
SECRET_OPTIONS = ("api_key", "hf_token")


class ServerFailedToStart(RuntimeError):
    """The server exited while loading its model (a setting, a missing model)."""


def server_settings(settings: dict) -> dict:
    """What decides the loaded model: the backend, its section and the model catalogue; not
    how the client calls it, so generation and a judge of the same model share one server."""
    backend = settings["backend"]
    decides = {"backend": backend, backend: settings.get(backend) or {}}
    if backend == "llama_cpp":  # where its model file comes from
        decides |= {"models": settings.get("models"), "cache_dir": settings.get("cache_dir")}
    if backend == "fake":  # the words its judge answers with
        decides["answer_words"] = settings.get("answer_words")
    return decides


def registry_dir(settings: dict) -> Path:
    configured = (settings.get("server") or {}).get("dir") or os.environ.get("MISBENCH_ENGINE_DIR")
    folder = Path(os.path.expanduser(str(configured))) if configured else \
        Path(tempfile.gettempdir()) / f"misbench-engines-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    status = folder.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077:
        # Its entries name processes we signal and servers we send prompts to: ours alone.
        raise PermissionError(f"model server registry {folder} must belong to this user with mode 700")
    return folder


def task_gpus() -> list[str]:
    """The GPUs Spark gave this task (stage-level scheduling), sorted; none outside a task."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        gpus = context.resources().get("gpu") if context else None
    except Exception:  # noqa: BLE001 - outside Spark, or no resources
        gpus = None
    return sorted(gpus.addresses, key=lambda a: (len(a), a)) if gpus is not None else []


def task_slot(gpus: list[str] | None = None) -> str:
    """Which server this task uses: the GPUs Spark gave it (``gpus``, else asked), or the
    machine's CPU."""
    gpus = task_gpus() if gpus is None else gpus
    return "gpu" + "-".join(gpus) if gpus else "cpu"


def alive(pid: int | None, created: float | None = None) -> bool:
    """Whether the process runs (a zombie, our exited child not yet reaped, does not) and, with
    ``created`` (its start time as a registry entry records it), is still that process and not
    a later one given the same id. psutil derives start times from the wall clock, which NTP
    may move: a minute's tolerance, while an id comes round again only after the whole id
    space has been used (and the entry's process has ended)."""
    try:
        process = psutil.Process(int(pid)) if pid else None
        return bool(process) and process.status() != psutil.STATUS_ZOMBIE and \
            (created is None or abs(process.create_time() - float(created)) < START_TIME_TOLERANCE_S)
    except (psutil.Error, TypeError, ValueError):
        return False


def entry_alive(entry: dict, which: str = "pid") -> bool:
    """Whether a registry entry's supervisor (``pid``) or server (``server_pid``) still runs."""
    return alive(entry.get(which), entry.get(f"{which}_created"))


def serving(entry: dict | None) -> bool:
    """Whether a registry entry's supervisor and server both still run."""
    return bool(entry) and entry_alive(entry) and entry_alive(entry, "server_pid")


def started_at(pid: int) -> float | None:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).create_time()
    return None


def read_entry(path: Path) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def log_tail(path: Path, lines: int = 15, offset: int = 0) -> str:
    """The end of a server's log from ``offset`` (where this server began to write: an
    earlier server's crash in the same log is never reported as this one's), led by the fatal
    error faulthandler reported, which its thread dumps would push out of the tail."""
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
        tail = text.splitlines()[-lines:]
        fatal = [line for line in text.splitlines() if line.startswith("Fatal Python error:")]
        if fatal and fatal[-1] not in tail:
            tail = [fatal[-1], "..."] + tail
        return "\n".join(tail)
    return ""


# -- the server of each backend -------------------------------------------------------------------
def served_model(settings: dict) -> str:
    """The model name the server answers to, known without starting it."""
    from misbench.llm import model_identity

    return model_identity(settings)


def server_command(settings: dict, port: int) -> tuple[list[str], dict]:
    """The command that serves ``settings``' model on ``port``, and what the client must know
    of it (how it continues a begun reply)."""
    backend, name = settings["backend"], served_model(settings)
    section = settings[backend]
    address = ["--host", "127.0.0.1", "--port", str(port)]
    if backend == "llama_cpp":
        from misbench.llm.models import chat_template, model_path

        _, path = model_path(section, settings)
        threads = cpu_threads(section.get("n_threads"), 1)  # one server per machine: all its cores
        command = [sys.executable, "-m", "misbench.llm.llama_server",
                   "--extra_buffer_types", str(section["extra_buffer_types"]).lower(),
                   "--model", str(path), "--model_alias", name, "--n_ctx", str(int(section["n_ctx"])),
                   "--n_threads", str(threads), "--n_threads_batch", str(threads),
                   "--n_batch", str(int(section["n_batch"])), "--seed", str(int(section["seed"])),
                   # llama-cpp-python's server returns top_logprobs only with it set (the
                   # wrapper computes each batch's last logits alone, not every position's)
                   "--logits_all", "true", *address]
        # llama_cpp.server has no continue_final_message: the client renders the model's own
        # chat template and asks for a completion after the reply's start.
        # Its requests default to repeat_penalty 1.1: sampling as asked, like every other server
        return command, {"begun_reply": "template", "chat_template": chat_template(path),
                         "extra_body": {"repeat_penalty": 1.0}}
    if backend == "vllm":
        # `vllm serve` of this interpreter's vLLM: its virtualenv need not be on PATH
        command = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(section["model"]),
                   "--served-model-name", name,
                   "--tensor-parallel-size", str(int(section["tensor_parallel_size"])),
                   "--dtype", str(section["dtype"]), "--max-model-len", str(int(section["max_model_len"])),
                   "--gpu-memory-utilization", str(float(section["gpu_memory_utilization"])),
                   "--seed", str(int(section["seed"])), "--max-logprobs", "20",
                   # sampling as each request asks, not the model's generation_config.json defaults
                   "--generation-config", "vllm", *address]
        for option, value in (section.get("server_options") or {}).items():
            if str(option).replace("-", "_").lower() in SECRET_OPTIONS:
                raise ValueError(f"llm.vllm.server_options.{option} would put a secret on the server's command "
                                 "line and in its log: give it through the environment instead "
                                 "(e.g. HF_TOKEN for the hub)")
            flag = str(option).replace("_", "-")
            command += [f"--{flag}"] if value is True else [f"--no-{flag}"] if value is False else \
                [f"--{flag}", json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
        # vLLM's CPU build hangs on per-request seeds (docs/benchmarks.md): its own seed only
        return command, {"begun_reply": "continue_final_message", "per_request_seed": not _vllm_cpu_build()}
    if backend == "fake":
        spec = json.dumps({"fake": section, "answer_words": settings["answer_words"]})
        return [sys.executable, "-m", "misbench.llm.fake_server", "--spec", spec, *address], \
            {"begun_reply": "continue_final_message"}
    raise ValueError(f"llm.backend '{backend}' is not one of llama_cpp, vllm, fake (servers misbench "
                     "starts) or openai (an endpoint it calls)")


def _vllm_cpu_build() -> bool:
    from importlib import metadata

    try:
        return bool(metadata.version("vllm-cpu"))
    except metadata.PackageNotFoundError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- finding or starting a slot's server ----------------------------------------------------------
def ensure_server(settings: dict) -> dict:
    """The registry entry of this task's slot's server for ``settings``: the running one, or
    one started now (the first task of a slot starts it; the others wait on the slot's lock)."""
    folder, gpus = registry_dir(settings), task_gpus()
    slot = task_slot(gpus)
    key = settings_key(server_settings(settings))
    entry_path, log_path = folder / f"{slot}.json", folder / f"{slot}.log"
    server = settings["server"]
    with FileLock(folder / f"{slot}.lock"):
        entry = read_entry(entry_path)
        running = serving(entry)
        if running and entry["settings_key"] == key:
            return entry  # the same model: shared, whichever command started it
        if running:
            if held_by_another_command(entry.get("owner")):
                raise RuntimeError(
                    f"{slot} holds the {entry.get('backend')} server of another running misbench command "
                    f"(pid {entry['pid']}, owner {entry.get('owner')}), with another model; it is never "
                    "stopped under that command: give the two commands other GPUs or their own server "
                    "registries (llm.server.dir), or run them one after the other")
            stop_server(entry_path)  # another model of this command: it goes first (never two at once)
        entry_path.unlink(missing_ok=True)
        spec_path = folder / f"{slot}.spec.json"
        spec = {"settings": server_settings(settings), "key": key,
                "idle_seconds": float(server["idle_seconds"]),
                "start_timeout_seconds": float(server["start_timeout_seconds"])}
        env = os.environ.copy()
        # Keys of other endpoints are not the managed server's: with one set, vLLM's and
        # llama.cpp's servers would demand it from every client.
        for variable in SERVER_KEY_VARIABLES:
            env.pop(variable, None)
        # The worker may see misbench through sys.path alone (--py-files): so must the server.
        env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        # PySpark gives its Python workers OMP_NUM_THREADS = the task's cores; the server
        # serves every task of its slot.
        env.pop("OMP_NUM_THREADS", None)
        if server.get("omp_threads"):
            env["OMP_NUM_THREADS"] = str(int(server["omp_threads"]))
        with open(log_path, "ab") as log_file:
            log_start = log_file.tell()
            spec_path.write_text(json.dumps(dict(spec, log_offset=log_start), default=str))
            spec_path.chmod(0o600)
            supervisor = subprocess.Popen(
                [sys.executable, "-m", "misbench.llm.servers", "--folder", str(folder), "--slot", slot,
                 "--spec", str(spec_path)],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the Python worker that started it
                env=env)
        deadline = time.monotonic() + float(server["start_timeout_seconds"]) + 30
        while time.monotonic() < deadline:
            entry = read_entry(entry_path)
            if entry and (entry["pid"] == supervisor.pid or (entry["settings_key"] == key and serving(entry))):
                return entry  # ours, or one started beside it (a killed task's load) that took the slot
            if supervisor.poll() is not None:
                code = supervisor.returncode
                if code == START_TIMEOUT_EXIT:
                    raise ServerFailedToStart(
                        f"the {settings['backend']} server for {slot} did not answer within "
                        f"llm.server.start_timeout_seconds ({server['start_timeout_seconds']}):\n"
                        f"{log_tail(log_path, offset=log_start)}")
                how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                failure = EngineDied if code < 0 else ServerFailedToStart  # killed, or could not load
                raise failure(f"the {settings['backend']} server for {slot} exited while loading ({how}):\n"
                              f"{log_tail(log_path, offset=log_start)}")
            time.sleep(0.2)
        supervisor.terminate()
        psutil.wait_procs([psutil.Process(supervisor.pid)], timeout=60)  # never a second one beside it
        raise ServerFailedToStart(f"the {settings['backend']} server for {slot} did not start in time:\n"
                                  f"{log_tail(log_path, offset=log_start)}")


def stop_server(entry_path: Path, wait_s: float = 60.0) -> None:
    """End the server of one registry entry and wait: its supervisor stops it (and says so in
    the log); whatever is left after ``wait_s`` is killed."""
    entry = read_entry(entry_path)
    if not entry:
        return
    processes = []
    for which in ("pid", "server_pid"):
        if entry_alive(entry, which):  # never a later process given the same id
            with contextlib.suppress(psutil.Error, TypeError, ValueError):
                processes.append(psutil.Process(int(entry[which])))
    with contextlib.suppress(psutil.Error):
        # the server's own children too (vLLM's engine core and tensor-parallel workers)
        processes += [child for child in processes[-1].children(recursive=True)] if processes else []
    if processes:
        with contextlib.suppress(psutil.Error):
            processes[0].terminate()
    # Polled, not waited on: a supervisor another process started stays a zombie until that
    # parent reaps it, and psutil's wait would sit out the whole timeout on it.
    deadline = time.monotonic() + wait_s
    while any(alive(process.pid) for process in processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in processes:
        if alive(process.pid):
            with contextlib.suppress(psutil.Error):
                process.kill()
    entry_path.unlink(missing_ok=True)


def free_task_gpus(settings: dict) -> bool:
    """Stop the server that holds this task's GPUs, before a model of another kind loads there
    (the NLI scorer of quality control): an idle vLLM server keeps most of the GPU's memory
    until its idle timeout. Outside a GPU task the machine's one server is stopped if it is
    vLLM, which takes the GPUs it sees. A server another running command started is never
    stopped under it. Returns whether one was stopped."""
    folder, slot = registry_dir(settings), task_slot()
    with FileLock(folder / f"{slot}.lock"):  # not while another task of the slot starts one
        entry_path = folder / f"{slot}.json"
        entry = read_entry(entry_path)
        if not entry or not entry_alive(entry):
            return False
        if slot == "cpu" and entry.get("backend") != "vllm":
            return False  # llama.cpp on the CPU: no GPU memory to free
        owner = entry.get("owner")
        if held_by_another_command(owner):
            log.warning("the %s server on %s (pid %s) belongs to another running command (owner %s): left "
                        "running; the model about to load there shares the GPU with it",
                        entry.get("backend"), slot, entry["pid"], owner)
            return False
        log.info("stopping the %s server on %s (pid %s) to free the GPU", entry.get("backend"), slot, entry["pid"])
        stop_server(entry_path)
        return True


def claim_servers() -> str:
    """Mark the servers this process's Spark tasks will start (they inherit the environment) as
    its own, so that ``stop_servers(settings, owner)`` ends those and no one else's."""
    os.environ[OWNER_VARIABLE] = f"{os.getpid()}-{secrets.token_hex(6)}"
    return os.environ[OWNER_VARIABLE]


def held_by_another_command(owner: str | None) -> bool:
    """Whether a server's ``owner`` is another command that still runs: not this one, not one
    that died, not an earlier one of this process (commands called one after another in one
    process, as tests and notebooks do, leave their servers to the next)."""
    if not owner or owner == os.environ.get(OWNER_VARIABLE):
        return False
    process = str(owner).split("-", 1)[0]
    if not process.isdigit() or int(process) in {os.getpid(), *(p.pid for p in psutil.Process().parents())}:
        return False
    return not _orphan(owner)


def _orphan(owner: str | None) -> bool:
    """A server whose owning command has ended (killed before it could stop its servers)."""
    pid = str(owner or "").split("-", 1)[0]
    return pid.isdigit() and not alive(int(pid))


def stop_servers(settings: dict, owner: str | None = None) -> int:
    """End the servers of the registry ``settings`` name: all, or with ``owner`` that owner's
    and orphans; returns how many."""
    folder = registry_dir(settings)
    entries = []
    for path in folder.glob("*.json"):
        if path.name.endswith(".spec.json"):
            continue
        server_owner = (read_entry(path) or {}).get("owner")
        if owner is None or server_owner == owner or _orphan(server_owner):
            entries.append(path)
    for path in entries:
        with FileLock(folder / f"{path.stem}.lock"):
            stop_server(path)
    return len(entries)


def touch(folder: Path, slot: str) -> None:
    """A request is under way or just ended: the supervisor's idle clock starts again."""
    with contextlib.suppress(OSError):
        os.utime(folder / f"{slot}.used")


# -- the supervisor process -----------------------------------------------------------------------
def _die_with_parent():
    """For the server's process: end when the supervisor ends, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), or at once if it ended before the setting took hold."""
    import ctypes

    supervisor = os.getpid()
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl  # loaded before the fork
    except (OSError, AttributeError):
        return None

    def in_child():
        prctl(1, signal.SIGTERM)
        if os.getppid() != supervisor:
            os._exit(1)

    return in_child


def _answers(base_url: str, model: str) -> bool:
    """Whether the server answers and serves ``model`` (not another program on the port)."""
    import openai

    try:
        served = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=5).models.list()
        return any(entry.id == model for entry in served.data)
    except openai.OpenAIError:
        return False


def supervise(folder: Path, slot: str, spec: dict) -> int:
    import faulthandler

    faulthandler.enable()  # a native crash leaves "Fatal Python error: ..." in the log
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s server supervisor %(process)d %(message)s")
    log.setLevel(logging.INFO)  # its own lines; not the HTTP library's line per readiness probe
    settings, owner = spec["settings"], os.environ.get(OWNER_VARIABLE)
    port = _free_port()
    command, client_needs = server_command(settings, port)
    log.info("starting on %s: %s", slot, " ".join(command))
    started = time.perf_counter()
    # a process group of its own: ending it reaches its children too, even once it has died
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent(),
                              start_new_session=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + spec["start_timeout_seconds"]
    while server.poll() is not None or not _answers(base_url, served_model(settings)):
        if server.poll() is not None or stopping or time.monotonic() > deadline:
            timed_out = server.poll() is None and not stopping
            _end_tree(server, grace=0)
            code = server.wait()
            if timed_out:
                log.error("the server did not answer within %.0f s: stopped", spec["start_timeout_seconds"])
                return START_TIMEOUT_EXIT
            log.error("%s before it answered", _ended(code))
            return code if code < 0 else 3  # killed: as the signal (a retry may do); failed: 3
        time.sleep(0.5)
    entry_path, used = folder / f"{slot}.json", folder / f"{slot}.used"
    used.touch()
    entry = {"pid": os.getpid(), "pid_created": started_at(os.getpid()), "server_pid": server.pid,
             "server_pid_created": started_at(server.pid), "slot": slot, "backend": settings["backend"],
             "base_url": base_url, "model": served_model(settings), "settings_key": spec["key"],
             "load_id": f"{server.pid}-{uuid.uuid4().hex[:12]}", "owner": owner,
             "load_s": time.perf_counter() - started, "started_at": time.time(),
             "log_offset": int(spec.get("log_offset", 0)), **client_needs}
    partial = entry_path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(entry))
    partial.chmod(0o600)
    os.replace(partial, entry_path)  # ready: clients find it from here on
    log.info("%s %s serves %s on %s (load %.1f s)", settings["backend"], entry["model"], base_url, slot,
             entry["load_s"])
    # In a registry of its command's own (local mode's default) the server ends with the command;
    # a shared registry's server may serve other commands (the same model): it ends when idle.
    owned = owner if os.environ.get(PRIVATE_REGISTRY_VARIABLE) else None
    reason, code = None, 0
    while reason is None:
        time.sleep(1.0)
        if server.poll() is not None:
            reason, code = _ended(server.returncode), 3
        elif stopping:
            reason = "asked to stop"
        elif (current := read_entry(entry_path)) and current.get("pid") != os.getpid():
            # a second server, started while a killed task's load left the slot unregistered,
            # took the slot: one per slot
            reason = f"supervisor {current.get('pid')} serves {slot} now"
        elif _orphan(owned):
            reason = f"its command ({owned}) has ended"
        elif time.time() - _mtime(used) > spec["idle_seconds"]:
            reason = f"idle for {spec['idle_seconds']:.0f} s"
    log.info("%s: stopping", reason)
    with contextlib.suppress(OSError):
        if json.loads(entry_path.read_text()).get("pid") == os.getpid():
            entry_path.unlink()  # unregistered first: a task arriving now starts a new server
    _end_tree(server, grace=STOP_GRACE_SECONDS)
    return code


def _end_tree(server: subprocess.Popen, grace: float) -> None:
    """Stop the server's process group (vLLM's engine core and tensor-parallel workers hold
    GPU memory, and outlive a server that died): asked first, killed after ``grace`` seconds.
    A model server keeps nothing worth a longer graceful end, and uvicorn's would wait for
    every client's idle keep-alive connection to close."""
    group = server.pid  # its own session and group (start_new_session)
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sent)
        deadline = time.monotonic() + (grace if sent == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            server.poll()  # reaps the server itself; the group's orphans are reaped by init
            try:
                os.killpg(group, 0)
            except (ProcessLookupError, PermissionError):
                return  # no process of the group is left
            time.sleep(0.1)


def _ended(code: int) -> str:
    """How the server ended, in the words its log and the tasks' errors use."""
    return f"the server was killed by signal {signal.Signals(-code).name}" if code < 0 else \
        f"the server exited with exit code {code}"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description="misbench model server supervisor (started by tasks)")
    parser.add_argument("--folder", required=True)
    parser.add_argument("--slot", required=True)
    parser.add_argument("--spec", required=True)
    args = parser.parse_args()
    exit_as(supervise(Path(args.folder), args.slot, json.loads(Path(args.spec).read_text())))


def exit_as(code: int) -> None:
    """Exit with the server's status: killed by a signal, the supervisor is killed by it too,
    for whoever waits on it (``ensure_server`` retries a killed load, not a failed one)."""
    if code < 0:
        if -code != signal.SIGKILL:  # SIGKILL's handler cannot be set (it is always the default)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
