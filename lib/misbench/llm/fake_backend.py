"""A deterministic stand-in for a model: replies computed from the prompt, no weights.

For the tests of logic around the model (chunks, resume, queues, kills, run-all's skip rules,
metric bookkeeping) and for dry runs of a job's wiring on a machine without a model. It
behaves like a backend in every way the pipeline can see (the engine process, rows, costs,
errors), and answers by fixed rules:

- ``llm.fake.replies``: canned replies, ``{substring: reply}``; the first substring found in
  the prompt's last user message gives the reply (and, for log-probabilities, the option it
  names, by letter or by the option's text, gets most of the weight);
- a begun reply (the prompt ends with the assistant's words) is continued with neutral filler
  sentences that add no fact;
- a prompt with lettered options (``A. ...``) that asks for one letter or for JSON gets one
  letter, or the JSON object, naming an option drawn from the prompt's hash;
- a prompt that hands a text to rewrite (a line ``Text:`` followed by the text, last in the
  prompt) gets that text back unchanged, so a rewrite keeps every fact;
- anything else gets a short sentence made of the prompt's own words.

Log-probabilities: for a "Text: ... Statement: ..." judge prompt, most weight on the first
option (yes) when the statement appears word for word in the text, else on the second (no),
the exact share drawn from the prompt's hash (the same text and statement, the same score);
otherwise a spread drawn from the prompt's hash. The same prompt and seed always give the same
reply. Rows name the model ``llm.fake.model`` only: change it along with ``replies`` where
stored results must not be reused.
"""
from __future__ import annotations

import json
import math
import re
import time
from typing import Sequence

from misbench.ids import digest
from misbench.llm import Generation, LLMBackend, Messages, SamplingParams, split_reply_start

FILLER = (
    "It is a subject of many reference works.",
    "Historians and travellers have written about it at length.",
    "Its history spans several centuries of records.",
    "Local archives keep documents about it.",
    "It often appears in surveys and reports of the region.",
    "Visitors and scholars continue to take an interest in it.",
)
_OPTION = re.compile(r"^([A-Z])[.)]\s+(.+)$", re.M)
_TEXT_BLOCK = re.compile(r"^Text:[ \t]*\n(.+)\Z", re.M | re.S)
_ASKS_FOR_A_CHOICE = re.compile(r"one letter|JSON", re.I)
_JUDGED = re.compile(r"^Text:[ \t]*\n(?P<text>.+?)\n\s*\nStatement:[ \t]*(?P<statement>.+?)\s*$", re.M | re.S)


def _digest(*parts) -> int:
    return int(digest("\x1f".join(map(str, parts)), 16), 16)


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def _last_user(messages: Messages) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")


def _contains(text: str, statement: str) -> bool:
    """Whether the statement's words appear in the text in order, next to each other."""
    wanted, have = _words(statement), _words(text)
    return bool(wanted) and any(have[i:i + len(wanted)] == wanted for i in range(len(have) - len(wanted) + 1))


class FakeBackend(LLMBackend):
    backend = "fake"

    def __init__(self, config: dict):
        super().__init__(str(config["model"]))
        self.replies = {str(k): str(v) for k, v in (config["replies"] or {}).items()}
        self.seconds_per_request = float(config["seconds_per_request"] or 0)

    def _canned(self, user: str) -> str | None:
        return next((reply for key, reply in self.replies.items() if key in user), None)

    def _reply(self, messages: Messages, params: SamplingParams) -> tuple[str, str]:
        head, start = split_reply_start(messages)
        user = _last_user(head)
        canned = self._canned(user)
        if canned is not None:
            return canned, "stop"
        pick = _digest(user, start, params.seed)
        if start is not None:
            # about 2/3 of the token budget in words, at least min_tokens
            words = max(params.min_tokens, (2 * params.max_tokens) // 3)
            text, count = start, len(start.split())
            index = pick
            while count < words:
                sentence = FILLER[index % len(FILLER)]
                text, count, index = f"{text} {sentence}", count + len(sentence.split()), index // len(FILLER) + 1
            return text, "length" if count >= params.max_tokens else "stop"
        options = _OPTION.findall(user)
        if options and _ASKS_FOR_A_CHOICE.search(user):
            letter, option = options[pick % len(options)]
            if "JSON" in user:
                return json.dumps({"answer": option.strip(), "explanation": "It is the option that fits."}), "stop"
            return letter, "stop"
        block = _TEXT_BLOCK.search(user)
        if block:
            return block.group(1).strip(), "stop"
        words = [w for w in re.findall(r"[A-Za-z][\w'-]*", user) if len(w) > 3] or ["nothing"]
        chosen = [words[(pick >> (4 * i)) % len(words)] for i in range(6)]
        return " ".join(chosen).capitalize() + ".", "stop"

    def generate(self, prompts: Sequence[Messages], params: SamplingParams) -> list[Generation]:
        results = []
        for messages in prompts:
            started = time.perf_counter()
            if self.seconds_per_request:
                time.sleep(self.seconds_per_request)
            text, finish = self._reply(messages, params)
            prompt_words = sum(len(str(m.get("content") or "").split()) for m in messages)
            results.append(Generation(text=text, tokens_in=prompt_words, tokens_out=len(text.split()),
                                      finish_reason=finish, latency_s=time.perf_counter() - started))
        return results

    def option_logprobs(self, prompt: Messages, options: Sequence[str]) -> list[float]:
        if self.seconds_per_request:
            time.sleep(self.seconds_per_request)
        user = _last_user(prompt)
        canned, judged = self._canned(user), _JUDGED.search(user)
        named = dict(_OPTION.findall(user))
        if canned is not None and any(canned.strip() in (o.strip(), named.get(o.strip(), "").strip()) for o in options):
            weights = [19.0 if canned.strip() in (o.strip(), named.get(o.strip(), "").strip()) else 1.0
                       for o in options]
        elif judged and len(options) == 2:
            chosen = 0 if _contains(judged.group("text"), judged.group("statement")) else 1
            share = 0.9 + 0.09 * (_digest(judged.group("text"), judged.group("statement")) % 1000) / 1000
            weights = [share if i == chosen else 1 - share for i in range(2)]
        else:
            pick = _digest(user, *options)
            weights = [1.0 + ((pick >> (8 * i)) & 0xFF) for i in range(len(options))]
        total = sum(weights)
        return [math.log(w / total) for w in weights]
