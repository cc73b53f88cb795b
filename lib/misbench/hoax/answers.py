"""MultiHoax evaluation as DataFrame functions: items per task, reply reading, metrics.

Tasks (the paper's three):
- ``hoax_choice``: four options; success is "I do not know". Answered like MisBench's choice
  settings (option log-probabilities, or a reply read by the strict parse).
- ``hoax_justification``: each question the model answered "I do not know" is asked why;
  ``hoax_judge`` asks a judge model whether the reason names the false premise (P("Yes") over
  "Yes"/"No"), and the reason's cosine similarity to the stored explanation is measured. A
  detection counts when both the choice and the judge say so (the paper's second task).
- ``hoax_json``: an {"answer", "explanation"} reply validated against
  conf/hoax_answer.schema.json; the answer must be one option's text (or letter). Invalid
  JSON, schema violations and answers that are no option are counted apart, never guessed.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from misbench.config import conf_dir
from misbench.evaluate.metrics import HOAX_DIMENSIONS
from misbench.evaluate.stage import ITEM_COLUMNS, option_lines, parse_choice
from misbench.hoax.stage import LETTERS
from misbench.prompts import Prompt, messages_column
from misbench.ids import stable_id

TASKS = ("choice", "justification", "json")
SETTINGS = {"choice": "hoax_choice", "justification": "hoax_justification", "json": "hoax_json",
            "judge": "hoax_judge"}
JUDGE_ROLES = ("names_premise", "does_not")


def answer_schema() -> dict:
    return json.loads((conf_dir() / "hoax_answer.schema.json").read_text(encoding="utf-8"))


def _base(questions: DataFrame) -> DataFrame:
    letters = F.array(*[F.lit(x) for x in LETTERS])
    return questions.select(
        "question_id", F.lit(None).cast("string").alias("claim_id"), F.lit("hoax").alias("kind"),
        F.size(F.coalesce("hops", F.array())).cast("int").alias("hop"),
        F.coalesce("asked_property", F.lit("imported")).alias("relation"),
        F.coalesce("category", F.lit("unknown")).alias("topic"), F.lit(None).cast("string").alias("style"),
        F.array().cast("array<string>").alias("evidence_ids"), letters.alias("letters"),
        F.col("option_roles").alias("roles"), "question", "options", "premise_statement", "explanation",
        option_lines(letters, F.col("options")).alias("options_text"))


def _finish(rows: DataFrame, setting: str, prompt: Prompt, fields: Mapping[str, str], *extra: str) -> DataFrame:
    messages = messages_column(prompt, dict(fields))
    return rows.withColumn("messages", messages).withColumn("setting", F.lit(setting)) \
        .withColumn("prompt_name", F.lit(prompt.name)) \
        .withColumn("prompt_hash", stable_id(F.col("messages"))) \
        .withColumn("item_id", stable_id(F.lit(setting), F.col("question_id"), *[F.col(c) for c in extra])) \
        .withColumn("run", F.lit(0)).select(*ITEM_COLUMNS)  # one run: MultiHoax reports no average


def choice_items(questions: DataFrame, prompt: Prompt) -> DataFrame:
    return _finish(_base(questions), SETTINGS["choice"], prompt, {"question": "question", "options": "options_text"})


def json_items(questions: DataFrame, prompt: Prompt) -> DataFrame:
    return _finish(_base(questions), SETTINGS["json"], prompt, {"question": "question", "options": "options_text"})


def justification_items(questions: DataFrame, choices: DataFrame, prompt: Prompt) -> DataFrame:
    """One item per question whose choice answer (``choices``: this model's hoax_choice
    responses) was "I do not know"."""
    idk = choices.where(F.col("chosen_role") == "idk").select("question_id").distinct()
    return _finish(_base(questions).join(idk, "question_id", "left_semi"), SETTINGS["justification"], prompt,
                   {"question": "question", "options": "options_text"})


def judge_items(questions: DataFrame, justifications: DataFrame, prompt: Prompt,
                answer_words: Sequence[str]) -> DataFrame:
    """One item per justification reply: does it name the false premise? The premise is the
    stored premise statement (the explanation for imported questions). ``answer_words``: the
    judge's yes and no (``llm.answer_words``), its two options."""
    replies = justifications.where(F.col("error").isNull() & F.col("raw_answer").isNotNull()).select(
        "question_id", F.col("response_id").alias("justification_id"), F.col("raw_answer").alias("justification"))
    rows = _base(questions).join(replies, "question_id") \
        .withColumn("premise", F.coalesce("premise_statement", "explanation")) \
        .withColumn("letters", F.array(*[F.lit(x) for x in answer_words])) \
        .withColumn("roles", F.array(*[F.lit(x) for x in JUDGE_ROLES])) \
        .withColumn("evidence_ids", F.array("justification_id"))
    return _finish(rows, SETTINGS["judge"], prompt,
                   {"question": "question", "premise": "premise", "justification": "justification"},
                   "justification_id")


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def json_verdict(reply: str | None, options: Sequence[str], schema: dict) -> tuple[str, int | None]:
    """(verdict, chosen option index): ``valid`` with the index, or ``invalid json``,
    ``schema violation``, ``not an option``. A reply in a Markdown code fence is read inside it."""
    import jsonschema

    if reply is None:
        return "invalid json", None
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return "invalid json", None
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError:
        return "schema violation", None
    letter = parse_choice(data["answer"], list(LETTERS[:len(options)]), list(options))
    if letter is None:
        return "not an option", None
    return "valid", LETTERS.index(letter)


