"""The one model client against an endpoint misbench did not start (llm.backend: openai): a
local HTTP server standing in for a remote API."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from misbench.llm import SamplingParams
from misbench.llm.client import EndpointError, RowFailed, model_client


class Endpoint:
    def __init__(self, fail_first=0, status=429, answer=None, logprobs=True, refuse=None, models=("m",)):
        """``answer``: body -> the reply's text (default: an echo of the last message);
        ``logprobs``: whether it returns top log-probabilities when asked ("empty": log-probs
        of no token, as llama.cpp's server answers a reply that ended at once); ``refuse``: a text
        whose prompts it refuses (HTTP 400, as a server does a prompt over its context)."""
        self.calls, self.fail_first, self.status, self.auth, self.active, self.peak = 0, fail_first, status, [], 0, 0
        self.bodies = []
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # GET /v1/models: what it serves
                data = json.dumps({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                                "owned_by": "test"} for name in models]}).encode()
                self.send_response(200 if self.path.endswith("/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with endpoint.lock:
                    endpoint.calls += 1
                    endpoint.auth.append(self.headers.get("Authorization"))
                    endpoint.bodies.append(body)
                    failing = endpoint.calls <= endpoint.fail_first
                    endpoint.active += 1
                    endpoint.peak = max(endpoint.peak, endpoint.active)
                try:
                    if refuse and refuse in json.dumps(body):
                        self.send_response(400)
                        self.end_headers()
                        self.wfile.write(b'{"error": {"message": "the prompt is longer than the context"}}')
                        return
                    if failing:
                        self.send_response(endpoint.status)
                        self.send_header("Retry-After", "0")
                        self.end_headers()
                        self.wfile.write(b'{"error": "busy"}')
                        return
                    import time
                    time.sleep(0.3)  # long enough that concurrent requests overlap
                    text = answer(body) if answer else "echo: " + body["messages"][-1]["content"]
                    reply = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
                    if body.get("logprobs") and logprobs == "empty":
                        reply["choices"][0]["logprobs"] = {"content": []}
                    elif body.get("logprobs") and logprobs:
                        reply["choices"][0]["logprobs"] = {"content": [{"token": "Yes", "logprob": -0.2,
                            "top_logprobs": [{"token": "Yes", "logprob": -0.2},
                                             {"token": " No", "logprob": -1.9}]}]}
                    data = json.dumps(reply).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with endpoint.lock:
                        endpoint.active -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()


@pytest.fixture()
def settings(monkeypatch):
    monkeypatch.setenv("MISBENCH_TEST_KEY", "sk-secret-123")
    return lambda url, retries=2, **extra: {
        "backend": "openai", "client": {"max_concurrency": 3, "timeout_seconds": 5, "retries": retries},
        "openai": {"base_url": url, "model": "m", "api_key_env": "MISBENCH_TEST_KEY", "begun_reply": "instruct",
                   **extra}}


def test_retries_bounded_concurrency_and_key_from_environment(settings):
    endpoint = Endpoint(fail_first=2)
    try:
        client = model_client(settings(endpoint.url), "test")
        prompts = [[{"role": "user", "content": f"p{i}"}] for i in range(9)]
        results = client.generate(prompts, SamplingParams(max_tokens=5))
        assert [r.text for r in results] == [f"echo: p{i}" for i in range(9)]
        assert all(r.error is None and r.tokens_out == 3 for r in results)
        assert endpoint.calls == 11 and 1 < endpoint.peak <= 3
        assert set(endpoint.auth) == {"Bearer sk-secret-123"}
        assert "sk-secret" not in repr(client)
    finally:
        endpoint.close()


def test_a_refused_prompt_fails_its_row_and_an_endpoint_that_fails_fails_the_stage_in_one_line(settings):
    endpoint = Endpoint(refuse="too long")
    try:
        client = model_client(settings(endpoint.url), "generate")
        fine, refused = client.generate([[{"role": "user", "content": "x"}], [{"role": "user", "content": "too long"}]],
                                        SamplingParams())
        assert fine.error is None and refused.text is None
        assert refused.error.startswith(f"generate: {endpoint.url} refused the prompt (HTTP 400)")
        assert "longer than the context" in refused.error
        scores = client.option_logprobs_many([[{"role": "user", "content": "x"}], [{"role": "user", "content": "too long"}]],
                                             ["Yes", "No"])
        assert scores[0][0] == -0.2 and isinstance(scores[1], RowFailed)
    finally:
        endpoint.close()
    endpoint = Endpoint(fail_first=100, status=503)
    try:
        with pytest.raises(EndpointError) as failed:
            model_client(settings(endpoint.url), "evaluate").generate([[{"role": "user", "content": "x"}]],
                                                                      SamplingParams())
        assert endpoint.calls == 3  # the first try and two retries
        assert str(failed.value).startswith(f"evaluate: the model endpoint {endpoint.url} (m) failed (HTTP 503")
    finally:
        endpoint.close()
    dead = model_client(settings("http://127.0.0.1:9/v1", retries=0), "quality judge")
    with pytest.raises(EndpointError) as failed:
        dead.generate([[{"role": "user", "content": "x"}]], SamplingParams())
    assert str(failed.value) == "quality judge: the model endpoint http://127.0.0.1:9/v1 (m) does not answer"


def test_option_scores_come_from_top_logprobs_and_an_endpoint_without_them_is_named(settings):
    endpoint = Endpoint()
    try:
        scores = model_client(settings(endpoint.url), "test").option_logprobs(
            [{"role": "user", "content": "Yes or No?"}], ["Yes", "No", "Maybe"])
        assert scores[:2] == [-0.2, -1.9] and scores[2] == float("-inf")
        assert endpoint.bodies[-1]["logprobs"] is True and endpoint.bodies[-1]["top_logprobs"] == 20
    finally:
        endpoint.close()
    endpoint = Endpoint(logprobs=False)
    try:
        with pytest.raises(EndpointError, match=r"^evaluate: the model endpoint .* answers without log-probs"):
            model_client(settings(endpoint.url), "evaluate").option_logprobs([{"role": "user", "content": "?"}],
                                                                              ["Yes", "No"])
    finally:
        endpoint.close()
    endpoint = Endpoint(logprobs="empty")  # log-probs served, but the reply ended before a token
    try:
        ended = model_client(settings(endpoint.url), "evaluate").option_logprobs(
            [{"role": "user", "content": "?"}], ["Yes", "No"])
        assert isinstance(ended, RowFailed) and "ended the reply at once" in ended
    finally:
        endpoint.close()


def test_a_begun_reply_is_asked_for_in_words_or_continued_where_the_server_can(settings):
    endpoint = Endpoint()
    prompt = [{"role": "user", "content": "Write about Scotland."},
              {"role": "assistant", "content": "Scotland lies in Algeria."}]
    try:
        result = model_client(settings(endpoint.url), "test").generate([prompt], SamplingParams(max_tokens=5))[0]
        # the endpoint saw no assistant turn, only the instruction; the reply starts as begun
        assert result.text.startswith("Scotland lies in Algeria. echo: Write about Scotland.")
        assert "Begin your reply with exactly these words: Scotland lies in Algeria." in result.text
        client = model_client(settings(endpoint.url, begun_reply="continue_final_message"), "test")
        result = client.generate([prompt], SamplingParams(max_tokens=5, min_tokens=3))[0]
        body = endpoint.bodies[-1]
        assert body["messages"] == prompt and body["continue_final_message"] is True
        assert body["add_generation_prompt"] is False and body["min_tokens"] == 3
        assert result.text == "Scotland lies in Algeria.echo: Scotland lies in Algeria."  # start + continuation
    finally:
        endpoint.close()


def test_a_prompt_the_judge_is_refused_fails_that_text_only(settings):
    """Quality control's LLM judge on an endpoint: a refused window gets no score (its text
    fails with the reason, the log says why) and the batch goes on."""
    import math

    from misbench.config import load_config
    from misbench.quality import checks
    from misbench.quality.job import resolved_settings
    from misbench.quality.scorers import LLMJudge

    endpoint = Endpoint(refuse="too long")
    try:
        judge = LLMJudge(resolved_settings(load_config("local", [
            "llm.backend=openai", f"llm.openai.base_url={endpoint.url}", "llm.openai.model=m",
            "llm.openai.api_key_env=MISBENCH_TEST_KEY"])))
        fine, refused = judge.score_pairs(["A fine text.", "A text far too long."], ["A statement."] * 2)
        assert 0.5 < fine < 1 and math.isnan(refused)
        assert checks.model_failures(refused, 0.9, 0.5, 0.3) == [
            "entailment: no score (the judge answered neither yes nor no, or refused the prompt)"]
    finally:
        endpoint.close()


@pytest.fixture()
def fresh_model_names():
    from misbench.llm.client import endpoint_model

    endpoint_model.cache_clear()  # a later test's endpoint may get a port an earlier one had
    yield
    endpoint_model.cache_clear()


def test_one_setting_points_every_stage_at_an_endpoint_and_its_only_model(monkeypatch, fresh_model_names):
    """``llm.endpoint`` alone: the openai backend at that URL, the model it serves asked of it,
    no key sent but the one ``llm.endpoint_key_env`` names (never the OpenAI key); an endpoint
    serving several models must be told which, in one line; a judge's own endpoint gets its
    own model."""
    from misbench.config import load_config, pointed_at_endpoint
    from misbench.llm import model_identity
    from misbench.llm.client import endpoint_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-others")
    monkeypatch.setenv("MISBENCH_TEST_KEY", "sk-secret-123")
    endpoint, several = Endpoint(models=("served-one",)), Endpoint(models=("a", "b"))
    try:
        llm = load_config("local", [f"llm.endpoint={endpoint.url}"]).get("llm")
        assert (llm["backend"], llm["openai"]["base_url"], llm["endpoint"]) == ("openai", endpoint.url, None)
        assert model_identity(llm) == "served-one"
        [result] = model_client(llm, "endpoint-test").generate([[{"role": "user", "content": "hi"}]],
                                                               SamplingParams(max_tokens=5))
        assert result.text == "echo: hi" and endpoint.bodies[-1]["model"] == "served-one"
        assert endpoint.auth[-1] == "Bearer none"  # no key of another API
        keyed = load_config("local", [f"llm.endpoint={endpoint.url}", "llm.endpoint_key_env=MISBENCH_TEST_KEY"])
        model_client(keyed.get("llm"), "endpoint-test").generate([[{"role": "user", "content": "hi"}]],
                                                                 SamplingParams(max_tokens=5))
        assert endpoint.auth[-1] == "Bearer sk-secret-123"
        with pytest.raises(EndpointError, match=r"serves 2 models \(a, b\): set llm.openai.model"):
            endpoint_model(several.url, "MISBENCH_TEST_KEY")
        named = load_config("local", [f"llm.endpoint={several.url}", "llm.openai.model=b"]).get("llm")
        assert model_identity(named) == "b"
        judge = pointed_at_endpoint(named, {"endpoint": endpoint.url})
        assert (judge["openai"]["base_url"], model_identity(judge)) == (endpoint.url, "served-one")
        closed = endpoint.url.replace(str(endpoint.server.server_address[1]), "9")  # nothing listens
        with pytest.raises(EndpointError, match="does not answer"):
            endpoint_model(closed, "")
    finally:
        endpoint.close()
        several.close()
