"""llama.cpp on CPU: the embedded default. GGUF models shipped inside PyPI packages (raw byte
chunks, one package each) are assembled once into a cache folder; any local GGUF also works."""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import threading
import time
from pathlib import Path
from typing import Sequence

from misbench.llm import Generation, LLMBackend, Messages, SamplingParams, split_reply_start
from misbench.workers import cpu_threads


def _package_chunks(package: str) -> list[Path]:
    # Located without importing: some model packages import heavy optional dependencies.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model package '{package}' is not installed (pip install {package.replace('_', '-')})"
        )
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    chunks = sorted(folder.glob("*.bin"))
    if not chunks:
        raise FileNotFoundError(f"model package '{package}' holds no data/*.bin chunks")
    return chunks


def assemble_gguf(name: str, packages: Sequence[str], cache_dir: str) -> Path:
    """Concatenate the packages' chunks, in package order, into <cache_dir>/<name>.gguf once.
    Written to a temporary name and renamed, so concurrent workers never read half a file."""
    target = Path(os.path.expanduser(cache_dir)) / f"{name}.gguf"
    chunks = [chunk for package in packages for chunk in _package_chunks(package)]
    size = sum(chunk.stat().st_size for chunk in chunks)
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with open(partial, "wb") as out:
        for chunk in chunks:
            with open(chunk, "rb") as source:
                while data := source.read(16 * 1024 * 1024):
                    out.write(data)
    with open(partial, "rb") as check:
        if check.read(4) != b"GGUF":
            partial.unlink()
            raise ValueError(f"model '{name}': assembled file is not GGUF")
    os.replace(partial, target)
    return target


def model_path(config: dict, llm_settings: dict) -> tuple[str, Path]:
    model = config["model"]
    if str(model).endswith(".gguf"):
        return Path(model).stem, Path(os.path.expanduser(model))
    catalog = llm_settings.get("models", {})
    if model not in catalog:
        raise ValueError(f"llm.llama_cpp.model '{model}' is neither a .gguf path nor in llm.models")
    return model, assemble_gguf(model, catalog[model]["packages"], llm_settings["cache_dir"])


def use_extra_buffer_types(setting, system_info: str) -> bool:
    """Whether llama.cpp may place weights in its "extra buffer types" (weights repacked for
    AMX or wider SIMD kernels). ``auto``: yes, unless this llama.cpp was compiled with AMX
    kernels: their repacking crashes the first decode of some quantised models (an upstream
    bug seen with Qwen2.5 Q4_K_M on Intel Xeon with AMX)."""
    if isinstance(setting, bool):
        return setting
    if str(setting).lower() != "auto":
        raise ValueError(f"llm.llama_cpp.extra_buffer_types must be auto, true or false, not {setting!r}")
    return "AMX_INT8 = 1" not in system_info


_LOADING = threading.Lock()


@contextlib.contextmanager
def _model_params(use_extra_bufts: bool):
    """``Llama()`` builds its model parameters from llama.cpp's defaults and offers no keyword
    for ``use_extra_bufts``; hand it defaults with ours set while the model loads (one load at
    a time in a process, so no other load sees the swap)."""
    import llama_cpp.llama_cpp as bindings

    with _LOADING:
        default = bindings.llama_model_default_params

        def with_ours():
            params = default()
            params.use_extra_bufts = use_extra_bufts
            return params

        bindings.llama_model_default_params = with_ours
        try:
            yield
        finally:
            bindings.llama_model_default_params = default


