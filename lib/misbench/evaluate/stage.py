"""Evaluation stage: questions + texts -> items per setting -> model answers.

Settings (the paper's section 3 and 4):
- ``probe``: the question alone, once per question (claim): which facts the model knows
  (Memory / Unknown), the same for the misinformation of every kind;
- ``detection``: "is this passage misinformation?", two options in a seeded order, for every
  passing misinformation text (each style) and the claim's correct texts (false alarms);
- ``single``: one misinformation entry per kind, then the question (memorization ratio);
- ``pair``: the correct entry and a misinformation entry in a seeded order, per kind (TendCM);
- ``style``: one misinformation text per kind and style (MR and the memory option's probability);
- ``desc``: detection with the key entity's description in the prompt (the paper's "+Desc");
- ``rtd``: Reconstruct to Discriminate: the model names the passage's key entity, writes
  evidence about it from its description, then says which of the passage and that evidence
  is more likely misinformation (``evaluate.rtd.last_step: compare``, the paper's), or judges
  the passage with the evidence shown as a reference (``judge``). Built by the job from the
  RtD steps' outputs.

Items carry rendered chat messages (JSON); the chat template is applied by the backend at
run time. Answers come from the letters' log-probabilities in one forward pass, or from a
strict parse of a short generated reply; what cannot be read is ``unparsed``, never an option.
"""
from __future__ import annotations

import json
import math
import re
import time
from typing import Iterator, Mapping, Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from misbench.bench.stage import LETTERS, role_order
from misbench.claims.stage import normalized
from misbench.prompts import Prompt, messages_column
from misbench.ids import request_id, seeded_hash, stable_id
from misbench.styles import ENTRY_STYLE

SETTINGS = ("probe", "detection", "single", "pair", "style", "desc", "rtd")
CHOICE_SETTINGS = ("probe", "single", "pair", "style")
PROMPTS = {"probe": "eval_probe", "single": "eval_single", "pair": "eval_pair", "style": "eval_single",
           "detection": "eval_detect", "desc": "eval_detect_desc", "rtd": "eval_rtd_compare"}  # rtd: evaluate.rtd.last_step
RTD_PROMPTS = ("rtd_entity", "rtd_reconstruct")
# RtD's last step (evaluate.rtd.last_step): ``compare`` as the paper has it (which of the
# passage and the reconstruction is more likely misinformation), or ``judge`` (is the passage
# misinformation, the reconstruction shown as a reference).
RTD_LAST_STEPS = {"compare": "eval_rtd_compare", "judge": "eval_detect_rtd"}
COMPARED_TEXTS = ("Text 1", "Text 2")
DETECTION_ROLES = ("misinformation", "not_misinformation")
ITEM_COLUMNS = [
    "item_id", "run", "setting", "question_id", "claim_id", "kind", "hop", "relation", "topic", "style",
    "evidence_ids", "letters", "roles", "prompt_name", "prompt_hash", "messages",
]
RESPONSE_SCHEMA = (
    "response_id string, model string, backend string, answer_mode string, setting string, item_id string, "
    "question_id string, claim_id string, kind string, hop int, relation string, topic string, style string, "
    "evidence_ids array<string>, prompt_name string, prompt_hash string, letters array<string>, "
    "roles array<string>, raw_answer string, chosen_letter string, chosen_role string, "
    "option_logprobs array<double>, role_probabilities map<string,double>, unparsed boolean, error string, "
    "attempts int, latency_s double, load_id string, mlflow_run_id string, answered_at timestamp"
)


def option_lines(letters: Column, options: Column) -> Column:
    """"A. Paris" lines, one per option, in display order."""
    return F.concat_ws("\n", F.transform(F.arrays_zip(letters.alias("l"), options.alias("o")),
                                         lambda x: F.concat(x["l"], F.lit(". "), x["o"])))


def _finish(rows: DataFrame, setting: str, prompt: Prompt, fields: Mapping[str, str]) -> DataFrame:
    messages = messages_column(prompt, dict(fields))
    return rows.withColumn("messages", messages) \
        .withColumn("setting", F.lit(setting)).withColumn("prompt_name", F.lit(prompt.name)) \
        .withColumn("prompt_hash", stable_id(F.col("messages"))) \
        .withColumn("item_id", stable_id(F.lit(setting), F.col("question_id"), F.coalesce(F.col("style"), F.lit("")),
                                         F.concat_ws(",", "evidence_ids"),
                                         F.when(F.col("run") > 0, F.col("run").cast("string")))) \
        .select(*ITEM_COLUMNS)


