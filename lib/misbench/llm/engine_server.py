"""One engine per GPU for the whole job: a process that holds the model, shared by every task.

Spark may start a fresh Python worker for a later pass (or hand a task to another worker of the
same executor); an engine cached inside the worker would then load again, and on a GPU a second
engine would not fit beside the first. So the engine lives in a process of its own, one per GPU
(one per machine on CPU), started by the first task that needs it and found by every later one
through a registry folder (``llm.engine_server.dir``, else $MISBENCH_ENGINE_DIR, else one in
the temporary folder): ``<slot>.json`` (pid, settings, load id), ``<slot>.sock`` (a local
socket) and ``<slot>.log``. A task sends its whole batch; the engine runs the batches waiting
from all tasks together (vLLM schedules them as one), so several tasks keep one engine busy.

If the engine dies (crash, out of memory), the calls in flight raise ``EngineDied``: only those
tasks fail, Spark retries them, and the retry starts a new engine. Rows committed before stay.
An engine with no requests for ``idle_seconds`` exits and frees its GPU; ``stop_engines`` ends
the ones of a registry at once (the CLI does, in local mode, when its command ends).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from multiprocessing.connection import Client, Listener
from pathlib import Path
from typing import Sequence

import psutil

from misbench.llm import EngineBroken, Generation, LLMBackend, Messages, SamplingParams, load_backend
from misbench.workers import settings_key

log = logging.getLogger(__name__)
# Set by a command that starts engines; its tasks' engines record it as their owner.
OWNER_VARIABLE = "MISBENCH_ENGINE_OWNER"
# Set where the registry is the command's own (the CLI's private folder in local mode).
PRIVATE_REGISTRY_VARIABLE = "MISBENCH_ENGINE_DIR_PRIVATE"


class EngineDied(RuntimeError):
    """The engine process went away while a task waited on it."""


class EngineFailedToStart(RuntimeError):
    """The engine process exited while loading its model (a setting, a missing model)."""


def engine_settings(settings: dict) -> dict:
    """What decides the loaded engine: the backend, its section and the model catalogue;
    not how many tasks share a machine or how the registry behaves, so generation and a judge
    of the same model share one engine."""
    backend = settings["backend"]
    section = {k: v for k, v in (settings.get(backend) or {}).items() if k not in ("workers",)}
    return {"backend": backend, backend: section, "models": settings.get("models"),
            "cache_dir": settings.get("cache_dir")}


def registry_dir(settings: dict) -> Path:
    configured = (settings.get("engine_server") or {}).get("dir") or os.environ.get("MISBENCH_ENGINE_DIR")
    folder = Path(os.path.expanduser(str(configured))) if configured else \
        Path(tempfile.gettempdir()) / f"misbench-engines-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    status = folder.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077:
        # Replies are unpickled and pids signalled: only a private folder of ours will do.
        raise PermissionError(f"engine registry {folder} must belong to this user with mode 700")
    return folder


@contextlib.contextmanager
def slot_lock(folder: Path, slot: str):
    """Held by whoever starts or stops the engine of ``slot`` (a file lock, across processes)."""
    with open(folder / f"{slot}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def task_gpus() -> list[str]:
    """The GPUs Spark gave this task (stage-level scheduling), sorted; none outside a task."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        gpus = context.resources().get("gpu") if context else None
    except Exception:  # noqa: BLE001 - outside Spark, or no resources
        gpus = None
    return sorted(gpus.addresses, key=lambda a: (len(a), a)) if gpus is not None else []


def task_slot() -> str:
    """Which engine this task uses: the GPUs Spark gave it, or the machine's CPU."""
    gpus = task_gpus()
    return "gpu" + "-".join(gpus) if gpus else "cpu"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own exited child not yet reaped) is dead for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False
    return True


def _log_tail(path: Path, lines: int = 15, pid: int | None = None, offset: int | None = None) -> str:
    """The end of an engine's log; with ``pid``, what that engine wrote, led by the fatal
    error faulthandler reported (its thread dumps would push it out of the tail). ``offset``:
    where the engine began to write, so an earlier engine's crash in the same log is never
    reported as this one's (an engine killed before its first line has no ``pid`` mark)."""
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            handle.seek(offset or 0)
            text = handle.read().decode(errors="replace")
        own = pid is None or offset is not None or f"engine {pid} starting" in text
        if pid is not None and f"engine {pid} starting" in text:
            text = text[text.rfind(f"engine {pid} starting"):]
        tail = text.splitlines()[-lines:]
        # Without its mark the text may be other engines': lift no fatal error out of it.
        fatal = [line for line in text.splitlines() if own and line.startswith("Fatal Python error:")]
        if fatal and fatal[-1] not in tail:
            tail = [fatal[-1], "..."] + tail
        return "\n".join(tail)
    return ""