def reply_batches(llm_settings: dict, sampling: dict, run_id: str, schema: dict, stage: str):
    """mapInPandas function for the free-text tasks: queued items in, eval_responses rows out.
    ``hoax_json`` replies are read (chosen letter and role when valid, else unparsed);
    justifications are stored as they are (no choice to read). ``stage`` names the task in a
    model's errors."""
    from misbench.evaluate.stage import _options_of
    from misbench.llm import SamplingParams
    from misbench.llm.client import model_client

    params = SamplingParams(**sampling)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            backend = model_client(llm_settings, stage)
            prompts = [json.loads(m) for m in batch["messages"]]
            started = pd.Timestamp.now(tz="UTC")
            begun = time.perf_counter()
            results = backend.generate(prompts, params)
            rows = []
            for (_, item), prompt, result in zip(batch.iterrows(), prompts, results):
                letters, roles = list(item["letters"]), list(item["roles"])
                chosen, unparsed = None, False
                if item["setting"] == SETTINGS["json"] and not result.error:
                    verdict, chosen = json_verdict(result.text, _options_of(prompt, letters) or [], schema)
                    unparsed = verdict != "valid"
                rows.append({
                    "response_id": item["response_id"], "model": backend.model, "backend": backend.backend,
                    "answer_mode": "generate", "setting": item["setting"], "item_id": item["item_id"],
                    "question_id": item["question_id"], "claim_id": item["claim_id"], "kind": item["kind"],
                    "hop": int(item["hop"]), "relation": item["relation"], "topic": item["topic"],
                    "style": item["style"], "evidence_ids": list(item["evidence_ids"]),
                    "prompt_name": item["prompt_name"], "prompt_hash": item["prompt_hash"],
                    "letters": letters, "roles": roles, "raw_answer": result.text,
                    "chosen_letter": None if chosen is None else letters[chosen],
                    "chosen_role": None if chosen is None else roles[chosen],
                    "option_logprobs": None, "role_probabilities": None,
                    "unparsed": unparsed, "error": result.error,
                    "attempts": int(item["attempts"]) + 1,
                    "latency_s": float(result.latency_s or (time.perf_counter() - begun) / len(prompts)),
                    "load_id": backend.load_id, "mlflow_run_id": run_id, "answered_at": started,
                })
            yield pd.DataFrame(rows)

    return run