def _text(texts: DataFrame, alias: str) -> DataFrame:
    return texts.select(F.col("evidence_id").alias(f"{alias}_id"), F.col("text").alias(alias))


def dealt_for_run(questions: DataFrame, run: int, seed: int) -> DataFrame:
    """The questions as run ``run`` of an evaluation shows them (``evaluate.runs``): run 0 as
    stored (the bench's dealing); a later run moves the true answer's letter and shuffles the
    other options and the pair order with a seed of its own, so the mean over runs shows how
    much of a score is the options' positions (the paper averages three runs). Two-option
    settings (detection, +Desc, RtD) draw their order again per run: about half their items
    show run 0's order, asked once more."""
    questions = questions.withColumn("run", F.lit(run))
    if run == 0:
        return questions
    # The memory answer moves 2 letters a run from where the bench dealt it: every run stays
    # as balanced over A-E as the bench's dealing, and five runs put it on five letters.
    position = F.pmod(F.array_position("roles", "memory") - 1 + 2 * run, F.lit(len(LETTERS))).cast("int")
    roles = role_order(F.col("question_id"), position, seeded_hash(F.lit(run), F.lit(seed)))
    by_role = F.map_from_arrays("roles", "options")
    return questions.withColumn("options", F.transform(roles, lambda role: F.element_at(by_role, role))) \
        .withColumn("roles", roles) \
        .withColumn("letters", F.map_from_arrays("roles", F.array(*[F.lit(letter) for letter in LETTERS]))) \
        .withColumn("pair_misinformation_first", F.pmod(seeded_hash(F.col("question_id"), "pair", run, seed), F.lit(2)) == 0)


def _run_hash(key: Column, salt: str, seed: int) -> Column:
    """A passage's seeded hash for run ``run`` (the column): run 0 keeps the stored orders."""
    return F.when(F.col("run") == 0, seeded_hash(key, salt, seed)).otherwise(seeded_hash(key, salt, F.col("run"), seed))


def _by_kind(base: DataFrame) -> DataFrame:
    """One row per question and kind of its misinformation: ``kind``, ``kind_texts`` (style ->
    evidence id)."""
    return base.select("*", F.explode("misinformation_texts").alias("kind", "kind_texts"))


