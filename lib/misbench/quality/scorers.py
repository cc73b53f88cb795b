"""The models behind quality control, one load per Spark worker.

Entailment (``quality.entailment.backend``):
- ``nli``: a cross-encoder NLI checkpoint (e.g. the paper's DeBERTa NLI model) loaded with
  transformers from a local folder, or the hub on clusters. The entailment label is read from
  the model's config (``id2label``); checkpoints order their labels differently.
- ``llm_judge``: the project's LLM interface asked "is the statement true according to the
  text?"; the score is P(Yes) from the Yes/No log-probability margin. The embedded default,
  since no NLI checkpoint ships on PyPI.
Both score (premise = the generated text, hypothesis = the statement). Texts longer than a
model's window are split into overlapping sentence windows; the text's score is its
strongest window.

Question similarity: sentence-transformers embeddings, cosine(question, text).
"""
from __future__ import annotations

import importlib
import logging
import math
import os
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, Sequence

from misbench.quality.checks import text_windows, yes_probability
from misbench.workers import cpu_threads, worker_cached

log = logging.getLogger(__name__)


def torch_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting


def _limit_torch_threads(settings: dict) -> None:
    import torch

    torch.set_num_threads(cpu_threads(settings["threads"], settings["tasks"]))


class EntailmentScorer(ABC):
    backend: str = "abstract"
    model: str = ""
    # Worker pid + a per-load id, as the LLM backends have: rows carry it, loads are countable.
    load_id: str = ""

    @abstractmethod
    def window_size(self, hypothesis: str) -> tuple[int, Callable[[str], int]]:
        """The premise budget left next to ``hypothesis``, and how a sentence is measured."""

    @abstractmethod
    def score_pairs(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[float]:
        """P(premise entails hypothesis) per pair, in order."""

    def score(self, texts: Sequence[str], hypotheses: Sequence[str], overlap: int) -> list[tuple[float, int]]:
        """Per text: (strongest entailment over its windows, number of windows)."""
        premises, statements, owners = [], [], []
        for index, (text, hypothesis) in enumerate(zip(texts, hypotheses)):
            budget, measure = self.window_size(hypothesis)
            for window in text_windows(text, budget, measure, overlap) or [text]:
                premises.append(window)
                statements.append(hypothesis)
                owners.append(index)
        scores = self.score_pairs(premises, statements) if premises else []
        best: list[list[float]] = [[] for _ in texts]
        for owner, value in zip(owners, scores):
            best[owner].append(value)
        results = []
        for values in best:
            known = [v for v in values if not math.isnan(v)]
            results.append((max(known) if known else math.nan, len(values)))
        return results


def entailment_label_index(id2label: dict) -> int:
    """The output index whose label names entailment, from a model config's ``id2label``."""
    matches = [int(i) for i, label in id2label.items() if str(label).lower().startswith("entail")]
    if len(matches) != 1:
        raise ValueError(
            f"NLI model labels {dict(id2label)}: expected exactly one label starting with 'entail'"
        )
    return matches[0]


class CrossEncoderNLI(EntailmentScorer):
    backend = "nli"

    def __init__(self, settings: dict):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        nli = settings["entailment"]["nli"]
        _limit_torch_threads(settings)
        self.model = str(nli["model"])
        self.device = torch_device(settings["device"])
        self.tokenizer = AutoTokenizer.from_pretrained(self.model)
        self.network = AutoModelForSequenceClassification.from_pretrained(self.model).to(self.device).eval()
        self.entailment_index = entailment_label_index(self.network.config.id2label)
        own_limit = getattr(self.tokenizer, "model_max_length", None) or 512
        self.max_length = min(int(nli["max_length"]), int(own_limit) if own_limit < 1e6 else 512)
        self.batch_size = int(nli["batch_size"])
        self._torch = torch
        self.load_id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"

    def _tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def window_size(self, hypothesis):
        # Room for the special tokens of a pair: [CLS] premise [SEP] hypothesis [SEP] and kin.
        return max(16, self.max_length - self._tokens(hypothesis) - 4), self._tokens

    def score_pairs(self, premises, hypotheses):
        scores: list[float] = []
        with self._torch.inference_mode():
            for start in range(0, len(premises), self.batch_size):
                encoded = self.tokenizer(
                    list(premises[start:start + self.batch_size]), list(hypotheses[start:start + self.batch_size]),
                    truncation="only_first", max_length=self.max_length, padding=True, return_tensors="pt",
                ).to(self.device)
                probabilities = self.network(**encoded).logits.float().softmax(dim=-1)
                scores.extend(probabilities[:, self.entailment_index].tolist())
        return scores


class LLMJudge(EntailmentScorer):
    backend = "llm_judge"

    def __init__(self, settings: dict):
        from misbench.llm import answer_words
        from misbench.llm.client import model_client

        judge = settings["entailment"]["llm_judge"]
        self.engine = model_client(settings["judge_llm"], "quality judge")
        self.model = self.engine.model
        self.prompt = settings["judge_prompt"]
        self.window_words = int(judge["window_words"])
        self.answer_words = list(answer_words(settings["judge_llm"]))

    @property
    def load_id(self) -> str:
        # The server's: one started again under the client (misbench.llm.servers) has another.
        return self.engine.load_id

    def window_size(self, hypothesis):
        return self.window_words, lambda sentence: len(sentence.split())

    def score_pairs(self, premises, hypotheses):
        prompts = [self.prompt.messages({"text": premise, "statement": hypothesis})
                   for premise, hypothesis in zip(premises, hypotheses)]
        from misbench.llm.client import RowFailed

        scores = self.engine.option_logprobs_many(prompts, self.answer_words)
        for refused in {row for row in scores if isinstance(row, RowFailed)}:
            log.warning("%s", refused)  # its text gets no score and fails, the batch goes on
        return [math.nan if isinstance(row, RowFailed) else yes_probability(*row) for row in scores]


def model_folder(package: str) -> str:
    """The model folder inside a PyPI package that ships a sentence-transformers model."""
    module = importlib.import_module(package)
    if hasattr(module, "get_model_path"):
        return str(module.get_model_path())
    return str(Path(module.__file__).parent / "model")


class QuestionSimilarity:
    def __init__(self, settings: dict):
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # a load is one line in the log, not a bar

        similarity = settings["similarity"]
        _limit_torch_threads(settings)
        self.model = str(similarity["model"])
        source = self.model
        if similarity.get("model_package"):
            try:
                source = model_folder(similarity["model_package"])
            except ImportError:  # e.g. a GPU cluster without the embedded package: the hub id
                log.warning("model package %s is not installed; loading %s", similarity["model_package"], self.model)
        self.encoder = SentenceTransformer(source, device=torch_device(settings["device"]))
        self.batch_size = int(similarity["batch_size"])

    def scores(self, questions: Sequence[str], texts: Sequence[str]) -> list[float]:
        """cosine(question, text) per pair (texts past the encoder's window are cut there)."""
        if not texts:
            return []
        encode = dict(batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                      show_progress_bar=False)
        question_vectors = self.encoder.encode(list(questions), **encode)
        text_vectors = self.encoder.encode(list(texts), **encode)
        return (question_vectors * text_vectors).sum(axis=1).astype(float).tolist()


ENTAILMENT_BACKENDS = {"nli": CrossEncoderNLI, "llm_judge": LLMJudge}


def worker_entailment(settings: dict) -> EntailmentScorer:
    backend = settings["entailment"]["backend"]
    if backend not in ENTAILMENT_BACKENDS:
        raise ValueError(f"quality.entailment.backend '{backend}' is not one of {sorted(ENTAILMENT_BACKENDS)}")
    key = {k: v for k, v in settings.items() if k not in ("similarity", "completeness")}

    def load() -> EntailmentScorer:
        if backend == "nli" and torch_device(settings["device"]).startswith("cuda"):
            from misbench.llm.servers import free_task_gpus

            # An idle LLM server (generation's, between its rounds) would leave the NLI model
            # no room on this task's GPU; the registry is the judge's, if any.
            free_task_gpus(settings.get("judge_llm") or {})
        return ENTAILMENT_BACKENDS[backend](settings)

    return worker_cached(f"entailment-{backend}", key, load)


def worker_similarity(settings: dict) -> QuestionSimilarity:
    key = {"similarity": settings["similarity"], "device": settings.get("device")}
    return worker_cached("similarity", key, lambda: QuestionSimilarity(settings))