class EngineClient(LLMBackend):
    """The ``LLMBackend`` of a task: forwards every call to its slot's engine process."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.backend = settings["backend"]
        self.folder = registry_dir(settings)
        self.gpus = task_gpus()
        self.slot = "gpu" + "-".join(self.gpus) if self.gpus else "cpu"
        self.key = settings_key(engine_settings(settings))
        info = self._ensure_engine()
        super().__init__(info["model"])
        self.load_id = info["load_id"]  # the engine's: rows count loads per engine, not per task
        self.pid = int(info["pid"])

    # -- finding or starting the slot's engine -------------------------------------------------
    def _paths(self):
        base = self.folder / self.slot
        return base.with_suffix(".json"), base.with_suffix(".sock"), base.with_suffix(".log")

    def _ensure_engine(self) -> dict:
        info_path, socket_path, log_path = self._paths()
        server = self.settings["engine_server"]
        with slot_lock(self.folder, self.slot):  # one starter per slot; the others wait, then connect
            info = self._read_info(info_path)
            if info and _alive(int(info["pid"])) and info["settings_key"] == self.key:
                return info  # the same model: shared, whichever command started it
            if info and _alive(int(info["pid"])):
                if held_by_another_command(info.get("owner")):
                    raise RuntimeError(
                        f"{self.slot} holds the {info.get('backend')} engine of another running misbench "
                        f"command (pid {info['pid']}, owner {info.get('owner')}), with another model; it is "
                        "never stopped under that command: give the two commands other GPUs or their own "
                        "engine registries (llm.engine_server.dir), or run them one after the other")
                # Another model of this command holds this GPU: it goes before this one loads
                # (never two at once).
                stop_engine(info_path)
            for stale in (info_path, socket_path):
                stale.unlink(missing_ok=True)
            settings_file = self.folder / f"{self.slot}.settings.json"
            settings_file.write_text(json.dumps(dict(engine_settings(self.settings),
                                                     engine_server=server), default=str))
            settings_file.chmod(0o600)
            env = os.environ.copy()
            # The worker may see misbench through sys.path alone (--py-files): so must the engine.
            env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
            if self.gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
            # PySpark gives its Python workers OMP_NUM_THREADS = the task's cores; the engine
            # serves every task of its slot (vLLM on CPU ran on one thread of two with it).
            env.pop("OMP_NUM_THREADS", None)
            if server.get("omp_threads"):
                env["OMP_NUM_THREADS"] = str(int(server["omp_threads"]))
            with open(log_path, "ab") as log_file:
                log_start = log_file.tell()
                process = subprocess.Popen(
                    [sys.executable, "-m", "misbench.llm.engine_server", "--slot", self.slot,
                     "--folder", str(self.folder), "--settings", str(settings_file),
                     "--idle-seconds", str(float(server["idle_seconds"]))],
                    stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    start_new_session=True,  # outlives the Python worker that started it
                    env=env)
            deadline = time.monotonic() + float(server["start_timeout_seconds"])
            while time.monotonic() < deadline:
                info = self._read_info(info_path)
                if info and int(info["pid"]) == process.pid:
                    return info
                if process.poll() is not None:
                    code = process.returncode
                    how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                    failure = EngineDied if code < 0 else EngineFailedToStart  # killed, or could not load
                    raise failure(f"the {self.backend} engine for {self.slot} exited while loading "
                                     f"({how}):\n{_log_tail(log_path, pid=process.pid, offset=log_start)}")
                time.sleep(0.2)
            process.kill()
            raise EngineDied(f"the {self.backend} engine for {self.slot} did not start in time:\n"
                             f"{_log_tail(log_path, offset=log_start)}")

    @staticmethod
    def _read_info(path: Path) -> dict | None:
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        return None

    # -- calls ---------------------------------------------------------------------------------
    def _call(self, request: tuple, reconnect: bool = True):
        info_path, socket_path, log_path = self._paths()
        info = self._read_info(info_path) or {}
        if info.get("pid") != self.pid and reconnect:
            # Gone before this request was sent (idle exit, a crash between tasks): nothing was
            # lost, so find or start the slot's engine and send it there.
            fresh = self._ensure_engine()
            self.pid, self.load_id = int(fresh["pid"]), fresh["load_id"]
            return self._call(request, reconnect=False)
        if info.get("pid") != self.pid:
            raise EngineDied(f"the {self.backend} engine (pid {self.pid}) for {self.slot} is gone "
                             f"(replaced or exited); the task fails and Spark retries it. Its log "
                             f"ends:\n{_log_tail(log_path, pid=self.pid)}")
        from multiprocessing import AuthenticationError

        try:
            connection = Client(str(socket_path), "AF_UNIX", authkey=bytes.fromhex(info["authkey"]))
        except (OSError, EOFError, KeyError, ValueError, AuthenticationError) as error:
            if reconnect:  # gone as we came (idle exit, a crash): nothing was sent, so start another
                self.pid = -1
                return self._call(request, reconnect=True)
            raise EngineDied(f"the {self.backend} engine (pid {self.pid}) for {self.slot} cannot be "
                             f"reached ({type(error).__name__}):\n{_log_tail(log_path, pid=self.pid)}") from error
        try:
            with contextlib.closing(connection):
                connection.send(request)
                status, payload = connection.recv()
        except (OSError, EOFError, KeyError, ValueError, AuthenticationError) as error:
            raise EngineDied(
                f"the {self.backend} engine (pid {self.pid}) for {self.slot} went away "
                f"({type(error).__name__}); the task fails and Spark retries it on a new "
                f"engine. Its log ends:\n{_log_tail(log_path, pid=self.pid)}") from error
        if status != "ok":
            raise RuntimeError(payload)
        return payload

    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        return self._call(("generate", list(prompts), asdict(params)))

    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        return self.option_logprobs_many([prompt], options)[0]

    def option_logprobs_many(self, prompts: Sequence[Messages], options: Sequence[str]) -> list[list[float]]:
        return self._call(("option_logprobs_many", list(prompts), list(options)))

    def info(self) -> dict:
        return self._call(("info",))


def stop_engine(info_path: Path, wait_s: float = 60.0) -> None:
    """End the engine of one registry entry and wait until it is gone."""
    info = EngineClient._read_info(info_path)
    if not info:
        return
    pid = int(info["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    info_path.unlink(missing_ok=True)
    info_path.with_suffix(".sock").unlink(missing_ok=True)


def free_task_gpus(settings: dict) -> bool:
    """Stop the engine that holds this task's GPUs, before a model of another kind loads
    there (the NLI scorer of quality control). An engine left by an earlier pass or job task
    holds most of the GPU's memory (``llm.vllm.gpu_memory_utilization``) until its idle
    timeout, and the scorer would not fit beside it. Outside a GPU task (``gpus_per_task``
    0 on a GPU machine) the machine's one engine is stopped if it is vLLM, which takes the
    GPUs it sees. An engine another running command started (two commands sharing a machine)
    is never stopped under it: the warning says the model loads beside it. Returns whether one
    was stopped."""
    folder = registry_dir(settings)
    slot = task_slot()
    with slot_lock(folder, slot):  # not while another task of the slot starts one
        info_path = folder / f"{slot}.json"
        info = EngineClient._read_info(info_path)
        if not info or not _alive(int(info["pid"])):
            return False
        if slot == "cpu" and info.get("backend") != "vllm":
            return False  # llama.cpp on the CPU: no GPU memory to free
        owner = info.get("owner")
        if held_by_another_command(owner):
            log.warning("the %s engine on %s (pid %s) belongs to another running command (owner %s): left "
                        "running; the model about to load there shares the GPU with it",
                        info.get("backend"), slot, info["pid"], owner)
            return False
        log.info("stopping the %s engine on %s (pid %s) to free the GPU", info.get("backend"), slot, info["pid"])
        stop_engine(info_path)
        return True


def claim_engines() -> str:
    """Mark the engines this process's Spark tasks will start (they inherit the environment)
    as its own, so that ``stop_engines(settings, owner)`` ends those and no one else's."""
    os.environ[OWNER_VARIABLE] = f"{os.getpid()}-{secrets.token_hex(6)}"
    return os.environ[OWNER_VARIABLE]