def choice_items(questions: DataFrame, texts: DataFrame, prompts: Mapping[str, Prompt]) -> DataFrame:
    """Multiple-choice items: the probe once per question (no kind); single and pair once per
    question and kind with a passing entry; style once per question, kind and style."""
    letters = F.array(*[F.lit(letter) for letter in LETTERS])
    if "run" not in questions.columns:
        questions = questions.withColumn("run", F.lit(0))
    base = questions.select(
        "run", "question_id", "claim_id", "hop", "relation", F.coalesce("topic", F.lit("unknown")).alias("topic"),
        "question", "roles", "settings", "misinformation_texts", "correct_texts", "pair_misinformation_first",
        letters.alias("letters"), option_lines(letters, F.col("options")).alias("options_text"))
    has = lambda setting: F.array_contains("settings", setting)  # noqa: E731
    probe = base.where(has("probe")).withColumn("kind", F.lit(None).cast("string")) \
        .withColumn("style", F.lit(None).cast("string")).withColumn("evidence_ids", F.array().cast("array<string>"))
    frames = [_finish(probe, "probe", prompts["probe"], {"question": "question", "options": "options_text"})]
    single = _by_kind(base.where(has("single"))).withColumn("passage_id", F.col("kind_texts").getItem(ENTRY_STYLE)) \
        .join(_text(texts, "passage"), "passage_id").withColumn("style", F.lit(ENTRY_STYLE)) \
        .withColumn("evidence_ids", F.array("passage_id"))
    frames.append(_finish(single, "single", prompts["single"],
                          {"passage": "passage", "question": "question", "options": "options_text"}))
    pair = _by_kind(base.where(has("pair"))) \
        .withColumn("misinformation_id", F.col("kind_texts").getItem(ENTRY_STYLE)) \
        .withColumn("correct_id", F.col("correct_texts").getItem(ENTRY_STYLE)) \
        .join(_text(texts, "misinformation"), "misinformation_id").join(_text(texts, "correct"), "correct_id")
    first = F.col("pair_misinformation_first")
    pair = pair.withColumn("passage_1", F.when(first, F.col("misinformation")).otherwise(F.col("correct"))) \
        .withColumn("passage_2", F.when(first, F.col("correct")).otherwise(F.col("misinformation"))) \
        .withColumn("evidence_ids", F.when(first, F.array("misinformation_id", "correct_id"))
                    .otherwise(F.array("correct_id", "misinformation_id"))) \
        .withColumn("style", F.lit(ENTRY_STYLE))
    frames.append(_finish(pair, "pair", prompts["pair"], {"passage_1": "passage_1", "passage_2": "passage_2",
                                                          "question": "question", "options": "options_text"}))
    style = _by_kind(base.where(has("style"))).select("*", F.explode("kind_texts").alias("style", "passage_id")) \
        .join(_text(texts, "passage"), "passage_id").withColumn("evidence_ids", F.array("passage_id"))
    frames.append(_finish(style, "style", prompts["style"],
                          {"passage": "passage", "question": "question", "options": "options_text"}))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def detection_passages(questions: DataFrame, texts: DataFrame, styles: Sequence[str] | None = None) -> DataFrame:
    """Passages to judge: every passing misinformation text of each question (by kind and
    style), and each question's correct texts (kind ``correct``). ``styles``: only these
    styles."""
    if "run" not in questions.columns:
        questions = questions.withColumn("run", F.lit(0))
    base = questions.where(F.array_contains("settings", "detection")).select(
        "run", "question_id", "claim_id", "hop", "relation", F.coalesce("topic", F.lit("unknown")).alias("topic"),
        "misinformation_texts", "correct_texts")
    wrong = _by_kind(base).select("run", "question_id", "claim_id", "kind", "hop", "relation", "topic",
                                  F.explode("kind_texts").alias("style", "passage_id"))
    right = base.select("run", "question_id", "claim_id", F.lit("correct").alias("kind"), "hop", "relation", "topic",
                        F.explode("correct_texts").alias("style", "passage_id"))
    passages = wrong.unionByName(right)
    if styles is not None:
        passages = passages.where(F.col("style").isin(list(styles)))
    return passages.join(_text(texts, "passage"), "passage_id")


def _two_options(rows: DataFrame, flagged_first: Column, texts: Column) -> DataFrame:
    """Two options (``texts``, in display order), the first of them the one that calls the
    passage misinformation where ``flagged_first``: roles, letters and the option lines."""
    roles = F.when(flagged_first, F.array(*[F.lit(r) for r in DETECTION_ROLES])) \
        .otherwise(F.array(*[F.lit(r) for r in reversed(DETECTION_ROLES)]))
    letters = F.array(*[F.lit(letter) for letter in LETTERS[:2]])
    return rows.withColumn("roles", roles).withColumn("letters", letters) \
        .withColumn("options_text", option_lines(letters, texts)).withColumn("evidence_ids", F.array("passage_id"))


def _detection_options(rows: DataFrame, seed: int, yes: str, no: str) -> DataFrame:
    """Two options, "misinformation: yes" and "no", in a seeded order per passage."""
    yes_first = F.pmod(_run_hash(F.col("passage_id"), "detect", seed), F.lit(2)) == 0
    return _two_options(rows, yes_first, F.when(yes_first, F.array(F.lit(yes), F.lit(no)))
                        .otherwise(F.array(F.lit(no), F.lit(yes))))


def detection_items(passages: DataFrame, prompts: Mapping[str, Prompt], seed: int, yes: str, no: str) -> DataFrame:
    rows = _detection_options(passages, seed, yes, no)
    return _finish(rows, "detection", prompts["detection"], {"passage": "passage", "options": "options_text"})


def desc_items(passages: DataFrame, entities: DataFrame, prompts: Mapping[str, Prompt], seed: int,
               yes: str, no: str) -> DataFrame:
    """Detection with the key entity's description in the prompt (the paper's "+Desc").
    ``entities``: passage_id, entity, description (one row per passage, from the RtD steps)."""
    rows = _detection_options(passages.join(entities, "passage_id"), seed, yes, no) \
        .withColumn("description", F.coalesce("description", F.lit("no description is available")))
    return _finish(rows, "desc", prompts["desc"], {"entity": "entity", "description": "description",
                                                   "passage": "passage", "options": "options_text"})