def similarity_batches(quality_settings: dict):
    """mapInPandas: (response_id, justification, explanation) in, (response_id, similarity) out,
    with the quality stage's embedding model (cosine of the two texts)."""
    from misbench.quality.scorers import worker_similarity

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            scores = worker_similarity(quality_settings).scores(list(batch["justification"].fillna("")),
                                                                 list(batch["explanation"].fillna("")))
            yield pd.DataFrame({"response_id": batch["response_id"], "similarity": scores})

    return run


def judgements(justifications: DataFrame, judged: DataFrame, similarities: DataFrame, threshold: float,
               similarity_threshold: float, judge_model: str) -> DataFrame:
    """hoax_judgements rows: per justification, the judge's P("Yes"), its verdict, and the
    similarity to the explanation. A judge answer that could not be read leaves both null."""
    verdicts = judged.select(
        F.get(F.col("evidence_ids"), 0).alias("response_id"),  # null-safe: other rows may be read first
        F.col("role_probabilities").getItem("names_premise").alias("judge_yes_probability"),
        F.col("chosen_role").alias("judge_choice"))
    yes = F.col("judge_yes_probability")
    return (justifications.select("response_id", "model", "question_id", F.col("raw_answer").alias("justification"))
            .join(verdicts, "response_id", "left").join(similarities, "response_id", "left")
            .withColumn("judge_model", F.lit(judge_model))
            .withColumn("names_premise", F.when(yes.isNotNull(), yes >= F.lit(threshold))
                        .when(F.col("judge_choice").isNotNull(), F.col("judge_choice") == "names_premise"))
            .withColumn("similar", F.col("similarity") >= F.lit(similarity_threshold))
            .withColumn("judged_at", F.current_timestamp())
            .drop("judge_choice"))


def _rate(condition: Column, among: Column | None = None) -> tuple[Column, Column]:
    """(value, n): share of rows meeting ``condition`` among rows meeting ``among`` (all when None)."""
    base = F.lit(True) if among is None else among
    n = F.sum(base.cast("long"))
    hits = F.sum((base & F.coalesce(condition, F.lit(False))).cast("long"))
    return F.when(n > 0, hits / n), n


