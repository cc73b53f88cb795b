"""The one way misbench calls a model: the OpenAI-compatible API, through the ``openai`` library.

Every stage (generation passes, the judge, RtD, evaluation, hoax evaluation) holds a
``ModelClient``. Its endpoint is the server of the task's slot that misbench started
(``misbench.llm.servers``), or, with ``llm.backend: openai``, one it did not start (a vLLM
cluster, Databricks Model Serving, ``python -m llama_cpp.server`` started by hand).

A prompt whose last message is the assistant's is a reply already begun (``split_reply_start``);
how the endpoint continues it (``begun_reply``): ``continue_final_message`` (vLLM's and
llama.cpp's C++ servers, misbench's fake), ``template`` (the model's chat template rendered
here, then a plain completion after the reply's start: llama-cpp-python's server) or
``instruct`` (hosted chat APIs that continue nothing: the opening asked for in words).
"""
from __future__ import annotations

import datetime
import functools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from misbench.ids import digest
from misbench.llm import (EngineDied, Generation, Messages, SamplingParams, model_identity, scores_from_top,
                          split_reply_start)
from misbench.llm.servers import ensure_server, entry_alive, serving, log_tail, read_entry, registry_dir, task_slot, touch
from misbench.workers import settings_key

TOP_LOGPROBS = 20  # candidates read for a reply's first token (vLLM's default --max-logprobs)
BEGUN_REPLY = ("continue_final_message", "template", "instruct")
# Requests in flight per task where llm.client.max_concurrency is null (conf/base.yaml says why).
CONCURRENCY = {"llama_cpp": 2, "fake": 2, "vllm": 64, "openai": 8}
# Statuses no retry cured that say the endpoint, not the prompt, is the trouble.
_ENDPOINT_STATUSES = {401, 403, 404, 408, 409, 429}
CONNECT_TIMEOUT_SECONDS = 15.0


class EndpointError(RuntimeError):
    """The endpoint cannot serve this stage at all (does not answer, gives no log-probs): the
    task fails with one line naming the endpoint and the stage."""


class RowFailed(str):
    """A prompt the endpoint refused (too long, rejected): its row fails, the others go on."""