def rtd_items(passages: DataFrame, references: DataFrame, prompts: Mapping[str, Prompt], seed: int,
              yes: str, no: str) -> DataFrame:
    """RtD's last step as a judgement (``evaluate.rtd.last_step: judge``): is the passage
    misinformation, with the evidence the model reconstructed about the key entity shown as a
    reference. ``references``: passage_id, entity, reference."""
    rows = _detection_options(passages.join(references, "passage_id"), seed, yes, no)
    return _finish(rows, "rtd", prompts["rtd"], {"entity": "entity", "reference": "reference",
                                                 "passage": "passage", "options": "options_text"})


def rtd_compare_items(passages: DataFrame, references: DataFrame, prompts: Mapping[str, Prompt],
                      seed: int) -> DataFrame:
    """RtD's last step as the paper has it (section 4: "comparing the original text against
    the generated content, discerning the more likely source of misinformation"): the passage
    and the evidence the model reconstructed about the key entity, as Text 1 and Text 2 in a
    seeded order that does not say which is which; the model names the one more likely
    misinformation. Naming the passage is role ``misinformation`` (flagged), naming the
    reconstruction ``not_misinformation``, so success and false-alarm rates read as in
    detection. ``references``: passage_id, entity, reference."""
    passage_first = F.pmod(_run_hash(F.col("passage_id"), "rtd", seed), F.lit(2)) == 0
    # option "Text 1" names the first text shown: it flags the passage when the passage is first
    rows = _two_options(passages.join(references, "passage_id"), passage_first,
                        F.array(*[F.lit(t) for t in COMPARED_TEXTS])) \
        .withColumn("text_1", F.when(passage_first, F.col("passage")).otherwise(F.col("reference"))) \
        .withColumn("text_2", F.when(passage_first, F.col("reference")).otherwise(F.col("passage")))
    return _finish(rows, "rtd", prompts["rtd"], {"entity": "entity", "text_1": "text_1", "text_2": "text_2",
                                                 "options": "options_text"})


# --- RtD's first steps -------------------------------------------------------------------

def step_requests(rows: DataFrame, prompt: Prompt, fields: Mapping[str, str], step: str, model: str,
                  sampling_key: str) -> DataFrame:
    """Generation requests (the generation job's request columns) for an RtD step, one per
    passage: ``kind`` is the passage's, ``style`` names the step, ``source_evidence_id`` the passage."""
    messages = messages_column(prompt, dict(fields))
    return rows.select(
        "claim_id", "hop", "kind", F.lit(step).alias("style"), F.lit(prompt.name).alias("prompt_name"),
        F.lit(prompt.sha).alias("prompt_hash"), messages.alias("messages"),
        F.col("passage_id").alias("source_evidence_id"),
    ).withColumn("evidence_id", request_id(model, sampling_key)) \
        .select("evidence_id", "claim_id", "hop", "kind", "style", "prompt_name", "prompt_hash", "messages",
                "source_evidence_id")


def entity_name(reply: Column) -> Column:
    """The entity named in a short reply: its first line, without quotes, a leading "The
    entity is" or a final full stop."""
    first = F.trim(F.split(F.coalesce(reply, F.lit("")), "\n").getItem(0))
    first = F.regexp_replace(first, r"(?i)^(the )?(main |key )?entity(\s+is\s*:?|\s*:)\s*", "")
    return F.trim(F.regexp_replace(first, r"^[\"'*\s]+|[\"'*.\s]+$", ""))