def held_by_another_command(owner: str | None) -> bool:
    """Whether an engine's ``owner`` is another command that is still running: not this one,
    not one that died, not an earlier one of this process (commands called one after another
    in one process, as tests and notebooks do, leave their engines to the next); an engine
    without an owner, from tasks that do not inherit it, counts as this command's."""
    if not owner or owner == os.environ.get(OWNER_VARIABLE):
        return False
    process = str(owner).split("-", 1)[0]
    # this process, or one it runs under (a Spark worker's JVM and driver): the same command
    # process, whose earlier commands' engines are its own
    if not process.isdigit() or int(process) in {os.getpid(), *(p.pid for p in psutil.Process().parents())}:
        return False
    return not _orphan(owner)


def _orphan(owner: str | None) -> bool:
    """An engine whose owning command has ended (killed before it could stop its engines)."""
    pid = str(owner or "").split("-", 1)[0]
    return pid.isdigit() and not _alive(int(pid))


def stop_engines(settings: dict, owner: str | None = None) -> int:
    """End the engines of the registry ``settings`` name: all of them, or with ``owner`` that
    owner's and orphans; returns how many."""
    folder = registry_dir(settings)
    entries = []
    for path in folder.glob("*.json"):
        if path.name.endswith(".settings.json"):
            continue
        engine_owner = (EngineClient._read_info(path) or {}).get("owner")
        if owner is None or engine_owner == owner or _orphan(engine_owner):
            entries.append(path)
    for path in entries:
        with slot_lock(folder, path.stem):
            stop_engine(path)
    return len(entries)


