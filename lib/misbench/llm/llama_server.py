"""``python -m llama_cpp.server`` with what it lacks: llama.cpp's "extra buffer types",
log-probs that cost one position, not the whole prompt, and a ``min_tokens`` that holds off
every end-of-generation token.

- llama-cpp-python builds a model's parameters from llama.cpp's defaults and offers no setting
  for ``use_extra_bufts``; where its AMX kernels are compiled in, their weight repacking
  crashes the first decode of some quantised models (``llm.llama_cpp.extra_buffer_types``,
  see docs/stages.md, "Portable llama.cpp").
- Its server returns log-probs only from a model loaded with ``logits_all``, and then llama.cpp
  computes the logits of every prompt position and ``create_completion`` log-softmaxes all of
  them, though a completion's log-probs read only the positions from the prompt's last token
  on: twice the time of a letter's log-prob on a 600-token prompt (docs/benchmarks.md). Here
  the model keeps ``logits_all`` (so the server serves log-probs) but each batch computes the
  logits of its last position only, and the log-softmax runs on the rows that are read. Prompt
  log-probs (``echo``) are what this gives up; misbench never asks for them, and a request for
  them is refused rather than answered with rows never computed.
- Its ``min_tokens`` forbids the vocabulary's one ``eos`` token; a model ends its turn with
  others too (Qwen's ``<|im_end|>`` and ``<|endoftext|>``): all of them are held off here.

``python -m misbench.llm.llama_server --extra_buffer_types auto|true|false <its arguments>``.
"""
from __future__ import annotations

import sys

import numpy as np


class RowsOnDemand:
    """``Llama.logits_to_logprobs`` of a 2-D array, computed for the rows sliced out of it."""

    def __init__(self, logits: np.ndarray, to_logprobs):
        self.logits, self.to_logprobs = logits, to_logprobs

    def __getitem__(self, rows):
        return self.to_logprobs(self.logits[rows])


def last_position_llama():
    """``llama_cpp.Llama`` whose evaluation computes each batch's last logits only."""
    import llama_cpp
    from llama_cpp.llama import Llama

    stock_logprobs = getattr(Llama.logits_to_logprobs, "stock", Llama.logits_to_logprobs)

    def logits_to_logprobs(logits, axis=-1):
        if isinstance(logits, np.ndarray) and logits.ndim == 2 and axis == -1:
            return RowsOnDemand(logits, stock_logprobs)  # create_completion slices the rows it reads
        return stock_logprobs(logits, axis)

    logits_to_logprobs.stock = stock_logprobs
    Llama.logits_to_logprobs = staticmethod(logits_to_logprobs)

    class LastPositionLlama(Llama):
        end_tokens: list[int] = []  # the loaded model's end-of-generation tokens

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            vocab = self._model.vocab
            type(self).end_tokens = [token for token in range(self.n_vocab())
                                     if llama_cpp.llama_vocab_is_eog(vocab, token)]

        def create_completion(self, *args, **kwargs):
            if kwargs.get("echo") and kwargs.get("logprobs") is not None:
                raise ValueError("this server does not return the prompt's log-probs (echo with logprobs)")
            return super().create_completion(*args, **kwargs)

        def eval(self, tokens):
            # Llama.eval (llama-cpp-python 0.3.36) with the logits of each batch's last token
            # only: generation samples from it, a completion's log-probs read it and later ones.
            self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
            for start in range(0, len(tokens), self.n_batch):
                batch = tokens[start:start + self.n_batch]
                n_past, n_tokens = self.n_tokens, len(batch)
                self._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)
                self._ctx.decode(self._batch)
                self.input_ids[n_past:n_past + n_tokens] = batch
                if self._logits_all:
                    last = np.ctypeslib.as_array(self._ctx.get_logits_ith(n_tokens - 1), shape=(self._n_vocab,))
                    self.scores[n_past + n_tokens - 1, :] = last
                self.n_tokens += n_tokens
                self._requires_eval = False

    return LastPositionLlama


class NoEndBefore:
    """The server's ``min_tokens`` logits processor (it passes the ``eos`` token alone): no
    end-of-generation token of the loaded model before the reply's ``min_tokens``-th token."""

    def __init__(self, min_tokens: int, token_eos: int, end_tokens: list[int]):
        self.min_tokens, self.end_tokens = min_tokens, end_tokens or [token_eos]
        self.prompt_tokens: int | None = None

    def __call__(self, input_ids, scores):
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        if len(input_ids) - self.prompt_tokens < self.min_tokens:
            scores[self.end_tokens] = -np.inf
        return scores


def main(argv: list[str]) -> None:
    import llama_cpp
    import llama_cpp.llama_cpp as bindings

    from misbench.llm.models import use_extra_buffer_types

    setting = "auto"
    if "--extra_buffer_types" in argv:
        at = argv.index("--extra_buffer_types")
        setting = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    chosen = {"true": True, "false": False}.get(setting.lower(), setting)
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    extra = use_extra_buffer_types(chosen, system_info)
    default = bindings.llama_model_default_params

    def with_ours():
        params = default()
        params.use_extra_bufts = extra
        return params

    bindings.llama_model_default_params = with_ours  # the server loads one model, after this
    llama_cpp.Llama = loaded = last_position_llama()  # what llama_cpp.server.model loads the model with
    llama_cpp.MinTokensLogitsProcessor = lambda min_tokens, token_eos: NoEndBefore(
        min_tokens, token_eos, loaded.end_tokens)  # what llama_cpp.server.app builds for min_tokens
    print(f"llama.cpp extra buffer types: {'on' if extra else 'off'} ({setting})", flush=True)
    sys.argv = ["llama_cpp.server", *argv]
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
