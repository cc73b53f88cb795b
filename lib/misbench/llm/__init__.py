"""What every part of misbench says about models: messages, sampling, results, errors.

A model is always called through the OpenAI-compatible API (``misbench.llm.client``): a server
misbench starts itself (``misbench.llm.servers``: ``llm.backend`` llama_cpp, the embedded CPU
default; vllm, GPU clusters; fake, replies computed from the prompt for tests and dry runs) or
one it did not start (``llm.backend: openai``).
"""
from __future__ import annotations

import json
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
    stop: tuple[str, ...] = ()  # texts that end the reply (not included in it)

    def key(self) -> str:
        fields = asdict(self)
        if not fields["stop"]:
            del fields["stop"]  # the key rows were stored under before stop strings existed
        return json.dumps(fields, sort_keys=True)


class EngineDied(RuntimeError):
    """The model server misbench started went away while a task waited on it: the task fails,
    Spark retries it and the retry starts a new server."""


@dataclass
class Generation:
    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0
    error: str | None = None


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


def model_identity(llm: dict) -> str:
    """The model name a backend will report, known on the driver without loading it."""
    backend = llm["backend"]
    if backend == "openai" and not llm[backend].get("model"):
        from misbench.llm.client import endpoint_model  # asks the endpoint, once per process

        return endpoint_model(str(llm[backend]["base_url"]).rstrip("/"), str(llm[backend]["api_key_env"]))
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
