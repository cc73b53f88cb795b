"""A deterministic stand-in for a model server: replies computed from the prompt, no weights.

For the tests of logic around the model (chunks, resume, queues, kills, run-all's skip rules,
metric bookkeeping) and for dry runs of a job's wiring on a machine without a model. It is an
OpenAI-compatible server (chat completions, ``continue_final_message``, ``min_tokens``, seeds,
``top_logprobs``), started and called as every model is, so everything the pipeline can see
(the server process, rows, costs, errors) is real; it answers one request at a time, by fixed
rules:

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

Log-probabilities of the reply's first token (``top_logprobs``): for a "Text: ... Statement:
..." judge prompt, most weight on the yes word (``llm.answer_words``) when the statement
appears word for word in the text, else on the no word, the exact share drawn from the prompt's
hash (the same text and statement, the same score); for lettered options, a spread over the
letters drawn from the prompt's hash (most weight on a canned reply's option); otherwise a
spread over the yes and no words. The same prompt and seed always give the same
reply. Rows name the model ``llm.fake.model`` only: change it along with ``replies`` where
stored results must not be reused.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time

from misbench.ids import digest
from misbench.llm import Messages, SamplingParams, split_reply_start

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


class FakeModel:
    def __init__(self, config: dict, answer_words: dict):
        self.model = str(config["model"])
        self.replies = {str(k): str(v) for k, v in (config["replies"] or {}).items()}
        self.seconds_per_request = float(config["seconds_per_request"] or 0)
        self.yes, self.no = str(answer_words["yes_word"]), str(answer_words["no_word"])

    def _canned(self, user: str) -> str | None:
        return next((reply for key, reply in self.replies.items() if key in user), None)

    def reply(self, messages: Messages, params: SamplingParams) -> tuple[str, str]:
        """The whole reply (a begun one included) and why it ended."""
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

    def first_token(self, prompt: Messages) -> list[tuple[str, float]]:
        """The reply's likely first tokens and their log-probabilities."""
        user = _last_user(prompt)
        canned, judged = self._canned(user), _JUDGED.search(user)
        named = dict(_OPTION.findall(user))
        if judged:
            chosen = 0 if _contains(judged.group("text"), judged.group("statement")) else 1
            share = 0.9 + 0.09 * (_digest(judged.group("text"), judged.group("statement")) % 1000) / 1000
            tokens, weights = [self.yes, self.no], [share if i == chosen else 1 - share for i in range(2)]
        elif named:
            tokens = list(named)
            if canned is not None and any(canned.strip() in (t, named[t].strip()) for t in tokens):
                weights = [19.0 if canned.strip() in (t, named[t].strip()) else 1.0 for t in tokens]
            else:
                pick = _digest(user, *tokens)
                weights = [1.0 + ((pick >> (8 * i)) & 0xFF) for i in range(len(tokens))]
        else:
            tokens = [self.yes, self.no]
            if canned is not None and canned.strip() in tokens:
                weights = [19.0 if canned.strip() == t else 1.0 for t in tokens]
            else:
                pick = _digest(user, *tokens)
                weights = [1.0 + ((pick >> (8 * i)) & 0xFF) for i in range(len(tokens))]
        total = sum(weights)
        return [(token, math.log(weight / total)) for token, weight in zip(tokens, weights)]


def create_app(model: FakeModel):
    """The OpenAI-compatible routes, answered one request at a time (as one CPU engine does)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    one_at_a_time = asyncio.Lock()

    async def models(_: Request):
        return JSONResponse({"object": "list", "data": [{"id": model.model, "object": "model"}]})

    async def chat(request: Request):
        body = await request.json()
        messages = body.get("messages") or []
        if body.get("model") != model.model:
            return JSONResponse({"error": {"message": f"no model {body.get('model')!r}"}}, status_code=404)
        if not messages or any(not isinstance(m, dict) or "content" not in m for m in messages):
            return JSONResponse({"error": {"message": "messages must be a list of {role, content}"}},
                                status_code=400)
        params = SamplingParams(temperature=float(body.get("temperature") or 0), top_p=float(body.get("top_p") or 1),
                                max_tokens=int(body.get("max_tokens") or 512), seed=int(body.get("seed") or 0),
                                min_tokens=int(body.get("min_tokens") or 0))
        async with one_at_a_time:
            if await request.is_disconnected():  # its task was killed while it waited: not run (vLLM aborts too)
                return JSONResponse({"error": {"message": "the client went away"}}, status_code=499)
            if model.seconds_per_request:
                await asyncio.sleep(model.seconds_per_request)
            begun = split_reply_start(messages)[1] if body.get("continue_final_message") else None
            if body.get("logprobs"):
                candidates = model.first_token(messages)[: int(body.get("top_logprobs") or 20)]
                text, finish = max(candidates, key=lambda c: c[1])[0], "length"
                logprobs = {"content": [{"token": text, "logprob": max(c[1] for c in candidates), "bytes": None,
                                         "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                                          for t, v in candidates]}]}
            else:
                text, finish = model.reply(messages, params)
                if begun is not None:  # the continuation only, as vLLM returns it
                    text = text[len(begun):] if text.startswith(begun) else " " + text.lstrip()
                logprobs = None
        prompt_words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return JSONResponse({
            "id": f"fake-{_digest(json.dumps(body, sort_keys=True)) % 10**12}", "object": "chat.completion",
            "created": int(time.time()), "model": model.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                         "logprobs": logprobs}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(text.split()),
                      "total_tokens": prompt_words + len(text.split())}})

    return Starlette(routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="misbench's fake model server (replies computed from the prompt)")
    parser.add_argument("--spec", required=True, help="JSON: {fake: llm.fake, answer_words: llm.answer_words}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    spec = json.loads(args.spec)
    uvicorn.run(create_app(FakeModel(spec["fake"], spec["answer_words"])), host=args.host, port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