# -- the engine process ------------------------------------------------------------------------
class _Job:
    def __init__(self, request: tuple, connection=None):
        self.request, self.connection = request, connection
        self.done = threading.Event()
        self.reply: tuple = ("error", "not run")


def _hung_up(job: _Job) -> bool:
    """The client closed its end (a waiting client sends nothing more, so readable means EOF)."""
    try:
        return job.connection is not None and job.connection.poll(0)
    except (OSError, EOFError):
        return True


def _merge_key(request: tuple):
    """Requests that can run as one engine call: same kind and same parameters."""
    kind = request[0]
    if kind == "generate":
        return kind, json.dumps(request[2], sort_keys=True)
    if kind == "option_logprobs_many":
        return kind, json.dumps(request[2])
    return None


def _run_batch(engine: LLMBackend, jobs: list[_Job]) -> None:
    kind = jobs[0].request[0]
    prompts = [prompt for job in jobs for prompt in job.request[1]]
    try:
        if kind == "generate":
            results = engine.generate(prompts, SamplingParams(**jobs[0].request[2]))
        else:
            results = engine.option_logprobs_many(prompts, jobs[0].request[2])
    except EngineBroken:
        # The engine cannot serve more: exit as a crash does. The waiting tasks raise
        # EngineDied with this log's tail, Spark retries them and the retry starts a new engine.
        log.exception("the engine failed; exiting")
        logging.shutdown()
        os._exit(3)
    except Exception as error:  # noqa: BLE001 - a refused request fails its own task only
        if len(jobs) > 1:
            # Several tasks' batches shared this call: one task's refused prompt (over the
            # context, say) must not fail the others' rows, so each batch runs again alone.
            for job in jobs:
                _run_batch(engine, [job])
            return
        jobs[0].reply = ("error", f"{type(error).__name__}: {error}"[:2000])
        return
    start = 0
    for job in jobs:
        count = len(job.request[1])
        job.reply = ("ok", results[start:start + count])
        start += count