def resolve_entities(extracted: DataFrame, labels: DataFrame, claims: DataFrame) -> DataFrame:
    """passage_id, claim_id, extracted (the model's words) -> + entity_id, entity, description,
    subject_match: the entity whose label or alias equals the extracted name (normalised); the
    claim's own subject wins among several such entities, then the smallest id. No match:
    entity_id null, the extracted name kept as ``entity``, no description."""
    names = labels.select("id", F.explode(F.array_union(F.array("label"),
                                                        F.coalesce("aliases", F.array().cast("array<string>"))))
                          .alias("name")).where(F.col("name").isNotNull()) \
        .select("id", normalized(F.col("name")).alias("key")).distinct()
    rows = extracted.withColumn("key", normalized(F.col("extracted"))) \
        .join(claims.select("claim_id", "subject_id"), "claim_id", "left")
    matched = rows.join(names, "key", "left")
    from pyspark.sql import Window

    best = Window.partitionBy("passage_id").orderBy(
        F.when(F.col("id") == F.col("subject_id"), 0).otherwise(1), F.col("id").asc_nulls_last())
    matched = matched.withColumn("n", F.row_number().over(best)).where("n = 1")
    described = labels.select(F.col("id"), F.col("label").alias("entity_label"), "description")
    return matched.join(described, "id", "left").select(
        "passage_id", "claim_id", "extracted", F.col("id").alias("entity_id"),
        F.coalesce(F.col("entity_label"), F.col("extracted")).alias("entity"), "description",
        (F.col("id") == F.col("subject_id")).alias("subject_match"))


# --- answering ---------------------------------------------------------------------------

_LETTER_REPLY = re.compile(
    r"^\s*(?:(?:the\s+)?(?:answer|choice|option)(?:\s+is)?\s*[:\-]?\s*)?[(\[]?([A-Z])[)\]]?(?:[.):]\s*(.*?))?\s*\.?\s*$",
    re.IGNORECASE | re.DOTALL)


