"""Any OpenAI-compatible chat endpoint (vLLM's server, hosted APIs) over HTTP.

The API key comes from the environment variable named by ``api_key_env`` (on Databricks,
a secret exposed as an environment variable); it is never read from files, logged, or
recorded. Requests run ``max_concurrency`` at a time, with a timeout and retries with
exponential backoff on 429, 5xx and network errors.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from misbench.llm import Generation, LLMBackend, Messages, SamplingParams, option_scores, split_reply_start

_RETRYABLE = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend(LLMBackend):
    backend = "openai"

    def __init__(self, config: dict):
        super().__init__(str(config["model"]))
        self.base_url = str(config["base_url"]).rstrip("/")
        self.api_key = os.environ.get(str(config["api_key_env"]), "")
        self.concurrency = int(config.get("max_concurrency", 8))
        self.timeout = float(config.get("timeout_seconds", 120))
        self.retries = int(config.get("retries", 4))
        self.backoff = float(config.get("backoff_seconds", 2.0))

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    def _post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})},
            method="POST",
        )
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                if exc.code not in _RETRYABLE or attempt == self.retries:
                    detail = exc.read()[:300].decode("utf-8", "replace")
                    raise RuntimeError(f"HTTP {exc.code} from {self.base_url}: {detail}") from None
                retry_after = exc.headers.get("Retry-After", "")
                time.sleep(float(retry_after) if retry_after.isdigit() else delay)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == self.retries:
                    raise RuntimeError(f"{type(exc).__name__} calling {self.base_url}: {exc}") from None
                time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _one(self, messages: Messages, params: SamplingParams) -> Generation:
        started = time.perf_counter()
        head, start = split_reply_start(messages)
        if start is not None:
            # Chat APIs do not all continue a begun reply: ask for the opening in words, and
            # make sure the reply has it.
            head = [*head[:-1], {**head[-1], "content": f"{head[-1]['content']}\n\nBegin your reply with "
                                                        f"exactly these words: {start}"}]
        try:
            response = self._post("/chat/completions", {
                "model": self.model, "messages": head, "temperature": params.temperature,
                "top_p": params.top_p, "max_tokens": params.max_tokens, "seed": params.seed,
            })
            choice = response["choices"][0]
            usage = response.get("usage") or {}
            text = choice["message"]["content"]
            if start is not None and text is not None and not text.lstrip().startswith(start.strip()):
                text = f"{start} {text.lstrip()}"
            return Generation(
                text=text, tokens_in=usage.get("prompt_tokens", 0),
                tokens_out=usage.get("completion_tokens", 0),
                finish_reason=choice.get("finish_reason"),
                latency_s=time.perf_counter() - started,
            )
        except Exception as exc:  # noqa: BLE001 - recorded on the row, retried next run
            return Generation(text=None, latency_s=time.perf_counter() - started,
                              error=f"{type(exc).__name__}: {exc}"[:500])

    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda messages: self._one(messages, params), prompts))

    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        response = self._post("/chat/completions", {
            "model": self.model, "messages": prompt, "max_tokens": 1, "temperature": 0.0,
            "logprobs": True, "top_logprobs": 20,
        })
        return option_scores(response, options)

    def option_logprobs_many(self, prompts: Sequence[Messages], options: Sequence[str]) -> list[list[float]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda prompt: self.option_logprobs(prompt, options), prompts))
