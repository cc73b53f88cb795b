"""The SPARQL client's retries against a real HTTP server that first says 'too many requests'."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from misbench.claims.enrich import fetch_entities

ANSWER = {"head": {"vars": ["item", "label"]}, "results": {"bindings": [
    {"item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q145"},
     "label": {"type": "literal", "value": "United Kingdom", "xml:lang": "en"}}]}}


@pytest.fixture
def endpoint():
    """An endpoint that answers 429 with ``Retry-After: 1`` to the first ``busy`` queries."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server hook
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(time.monotonic())
            if len(seen) <= server.busy:
                self.send_response(429)
                self.send_header("Retry-After", "1")
                self.end_headers()
                return
            body = json.dumps(ANSWER).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.busy = 1
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/query", seen
    server.shutdown()


def settings(url, retries):
    return {"endpoint": url, "user_agent": "misbench-tests", "timeout_seconds": 5, "retries": retries,
            "backoff_seconds": 0.01}


def test_a_busy_endpoint_is_asked_again_after_its_retry_after(endpoint):
    _, url, seen = endpoint
    rows = {r["id"]: r for r in fetch_entities(["Q145", "Q183"], settings(url, retries=2), "en")}
    assert rows["Q145"]["label"] == "United Kingdom" and rows["Q145"]["found"] and rows["Q145"]["error"] is None
    assert rows["Q183"]["found"] is False  # asked and unknown, not an error
    assert len(seen) == 2 and seen[1] - seen[0] >= 0.9  # the server's Retry-After, not the 0.01 s backoff


def test_an_endpoint_busy_past_the_retries_gives_rows_with_the_error(endpoint):
    server, url, seen = endpoint
    server.busy = 10
    rows = fetch_entities(["Q145"], settings(url, retries=1), "en")
    assert len(seen) == 2 and rows[0]["found"] is None and "429" in rows[0]["error"]