class ModelClient:
    def __init__(self, settings: dict, stage: str):
        self.settings, self.stage, self.backend = settings, stage, settings["backend"]
        calls = settings["client"]
        self.concurrency = int(calls["max_concurrency"] or CONCURRENCY[self.backend])
        self.timeout, self.retries = float(calls["timeout_seconds"]), int(calls["retries"])
        self.entry: dict | None = None
        self._attaching = threading.Lock()  # tasks' threads of one worker share a client
        if self.backend == "openai":
            endpoint = settings["openai"]
            base_url, model = str(endpoint["base_url"]).rstrip("/"), model_identity(settings)
            # The key comes from the environment (a Databricks secret exposed as a variable):
            # never from files, never logged or recorded.
            self.key_variable = str(endpoint["api_key_env"])
            key = os.environ.get(self.key_variable, "") or "none"
            self._connect(base_url, model, key, {"begun_reply": str(endpoint["begun_reply"])},
                          f"endpoint-{digest(base_url + model)[:12]}")
        else:
            self._attach()

    def __repr__(self) -> str:  # never show the key
        return f"ModelClient(model={self.model!r}, base_url={self.base_url!r}, stage={self.stage!r})"

    # -- the endpoint ------------------------------------------------------------------------------
    def _connect(self, base_url: str, model: str, key: str, needs: dict, load_id: str) -> None:
        import openai

        begun_reply = needs["begun_reply"]
        if begun_reply not in BEGUN_REPLY or (begun_reply == "template" and not needs.get("chat_template")):
            raise ValueError(f"llm.openai.begun_reply {begun_reply!r} is not one of continue_final_message, "
                             "instruct")
        self.base_url, self.model, self.begun_reply, self.load_id = base_url, model, begun_reply, load_id
        self._template = _compile(needs["chat_template"]) if begun_reply == "template" else None
        # Hosted chat APIs refuse parameters they do not know (min_tokens); a server that
        # continues a begun reply takes it. vLLM's CPU build hangs on per-request seeds.
        self.extra_parameters = begun_reply != "instruct"
        self.per_request_seed = bool(needs.get("per_request_seed", True))
        self.server_defaults = dict(needs.get("extra_body") or {})  # what a managed server must be told
        # Retries with backoff on connection errors, 408, 409, 429 and 5xx: the library's own. A
        # reply may take long; a connection may not (an endpoint that is not there fails fast).
        timeout = openai.Timeout(self.timeout, connect=min(self.timeout, CONNECT_TIMEOUT_SECONDS))
        self.api = openai.OpenAI(base_url=base_url, api_key=key, max_retries=self.retries, timeout=timeout)

    def _attach(self) -> None:
        """Use this slot's server, started now if none runs."""
        self.entry = ensure_server(self.settings)
        self.folder = registry_dir(self.settings)
        self.key_variable = None
        self._connect(self.entry["base_url"], self.entry["model"], "local", self.entry, self.entry["load_id"])

    def _ready(self) -> None:
        """Before a batch is sent: a server gone since (idle exit, a crash between tasks) lost
        nothing, so find or start the slot's server again."""
        if self.entry is None:
            return
        with self._attaching:
            current = read_entry(self.folder / f"{self.entry['slot']}.json")
            if not current or current.get("pid") != self.entry["pid"] or not entry_alive(self.entry, "server_pid"):
                self._attach()
            touch(self.folder, self.entry["slot"])

    def _failed(self, error: Exception):
        """An error no retry cured: a managed server that died fails the task (``EngineDied``,
        Spark retries it on a new server); an endpoint that does not answer or will not serve
        fails it too, with one line; a refused prompt (another 4xx) fails its row only
        (returned)."""
        import openai

        entry = self.entry
        if entry is not None and not serving(entry):
            deadline = time.monotonic() + 5  # its supervisor logs how it ended, then exits
            while entry_alive(entry) and time.monotonic() < deadline:
                time.sleep(0.1)
            raise EngineDied(
                f"the {self.backend} server (pid {entry['server_pid']}) for {entry['slot']} went away "
                f"({type(error).__name__}); the task fails and Spark retries it on a new server. Its log "
                f"ends:\n{log_tail(self.folder / (entry['slot'] + '.log'), offset=entry.get('log_offset', 0))}"
            ) from error
        status = getattr(error, "status_code", None)
        if isinstance(error, openai.APIStatusError) and 400 <= status < 500 and status not in _ENDPOINT_STATUSES:
            return RowFailed(f"{self.stage}: {self.base_url} refused the prompt (HTTP {status}): "
                             f"{_message(error)}"[:500])
        what = "does not answer" if isinstance(error, openai.APIConnectionError) else \
            f"failed (HTTP {status}: {_message(error)})"
        if status == 401 and self.key_variable:
            what += f" (its key comes from ${self.key_variable}" + \
                    (")" if os.environ.get(self.key_variable) else ", which is not set)")
        elif status == 401 and self.key_variable == "":
            what += " (no key sent: llm.endpoint_key_env names its variable)"
        raise EndpointError(f"{self.stage}: the model endpoint {self.base_url} ({self.model}) {what}"[:500]) from error

    def _each(self, call, items) -> list:
        """``call`` on every item, ``max_concurrency`` at a time, in order. While they run the
        server's idle clock is kept from running out; the first error that fails the task
        cancels the items not yet sent."""
        self._ready()
        done = threading.Event()
        if self.entry is not None:
            every = max(1.0, min(30.0, float(self.settings["server"]["idle_seconds"]) / 4))
            folder, slot = self.folder, self.entry["slot"]

            def keep_awake():
                while not done.wait(every):
                    touch(folder, slot)

            threading.Thread(target=keep_awake, daemon=True).start()
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            futures = [pool.submit(call, item) for item in items]
            return [future.result() for future in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            done.set()
            if self.entry is not None:
                touch(self.folder, self.entry["slot"])

    def _sampling(self, params: SamplingParams) -> tuple[dict, dict]:
        sampling = dict(model=self.model, temperature=params.temperature, top_p=params.top_p,
                        max_tokens=params.max_tokens)
        if self.per_request_seed:
            sampling["seed"] = params.seed
        if params.stop:
            sampling["stop"] = list(params.stop)
        extra = dict(self.server_defaults)
        if params.min_tokens and self.extra_parameters:
            extra["min_tokens"] = params.min_tokens
        return sampling, extra

    # -- generation --------------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        """One generation per prompt, in order; a refused prompt comes back with ``error`` set.
        A prompt ending with the assistant's message is continued from it, and the returned
        text starts with that message."""
        return self._each(lambda messages: self._generate(messages, params), prompts)

    def _generate(self, messages: Messages, params: SamplingParams) -> Generation:
        import openai

        started = time.perf_counter()
        head, start = split_reply_start(messages)
        sampling, extra = self._sampling(params)
        try:
            if start is not None and self.begun_reply == "template":
                prompt = self._template.render(messages=head, add_generation_prompt=True, bos_token="",
                                               eos_token="") + start
                response = self.api.completions.create(prompt=prompt, extra_body=extra, **sampling)
                text = start + (response.choices[0].text or "")
            elif start is not None and self.begun_reply == "continue_final_message":
                response = self.api.chat.completions.create(
                    messages=messages, extra_body={**extra, "continue_final_message": True,
                                                   "add_generation_prompt": False}, **sampling)
                text = start + (response.choices[0].message.content or "")
            else:
                if start is not None:  # instruct: ask for the opening in words
                    head = [*head[:-1], {**head[-1], "content": f"{head[-1]['content']}\n\nBegin your reply "
                                                                f"with exactly these words: {start}"}]
                response = self.api.chat.completions.create(messages=head, extra_body=extra, **sampling)
                text = response.choices[0].message.content
                if start is not None and text is not None and not text.lstrip().startswith(start.strip()):
                    text = f"{start} {text.lstrip()}"
        except openai.OpenAIError as error:
            return Generation(text=None, latency_s=time.perf_counter() - started, error=self._failed(error))
        usage = response.usage
        return Generation(text=text, tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
                          tokens_out=getattr(usage, "completion_tokens", 0) or 0,
                          finish_reason=response.choices[0].finish_reason,
                          latency_s=time.perf_counter() - started)

    # -- answer options by log-probability ---------------------------------------------------------
    def option_logprobs(self, prompt: Messages, options: Sequence[str], required: bool = True
                        ) -> list[float] | RowFailed:
        return self.option_logprobs_many([prompt], options, required)[0]

    def option_logprobs_many(self, prompts: Sequence[Messages], options: Sequence[str],
                             required: bool = True) -> list[list[float] | RowFailed]:
        """Per prompt, the log-probability of each option as the reply's first token, read from
        the endpoint's ``top_logprobs`` ("A" and " A" add up; -inf for an option not among
        them), or the ``RowFailed`` of a refused prompt or of a reply that ended before its
        first token (an endpoint that does not take min_tokens). An endpoint that returns no
        log-probs fails the stage, unless not ``required`` (the caller asks for replies
        instead): then every option gets -inf."""
        return self._each(lambda prompt: self._scores(prompt, options, required), prompts)

    def _scores(self, prompt: Messages, options: Sequence[str], required: bool) -> list[float] | RowFailed:
        import openai

        # Where the server takes it, min_tokens 1: a reply may not end before its first token
        # (the log-probs are the model's own, read before any such rule).
        extra = {**self.server_defaults, **({"min_tokens": 1} if self.extra_parameters else {})}
        try:
            response = self.api.chat.completions.create(
                model=self.model, messages=prompt, max_tokens=1, temperature=0.0, logprobs=True,
                top_logprobs=TOP_LOGPROBS, **({"extra_body": extra} if extra else {}))
        except openai.OpenAIError as error:
            return self._failed(error)
        logprobs = response.choices[0].logprobs
        content = getattr(logprobs, "content", None)
        if logprobs is not None and content is not None and not content:
            # log-probs served, but no token: the reply ended before it began (llama.cpp leaves
            # out an end-of-turn token); this row has no letter to read
            return RowFailed(f"{self.stage}: {self.base_url} ({self.model}) ended the reply at once: no "
                             "option log-probs for this prompt")
        if not content or not content[0].top_logprobs:
            if not required:
                return [float("-inf")] * len(options)
            raise EndpointError(f"{self.stage}: the model endpoint {self.base_url} ({self.model}) answers "
                                "without log-probs (top_logprobs): use an answer mode that generates, or a "
                                "server that returns them")
        return scores_from_top(((entry.token, entry.logprob) for entry in content[0].top_logprobs), options)


def _message(error: Exception) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        body = body.get("message") or body.get("detail") or body.get("error") or body
    return " ".join(str(body or error).split())[:300]


def _compile(template: str):
    """A model's chat template, rendered as Hugging Face tokenizers do (sandboxed Jinja)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise ValueError(message)

    def strftime_now(format: str) -> str:  # Llama 3's templates date the system prompt
        return datetime.datetime.now().strftime(format)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
    return environment.from_string(template)


