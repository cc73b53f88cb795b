"""The fake model server: deterministic replies from the prompt, started and called as every
model is (misbench.llm.servers, misbench.llm.client)."""
import json
import math

import pytest

from misbench.config import load_config
from misbench.llm import SamplingParams
from misbench.llm.client import model_client
from misbench.llm.servers import stop_servers
from misbench.prompts import load_prompt


@pytest.fixture()
def fake(tmp_path):
    """A client of the fake server with the defaults of base.yaml, changed by ``section``."""
    started = []

    def client(**section):
        llm = load_config("local", ["llm.backend=fake", "llm.fake.model=fake-test",
                                    f"llm.server.dir={tmp_path / 'servers'}"]).get("llm")
        llm["fake"].update(section)
        started.append(llm)
        return model_client(llm, "test")

    yield client
    for llm in started:
        stop_servers(llm)


def user(text):
    return [{"role": "system", "content": "You are careful."}, {"role": "user", "content": text}]


def test_a_begun_reply_is_continued_without_a_new_fact_and_the_same_prompt_gives_the_same_text(fake):
    backend = fake()
    assert (backend.backend, backend.model) == ("fake", "fake-test")
    prompt = [*user("Write about Scotland."), {"role": "assistant", "content": "Scotland lies in the United Kingdom."}]
    params = SamplingParams(max_tokens=60, min_tokens=10, seed=3)
    (first,) = backend.generate([prompt], params)
    (again,) = backend.generate([prompt], params)
    assert first.text.startswith("Scotland lies in the United Kingdom. ") and first.text == again.text
    assert 30 <= len(first.text.split()) <= 60 and first.error is None and first.tokens_out > 0
    (other_seed,) = backend.generate([prompt], SamplingParams(max_tokens=60, min_tokens=10, seed=4))
    assert other_seed.text != first.text  # another seed, another sample


def test_options_get_a_letter_or_the_json_asked_for_and_a_text_to_rewrite_comes_back(fake):
    backend = fake()
    options = "Question: Where?\nOptions:\nA. Paris\nB. Rome\nC. Oslo\n\nAnswer with one letter."
    (letter,) = backend.generate([user(options)], SamplingParams())
    assert letter.text in ("A", "B", "C")
    (reply,) = backend.generate([user(options.replace("Answer with one letter.", "Reply with a JSON object."))],
                                SamplingParams())
    assert json.loads(reply.text)["answer"] in ("Paris", "Rome", "Oslo")
    style = load_prompt("style_blog").messages({"text": "Scotland lies in the United Kingdom. It has a parliament."})
    (rewrite,) = backend.generate([style], SamplingParams())
    assert rewrite.text == "Scotland lies in the United Kingdom. It has a parliament."


def test_canned_replies_win_and_the_judge_says_yes_only_to_a_statement_the_text_makes(fake):
    backend = fake(replies={"Which single entity": "Forth Bridge"})
    (named,) = backend.generate([user("Passage: ...\n\nWhich single entity is this about?")], SamplingParams())
    assert named.text == "Forth Bridge"
    judge = load_prompt("judge_entailment")
    text = "The Forth Bridge crosses the Firth of Forth.\n\nIt opened in 1890."
    yes = backend.option_logprobs(judge.messages({"text": text, "statement": "It opened in 1890."}), ["Yes", "No"])
    no = backend.option_logprobs(judge.messages({"text": text, "statement": "It opened in 1990."}), ["Yes", "No"])
    assert yes[0] > math.log(0.5) > yes[1] and no[1] > math.log(0.5) > no[0]
    assert abs(math.fsum(math.exp(v) for v in yes) - 1) < 1e-9
    spread = backend.option_logprobs(user("Pick one.\nA. x\nB. y"), ["A", "B"])
    assert spread == backend.option_logprobs(user("Pick one.\nA. x\nB. y"), ["A", "B"])


def test_a_canned_reply_steers_log_probs_to_the_option_it_names_and_whole_texts_come_back(fake):
    backend = fake(replies={"pick the one best option": "I do not know"})
    prompt = user("Read and pick the one best option.\nOptions:\nA. Paris\nB. I do not know\n\nAnswer with one letter.")
    scores = backend.option_logprobs(prompt, ["A", "B"])
    assert scores[1] > math.log(0.9) and scores[0] < math.log(0.1)
    two_paragraphs = "Scotland lies in the United Kingdom.\n\nIt has a parliament in Edinburgh."
    (rewrite,) = backend.generate([load_prompt("style_news").messages({"text": two_paragraphs})], SamplingParams())
    assert rewrite.text == two_paragraphs
    # options shown but no letter asked for (a justification): a sentence, not a letter
    (why,) = backend.generate([user("Options:\nA. Paris\nB. Rome\n\nExplain in two sentences why you chose it.")],
                              SamplingParams())
    assert len(why.text.split()) > 1