def hoax_metrics(choice: DataFrame, justified: DataFrame | None, json_answers: DataFrame | None,
                 questions: DataFrame) -> DataFrame:
    """Long rows (setting, metric, value, n, items, one breakdown dimension or none) over all
    questions and per country, category, reasoning type, answer type and premise type.

    - hoax_choice: ``accuracy`` ("I do not know" chosen; unparsed answers count as wrong and
      are reported apart), ``near_miss_rate`` (the answer the question would have without its
      premise), ``unparsed_rate``, ``error_rate``, ``top_letter_share``.
    - hoax_justification: ``accuracy`` ("I do not know" and a justification the judge says
      names the premise, over all answered questions), ``judged_names_premise_rate`` (among
      judged justifications), ``judge_unread_rate`` (justifications whose judge answer could
      not be read), ``mean_judge_probability``, ``mean_similarity``, ``similar_rate``.
    - hoax_json: ``accuracy``, ``invalid_json_rate``, ``schema_violation_rate``,
      ``not_an_option_rate``, ``error_rate``.
    """
    labels = questions.select("question_id", *HOAX_DIMENSIONS)
    frames = []
    # One aggregation per task: each answer row once overall and once under each label.
    views = F.explode(F.array(
        F.struct(F.lit(None).cast("string").alias("dimension"), F.lit(None).cast("string").alias("group")),
        *[F.struct(F.lit(d).alias("dimension"), F.coalesce(F.col(d), F.lit("unknown")).alias("group"))
          for d in HOAX_DIMENSIONS]))

    def emit(rows: DataFrame, setting: str, metrics: Sequence[tuple[str, tuple[Column, Column]]]) -> None:
        rows = rows.join(labels, "question_id", "left").select("*", views.alias("view"))
        grouped = rows.groupBy(F.col("view.dimension").alias("dimension"), F.col("view.group").alias("group")).agg(
            F.count("*").alias("items"),
            F.array(*[F.struct(F.lit(name).alias("metric"), value.cast("double").alias("value"),
                               n.cast("long").alias("n")) for name, (value, n) in metrics]).alias("metrics"))
        frames.append(grouped.select(
            F.lit(setting).alias("setting"), F.explode("metrics").alias("m"), "items", "dimension", "group").select(
            "setting", F.col("m.metric").alias("metric"), F.col("m.value").alias("value"), F.col("m.n").alias("n"),
            "items", *[F.when(F.col("dimension") == d, F.col("group")).alias(d) for d in HOAX_DIMENSIONS]))

    answered = F.col("error").isNull()
    read = answered & F.col("chosen_letter").isNotNull()
    emit(choice, SETTINGS["choice"], [
        ("accuracy", _rate(F.col("chosen_role") == "idk", answered)),
        ("near_miss_rate", _rate(F.col("chosen_role") == "near_miss", answered)),
        ("unparsed_rate", _rate(F.col("unparsed"), answered)),
        ("error_rate", _rate(F.col("error").isNotNull())),
        ("top_letter_share", (F.try_divide(F.greatest(*[F.sum((F.col("chosen_letter") == x).cast("long"))
                                                        for x in LETTERS]), F.sum(read.cast("long"))),
                              F.sum(read.cast("long")))),
    ])
    if justified is not None:
        # Over every answered choice: detected = "I do not know" and a justification judged right.
        detected = choice.select("question_id", "chosen_role", "error").join(
            justified.select("question_id", "names_premise", "judge_yes_probability", "similarity", "similar",
                             F.lit(True).alias("justified")), "question_id", "left")
        has_reason = F.col("names_premise").isNotNull()
        emit(detected, SETTINGS["justification"], [
            ("accuracy", _rate((F.col("chosen_role") == "idk") & F.col("names_premise"), answered)),
            ("judged_names_premise_rate", _rate(F.col("names_premise"), has_reason)),
            # justifications the judge's answer could not be read for (counted, never guessed)
            ("judge_unread_rate", _rate(~has_reason, F.coalesce(F.col("justified"), F.lit(False)))),
            ("mean_judge_probability", (F.avg("judge_yes_probability"), F.count("judge_yes_probability"))),
            ("mean_similarity", (F.avg("similarity"), F.count("similarity"))),
            ("similar_rate", _rate(F.col("similar"), F.col("similar").isNotNull())),
        ])
    if json_answers is not None:
        emit(json_answers, SETTINGS["json"], [
            ("accuracy", _rate(F.col("chosen_role") == "idk", answered)),
            ("invalid_json_rate", _rate(F.col("json_verdict") == "invalid json", answered)),
            ("schema_violation_rate", _rate(F.col("json_verdict") == "schema violation", answered)),
            ("not_an_option_rate", _rate(F.col("json_verdict") == "not an option", answered)),
            ("error_rate", _rate(F.col("error").isNotNull())),
        ])
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def with_json_verdict(responses: DataFrame, questions: DataFrame, schema: dict) -> DataFrame:
    """hoax_json responses with their verdict re-read from the stored reply (the same reader
    as at answer time): ``valid``, ``invalid json``, ``schema violation``, ``not an option``."""
    schema_text = json.dumps(schema)

    @F.udf("string")
    def verdict(reply, options):
        return json_verdict(reply, list(options or []), json.loads(schema_text))[0]

    return responses.join(questions.select("question_id", F.col("options").alias("_options")), "question_id", "left") \
        .withColumn("json_verdict", F.when(F.col("error").isNull(), verdict("raw_answer", "_options"))) \
        .drop("_options")


def schema_path() -> Path:
    return conf_dir() / "hoax_answer.schema.json"