_CLIENTS: dict[str, ModelClient] = {}
_CLIENTS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def endpoint_model(base_url: str, api_key_env: str) -> str:
    """The model an endpoint misbench did not start serves, where ``llm.openai.model`` names
    none: its only one (``GET /models``); an endpoint serving several must be told which."""
    import openai

    api = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env, "") or "none", max_retries=1,
                        timeout=openai.Timeout(60, connect=CONNECT_TIMEOUT_SECONDS))
    try:
        names = sorted(model.id for model in api.models.list())
    except openai.APIConnectionError as error:
        raise EndpointError(f"the model endpoint {base_url} does not answer (asked which model it serves)"[:500]) \
            from error
    except openai.OpenAIError as error:
        status = getattr(error, "status_code", None)
        hint = " (is the URL the API's base, ending in /v1?)" if status == 404 else \
            " (no key sent: llm.endpoint_key_env names its variable)" if status == 401 and not api_key_env else ""
        raise EndpointError(f"the model endpoint {base_url} does not say which model it serves{hint}: "
                            f"{_message(error)}; set llm.openai.model"[:500]) from error
    if len(names) != 1:
        raise EndpointError(f"the model endpoint {base_url} serves {len(names)} models "
                            f"({', '.join(names[:8]) or 'none'}): set llm.openai.model to one of them"[:500])
    return names[0]


def model_client(settings: dict, stage: str) -> ModelClient:
    """The client a task of ``stage`` uses for the ``llm`` settings: one per Python worker,
    GPU slot, stage and settings (its connections are reused by every later batch); it finds
    the slot's running server, or starts it, and follows it when it is replaced."""
    key = f"{stage}:{task_slot()}:{settings_key(settings)}"
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = ModelClient(settings, stage)
    client._ready()  # the server it knew may have gone since
    return client