def _plain(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def parse_choice(reply: str | None, letters: Sequence[str], options: Sequence[str] | None = None) -> str | None:
    """The letter a generated reply chose, read strictly: a letter of the options alone or
    with its own option text ("B", "(B)", "B.", "Answer: B", "B. Paris"), or exactly one
    option's text ("Paris"). Anything else (two letters, a sentence, a letter with another
    option's text, nothing) is None: unparsed, never guessed."""
    if reply is None:
        return None
    text = reply.strip()
    if not text:
        return None
    # Options named by a word ("Yes" / "No" of a judge) are read when the reply is that word.
    words = [letter for letter in letters if len(letter) > 1 and _plain(letter) == _plain(text)]
    if len(words) == 1:
        return words[0]
    match = _LETTER_REPLY.match(text)
    if match and match.group(1) in letters:  # upper case only: "a" is a word, "A" a letter
        letter, rest = match.group(1), (match.group(2) or "").strip()
        if not rest:
            return letter
        if options is not None and _plain(rest) == _plain(options[letters.index(letter)]):
            return letter
        return None
    if options is not None:
        same = [letter for letter, option in zip(letters, options) if _plain(option) == _plain(text.rstrip("."))]
        if len(same) == 1:
            return same[0]
    return None


def choose(logprobs: Sequence[float]) -> int | None:
    """The option with the highest log-probability; None when no option has a finite one."""
    finite = [(value, i) for i, value in enumerate(logprobs) if value is not None and math.isfinite(value)]
    if not finite:
        return None
    return max(finite, key=lambda pair: (pair[0], -pair[1]))[1]


def role_probabilities(logprobs: Sequence[float], roles: Sequence[str]) -> dict[str, float] | None:
    """Each role's probability among the options (softmax over the options' log-probs)."""
    finite = [v for v in logprobs if v is not None and math.isfinite(v)]
    if not finite:
        return None
    top = max(finite)
    weights = [math.exp(v - top) if v is not None and math.isfinite(v) else 0.0 for v in logprobs]
    total = sum(weights)
    return {role: weight / total for role, weight in zip(roles, weights)}


def _options_of(messages: list[dict], letters: Sequence[str]) -> list[str] | None:
    """The option texts as the prompt shows them ("A. Paris" lines), for the strict parse."""
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    found = {}
    for line in user.splitlines():
        match = re.match(r"^([A-Z])\. (.*)$", line)
        if match and match.group(1) in letters:
            found[match.group(1)] = match.group(2)
    return [found.get(letter, "") for letter in letters] if len(found) == len(letters) else None


def answer_batches(llm_settings: dict, mode: str, sampling: dict, run_id: str, fallback: bool = False,
                   stage: str = "evaluate"):
    """mapInPandas function: queued items in (item columns, ``response_id``, ``attempts``),
    eval_responses rows out, answered by this worker's engine. ``fallback`` (log-prob mode):
    an item whose options got no log-probability at all (a reply that starts with none of
    the letters) is answered by a generated reply read with
    the strict parse instead; its ``option_logprobs`` stay empty and ``raw_answer`` holds the
    reply. ``stage``: how a model error names the work (e.g. "hoax judge")."""
    from misbench.llm import SamplingParams
    from misbench.llm.client import RowFailed, model_client

    params = SamplingParams(**sampling)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            backend = model_client(llm_settings, stage)
            prompts = [json.loads(m) for m in batch["messages"]]
            letters = [list(x) for x in batch["letters"]]
            roles = [list(x) for x in batch["roles"]]
            started = pd.Timestamp.now(tz="UTC")
            answers: list[dict] = [{} for _ in prompts]
            clock = time.perf_counter
            if mode == "logprobs":
                groups: dict[tuple, list[int]] = {}
                for i, row_letters in enumerate(letters):
                    groups.setdefault(tuple(row_letters), []).append(i)
                for group_letters, indexes in groups.items():
                    begun = clock()
                    # A server that died or an endpoint without log-probs fails the task (Spark
                    # retries it); a refused prompt fails its row only, retried next run.
                    # (with the fallback, an endpoint without log-probs gets replies asked instead)
                    scores = backend.option_logprobs_many([prompts[i] for i in indexes], list(group_letters),
                                                          required=not fallback)
                    latency = (clock() - begun) / len(indexes)
                    for i, row_scores in zip(indexes, scores):
                        if isinstance(row_scores, RowFailed):
                            answers[i] = {"error": str(row_scores), "latency_s": latency}
                            continue
                        chosen = choose(row_scores)
                        answers[i] = {
                            "option_logprobs": [float(v) if math.isfinite(v) else None for v in row_scores],
                            "role_probabilities": role_probabilities(row_scores, roles[i]),
                            "chosen": chosen, "raw_answer": None if chosen is None else letters[i][chosen],
                            "latency_s": latency,
                        }
            pending = list(range(len(prompts))) if mode != "logprobs" else \
                [i for i, a in enumerate(answers) if fallback and not a.get("error") and a.get("chosen") is None]
            if pending:
                results = backend.generate([prompts[i] for i in pending], params)
                for i, result in zip(pending, results):
                    if result.error:
                        answers[i] = {"error": result.error, "latency_s": result.latency_s}
                        continue
                    letter = parse_choice(result.text, letters[i], _options_of(prompts[i], letters[i]))
                    answers[i] = {"raw_answer": result.text, "latency_s": result.latency_s,
                                  "chosen": None if letter is None else letters[i].index(letter)}
            rows = []
            for (_, item), answer, row_letters, row_roles in zip(batch.iterrows(), answers, letters, roles):
                error = answer.get("error")
                chosen = answer.get("chosen")
                rows.append({
                    "response_id": item["response_id"], "model": backend.model, "backend": backend.backend,
                    "answer_mode": mode, "setting": item["setting"], "item_id": item["item_id"],
                    "question_id": item["question_id"], "claim_id": item["claim_id"], "kind": item["kind"],
                    "hop": int(item["hop"]), "relation": item["relation"], "topic": item["topic"],
                    "style": item["style"], "evidence_ids": list(item["evidence_ids"]),
                    "prompt_name": item["prompt_name"], "prompt_hash": item["prompt_hash"],
                    "letters": row_letters, "roles": row_roles, "raw_answer": answer.get("raw_answer"),
                    "chosen_letter": None if chosen is None else row_letters[chosen],
                    "chosen_role": None if chosen is None else row_roles[chosen],
                    "option_logprobs": answer.get("option_logprobs"),
                    "role_probabilities": answer.get("role_probabilities"),
                    "unparsed": error is None and chosen is None, "error": error,
                    "attempts": int(item["attempts"]) + 1, "latency_s": float(answer.get("latency_s") or 0.0),
                    "load_id": backend.load_id, "mlflow_run_id": run_id, "answered_at": started,
                })
            yield pd.DataFrame(rows)

    return run


def response_key(model: str, mode: str) -> Column:
    """An answer's id: the model, the answer mode and the rendered prompt of the item (a new
    prompt wording or option order is a new answer; the same item is never asked twice)."""
    return stable_id(F.lit(model), F.lit(mode), F.col("setting"), F.col("item_id"), F.col("prompt_hash"), length=24)