class LlamaCppBackend(LLMBackend):
    backend = "llama_cpp"

    def __init__(self, config: dict, llm_settings: dict):
        import llama_cpp
        from llama_cpp import Llama

        name, path = model_path(config, llm_settings)
        super().__init__(name)
        threads = cpu_threads(config.get("n_threads"), config.get("workers", 1))
        system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
        extra_bufts = use_extra_buffer_types(config["extra_buffer_types"], system_info)
        with _model_params(extra_bufts):
            self.engine = Llama(
                model_path=str(path),
                n_ctx=int(config["n_ctx"]),
                n_threads=int(threads),
                # Prompt processing too: llama.cpp's default (all cores) oversubscribes the CPU
                # when several engines share a machine, and its spinning threads then crawl.
                n_threads_batch=int(threads),
                n_batch=int(config["n_batch"]),
                seed=int(config["seed"]),
                verbose=False,
            )
        # What the engine was really given (tests read it; a wrong value would be a crash risk).
        self.extra_buffer_types = bool(self.engine.model_params.use_extra_bufts)
        self.system_info = system_info
        vocab = self.engine._model.vocab
        self._end_tokens = [token for token in range(self.engine.n_vocab())
                            if llama_cpp.llama_vocab_is_eog(vocab, token)]

    def _no_end_before(self, min_tokens: int):
        """A logits processor that forbids every end-of-generation token for the reply's first
        ``min_tokens`` tokens (llama.cpp hands it the prompt's tokens and the reply's so far)."""
        if min_tokens <= 0:
            return None
        from llama_cpp import LogitsProcessorList

        prompt_length: list[int] = []
        end_tokens = self._end_tokens

        def forbid(input_ids, scores):
            if not prompt_length:
                prompt_length.append(len(input_ids))
            if len(input_ids) - prompt_length[0] < min_tokens:
                scores[end_tokens] = -float("inf")
            return scores

        return LogitsProcessorList([forbid])

    def _chat_text(self, messages: Messages):
        """The chat template applied to ``messages``, ending where the assistant's reply starts."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        formatter = Jinja2ChatFormatter(
            template=self.engine.metadata["tokenizer.chat_template"], eos_token="", bos_token=""
        )
        return formatter(messages=list(messages))

    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        results = []
        for messages in prompts:
            started = time.perf_counter()
            head, start = split_reply_start(messages)
            try:
                if start is None:
                    response = self.engine.create_chat_completion(
                        messages=head, temperature=params.temperature, top_p=params.top_p,
                        max_tokens=params.max_tokens, seed=params.seed,
                        logits_processor=self._no_end_before(params.min_tokens),
                    )
                    choice = response["choices"][0]
                    text = choice["message"]["content"]
                else:  # continue the reply from its start: the template, then the start
                    chat = self._chat_text(head)
                    # (no stop strings: the model's end-of-turn token ends the reply)
                    response = self.engine.create_completion(
                        prompt=chat.prompt + start, temperature=params.temperature, top_p=params.top_p,
                        max_tokens=params.max_tokens, seed=params.seed,
                        logits_processor=self._no_end_before(params.min_tokens),
                    )
                    choice = response["choices"][0]
                    text = start + choice["text"]
                usage = response.get("usage", {})
                results.append(Generation(
                    text=text,
                    tokens_in=usage.get("prompt_tokens", 0),
                    tokens_out=usage.get("completion_tokens", 0),
                    finish_reason=choice.get("finish_reason"),
                    latency_s=time.perf_counter() - started,
                ))
            except Exception as exc:  # noqa: BLE001 - recorded on the row, retried next run
                results.append(Generation(text=None, latency_s=time.perf_counter() - started,
                                          error=f"{type(exc).__name__}: {exc}"[:500]))
        return results

    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        """Log-probability that the reply starts with each option, from the logits after the
        chat prompt (no logits_all: that would hold a vocabulary-sized row per context token).
        An option is counted in both spellings a tokenizer may use for a reply's first word,
        with and without a leading space ("A", " A"): their probabilities add up."""
        import numpy as np

        text = self._chat_text(prompt).prompt
        tokens = self.engine.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        # Keep the cached prefix this prompt shares with the last one (the system prompt and
        # instructions of a setting): only the rest is evaluated; at least one token is.
        prefix = 0
        cached = self.engine.input_ids[: self.engine.n_tokens]
        for have, want in zip(cached, tokens[:-1]):
            if have != want:
                break
            prefix += 1
        self.engine.n_tokens = prefix  # eval() drops the cache beyond it
        self.engine.eval(tokens[prefix:])
        # Without logits_all, llama.cpp keeps only the last token's logits, in its context.
        last = np.ctypeslib.as_array(self.engine._ctx.get_logits(), shape=(self.engine.n_vocab(),))
        logits = np.array(last, dtype=np.float64)
        top = logits.max()
        normaliser = top + np.log(np.exp(logits - top).sum())
        scores = []
        for option in options:
            first_tokens = set()
            for spelling in (option.strip(), " " + option.strip()):
                ids = self.engine.tokenize(spelling.encode("utf-8"), add_bos=False, special=False)
                # only a token that is the option's start (a tokenizer may split " A" into a
                # bare space and "A"; the space says nothing about the option)
                if ids and self.engine.detokenize([ids[0]]).decode("utf-8", "replace").strip():
                    first_tokens.add(ids[0])
            values = [logits[i] - normaliser for i in first_tokens]
            scores.append(float(np.logaddexp.reduce(values)) if values else -math.inf)
        return scores