def serve(slot: str, folder: Path, settings: dict, idle_seconds: float) -> None:
    import faulthandler

    faulthandler.enable()  # a native crash leaves "Fatal Python error: ..." in the engine's log
    logging.basicConfig(level=logging.INFO, format="%(asctime)s engine %(process)d %(message)s")
    log.info("starting on %s", slot)
    load_settings = dict(settings)
    if settings["backend"] == "llama_cpp":
        # One engine per machine on CPU: all its cores go to it.
        load_settings["llama_cpp"] = dict(settings["llama_cpp"], workers=1)
    started = time.perf_counter()
    engine = load_backend(load_settings)
    load_s = time.perf_counter() - started
    authkey = secrets.token_bytes(32)
    socket_path = folder / f"{slot}.sock"
    socket_path.unlink(missing_ok=True)
    listener = Listener(str(socket_path), "AF_UNIX", authkey=authkey)
    socket_path.chmod(0o600)
    jobs: queue.Queue[_Job] = queue.Queue()
    # running: requests in the engine call under way (0 between calls)
    stats = {"requests": 0, "calls": 0, "busy_s": 0.0, "running": 0, "last_request": time.monotonic()}
    info = {"pid": os.getpid(), "slot": slot, "settings_key": settings_key(engine_settings(settings)),
            "load_id": engine.load_id, "model": engine.model, "backend": engine.backend,
            "authkey": authkey.hex(), "load_s": load_s, "started_at": time.time(),
            "owner": os.environ.get(OWNER_VARIABLE)}
    info_path = folder / f"{slot}.json"
    partial = info_path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(info))
    partial.chmod(0o600)
    os.replace(partial, info_path)  # ready: clients connect from here on
    log.info("loaded %s %s on %s in %.1f s (load %s)", engine.backend, engine.model, slot, load_s, engine.load_id)

    def answer(connection) -> None:
        with contextlib.closing(connection):
            try:
                request = connection.recv()
            except (EOFError, OSError):
                return
            if request[0] == "info":
                connection.send(("ok", dict(info, authkey=None, **stats)))
                return
            job = _Job(request, connection)
            jobs.put(job)
            job.done.wait()
            with contextlib.suppress(OSError):
                connection.send(job.reply)

    def accept() -> None:
        while True:
            try:
                connection = listener.accept()
            except Exception:  # noqa: BLE001 - a client that failed authentication or hung up
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # In a registry of its command's own (local mode's default), the engine ends with the
    # command: one killed before it could stop its engines (SIGKILL) leaves workers that may
    # still ask, and their answers go nowhere. A shared registry's engine may serve other
    # commands (the same model): it ends by its idle timeout.
    owner = os.environ.get(OWNER_VARIABLE) if os.environ.get(PRIVATE_REGISTRY_VARIABLE) else None
    while True:
        if _orphan(owner):
            log.info("its command (%s) has ended: exiting", owner)
            with contextlib.suppress(OSError):
                if json.loads(info_path.read_text()).get("pid") == os.getpid():
                    info_path.unlink()
                    socket_path.unlink(missing_ok=True)
            while not jobs.empty():  # asked by its dead command's workers: answered, not run
                job = jobs.get_nowait()
                job.reply = ("error", f"the engine's command ({owner}) has ended")
                job.done.set()
            time.sleep(0.5)  # the answer threads send their replies
            break
        try:
            first = jobs.get(timeout=5.0)
        except queue.Empty:
            if time.monotonic() - stats["last_request"] > idle_seconds:
                log.info("idle for %.0f s: exiting", idle_seconds)
                # Unregistered first: a task arriving now starts a new engine; one that came
                # just before is still served below.
                with contextlib.suppress(OSError):
                    if json.loads(info_path.read_text()).get("pid") == os.getpid():
                        info_path.unlink()
                        socket_path.unlink(missing_ok=True)
                time.sleep(1.0)
                while not jobs.empty():
                    job = jobs.get_nowait()
                    _run_batch(engine, [job])
                    job.done.set()
                time.sleep(0.5)  # the answer threads send their replies
                break
            continue
        batch = [first]
        key = _merge_key(first.request)
        waiting = []
        while True:  # every batch already waiting that can share the engine call
            try:
                job = jobs.get_nowait()
            except queue.Empty:
                break
            (batch if _merge_key(job.request) == key else waiting).append(job)
        for job in waiting:
            jobs.put(job)
        # A task that was killed or retried meanwhile hung up: its rows are not worth running.
        for job in [job for job in batch if _hung_up(job)]:
            batch.remove(job)
            job.done.set()
        if not batch:
            continue
        began = time.perf_counter()
        requests = sum(len(job.request[1]) for job in batch)
        stats["running"] = requests
        _run_batch(engine, batch)
        stats["running"] = 0
        stats["busy_s"] += time.perf_counter() - began
        stats["calls"] += 1
        stats["requests"] += requests
        stats["last_request"] = time.monotonic()
        for job in batch:
            job.done.set()
    with contextlib.suppress(OSError):
        current = json.loads(info_path.read_text())
        if current.get("pid") == os.getpid():
            info_path.unlink()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="misbench engine process (started by tasks)")
    parser.add_argument("--slot", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--settings", required=True)
    parser.add_argument("--idle-seconds", type=float, default=600.0)
    args = parser.parse_args()
    settings = json.loads(Path(args.settings).read_text())
    serve(args.slot, Path(args.folder), settings, args.idle_seconds)


if __name__ == "__main__":
    main()
