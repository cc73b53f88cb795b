"""The OpenAI-compatible backend against a local HTTP endpoint standing in for a remote API."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from misbench.llm import SamplingParams, load_backend


class Endpoint:
    def __init__(self, fail_first=0, status=429, answer=None, logprobs=True):
        """``answer``: body -> the reply's text (default: an echo of the last message);
        ``logprobs``: whether it returns top log-probabilities when asked."""
        self.calls, self.fail_first, self.status, self.auth, self.active, self.peak = 0, fail_first, status, [], 0, 0
        self.bodies = []
        self.lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

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
                    if body.get("logprobs") and logprobs:
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
    return lambda url, **extra: {"backend": "openai", "openai": {
        "base_url": url, "model": "m", "api_key_env": "MISBENCH_TEST_KEY", "max_concurrency": 3,
        "timeout_seconds": 5, "retries": 2, "backoff_seconds": 0.01, **extra}}


def test_retries_bounded_concurrency_and_key_from_environment(settings):
    endpoint = Endpoint(fail_first=2)
    try:
        backend = load_backend(settings(endpoint.url))
        prompts = [[{"role": "user", "content": f"p{i}"}] for i in range(9)]
        results = backend.generate(prompts, SamplingParams(max_tokens=5))
        assert [r.text for r in results] == [f"echo: p{i}" for i in range(9)]
        assert all(r.error is None and r.tokens_out == 3 for r in results)
        assert endpoint.calls == 11 and 1 < endpoint.peak <= 3
        assert set(endpoint.auth) == {"Bearer sk-secret-123"}
        assert "sk-secret" not in repr(backend)
    finally:
        endpoint.close()


def test_failures_after_retries_are_recorded_not_raised(settings):
    endpoint = Endpoint(fail_first=100, status=503)
    try:
        results = load_backend(settings(endpoint.url)).generate([[{"role": "user", "content": "x"}]],
                                                               SamplingParams())
        assert results[0].text is None and "HTTP 503" in results[0].error
        assert endpoint.calls == 3
    finally:
        endpoint.close()
    dead = load_backend(settings("http://127.0.0.1:9/v1", retries=0))
    assert "URLError" in dead.generate([[{"role": "user", "content": "x"}]], SamplingParams())[0].error


def test_option_scores_come_from_top_logprobs(settings):
    endpoint = Endpoint()
    try:
        scores = load_backend(settings(endpoint.url)).option_logprobs(
            [{"role": "user", "content": "Yes or No?"}], ["Yes", "No", "Maybe"])
        assert scores[:2] == [-0.2, -1.9] and scores[2] == float("-inf")
    finally:
        endpoint.close()


def test_a_begun_reply_is_asked_for_in_words_and_kept(settings):
    endpoint = Endpoint()
    try:
        backend = load_backend(settings(endpoint.url))
        prompt = [{"role": "user", "content": "Write about Scotland."},
                  {"role": "assistant", "content": "Scotland lies in Algeria."}]
        result = backend.generate([prompt], SamplingParams(max_tokens=5))[0]
        # the endpoint saw no assistant turn, only the instruction; the reply starts as begun
        assert result.text.startswith("Scotland lies in Algeria. echo: Write about Scotland.")
        assert "Begin your reply with exactly these words: Scotland lies in Algeria." in result.text
    finally:
        endpoint.close()
