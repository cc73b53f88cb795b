"""hoax-evaluate: hoax_questions -> eval_responses, hoax_judgements, eval_metrics (``hoax_*``), MLflow.

Per model: the choice task, then (where asked) a justification for every "I do not know",
judged by the judge model and compared with the explanation, and the JSON task. Every
answer goes through the evaluation job's committed chunks (a rerun asks only what is
missing); temperature 0 throughout.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from misbench.config import Config, ConfigError, pointed_at_endpoint
from misbench.evaluate import stage as eval_stage
from misbench.evaluate import run as evaluation_run
from misbench.evaluate.job import answer_mode, model_config
from misbench.evaluate.metrics import HOAX_DIMENSIONS
from misbench.hoax import answers
from misbench.lake import Lake
from misbench.llm import answer_words, model_identity
from misbench.prompts import load_prompt

COMMAND = "hoax-evaluate"  # names its work tables apart from evaluate's (answer_items)
PROMPTS = {"choice": "hoax_choice", "justification": "hoax_justify", "json": "hoax_json"}


@dataclass
class HoaxModelReport:
    model: str
    backend: str
    answer_mode: str
    answers: int
    answered_now: int
    unparsed: int
    mlflow_run_id: str
    headline: dict = field(default_factory=dict)  # setting (hoax_choice, ...) -> (metric, value, n)


def _greedy(max_tokens: int, seed: int) -> dict:
    return dict(temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=seed, min_tokens=0)


def figure_by_label(table, model: str):
    """Accuracy per task along each label (the paper's Tables 3-6 and 20-21 as bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table[table["metric"] == "accuracy"]
    if rows.empty:
        return None
    figure, axes = plt.subplots(1, len(HOAX_DIMENSIONS), figsize=(4 * len(HOAX_DIMENSIONS), 3.6), squeeze=False)
    for axis, dimension in zip(axes[0], HOAX_DIMENSIONS):
        part = rows[rows[dimension].notna()]
        groups = sorted(part[dimension].unique())
        settings = sorted(part["setting"].unique())
        width = 0.8 / max(1, len(settings))
        for i, setting in enumerate(settings):
            values = [part[(part["setting"] == setting) & (part[dimension] == g)]["value"] for g in groups]
            heights = [0.0 if v.empty or v.isna().all() else float(v.iloc[0]) for v in values]
            axis.bar([g + i * width for g in range(len(groups))], heights, width, label=setting)
        axis.set_xticks([g + width * (len(settings) - 1) / 2 for g in range(len(groups))], groups,
                        rotation=45, ha="right", fontsize=7)
        axis.set_ylim(0, 1)
        axis.set_title(dimension.replace("_", " "), fontsize=9)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(fontsize=7)
    figure.suptitle(f"MultiHoax accuracy by label: {model}", fontsize=10)
    figure.tight_layout()
    plt.close(figure)
    return figure


def run_hoax_evaluate(spark: SparkSession, lake: Lake, cfg: Config, models: list[str] | None = None,
                      tasks: list[str] | None = None, source: str = "wikidata") -> list[HoaxModelReport]:
    import mlflow

    from misbench.evaluate import tracking

    if not lake.exists("hoax_questions"):
        raise FileNotFoundError("table 'hoax_questions' does not exist: run misbench hoax (or import-hoax) first")
    settings = cfg.get("hoax.evaluate")
    tasks = list(tasks or settings["tasks"])
    unknown = sorted(set(tasks) - set(answers.TASKS))
    if unknown:
        raise ConfigError(f"unknown hoax tasks {unknown}; known: {', '.join(answers.TASKS)}")
    if "choice" not in tasks:
        tasks.insert(0, "choice")  # the justification task asks about the choice's answers
    questions = lake.read("hoax_questions").where(F.col("source") == source)
    if settings.get("limit"):
        questions = questions.orderBy("question_id").limit(int(settings["limit"]))
    questions = questions.cache()
    if questions.count() == 0:
        raise ValueError(f"no hoax questions for source '{source}'")
    options = cfg.get("evaluate")
    seed = int(options["seed"])
    prompts = {task: load_prompt(name) for task, name in PROMPTS.items()}
    prompts["judge"] = load_prompt(settings["judge"]["prompt"])
    schema = answers.answer_schema()
    tracking.close_abandoned_runs(tracking.open_experiment(cfg))
    reports = []
    for spec in models or [None]:
        model_cfg = model_config(cfg, spec)
        llm = model_cfg.get("llm")
        model = model_identity(llm)
        mode, fallback = answer_mode(model_cfg)
        judge_llm = pointed_at_endpoint(llm, settings["judge"].get("llm"))
        judge_model = model_identity(judge_llm)
        with evaluation_run.parent_run(COMMAND, model, source, {
                "model": model, "backend": llm["backend"], "answer_mode": mode, "source": source,
                "tasks": ",".join(tasks), "temperature": 0.0, "judge_model": judge_model,
                "judge_threshold": settings["judge"]["threshold"],
                "similarity_threshold": settings["similarity_threshold"],
                **{f"prompt.{key}": f"{prompt.name}:{prompt.sha}" for key, prompt in sorted(prompts.items())},
            }, tags={"misbench.benchmark": "multihoax"}) as (parent, evaluation_id):
            run_id = parent.info.run_id
            tracking.log_tables_as_inputs(lake, ["hoax_questions"])
            produce = eval_stage.answer_batches(llm, mode, dict(options["generate_sampling"]), run_id, fallback,
                                                "hoax choice")
            answered, choice = evaluation_run.answer_items(
                lake, options, llm, model, mode, answers.choice_items(questions, prompts["choice"]), produce,
                command=COMMAND, source=source)
            choice = choice.cache()
            every = [choice]  # the responses of each task, for the per-item artifact
            cached = [choice]
            justified = json_answers = None
            if "justification" in tasks:
                produce = answers.reply_batches(llm, _greedy(int(settings["justification_max_tokens"]), seed),
                                                run_id, schema, "hoax justification")
                count, justifications = evaluation_run.answer_items(
                    lake, options, llm, model, "generate",
                    answers.justification_items(questions, choice, prompts["justification"]), produce,
                    command=COMMAND, source=source)
                answered += count
                justifications = justifications.cache()
                cached.append(justifications)
                # P("Yes") where the judge's backend gives it, else its reply read as Yes / No
                judge_mode, judge_fallback = mode, fallback
                produce = eval_stage.answer_batches(judge_llm, judge_mode, _greedy(4, seed), run_id, judge_fallback,
                                                    "hoax judge")
                # the judge's replies are not the evaluated model's answers: not counted as new ones
                _, judged = evaluation_run.answer_items(
                    lake, options, judge_llm, judge_model, judge_mode,
                    answers.judge_items(questions, justifications, prompts["judge"], answer_words(judge_llm)),
                    produce, command=f"{COMMAND} judging {model}", source=source)
                pairs = justifications.where(F.col("raw_answer").isNotNull()).join(
                    questions.select("question_id", "explanation"), "question_id").select(
                    "response_id", F.col("raw_answer").alias("justification"), "explanation")
                similarities = pairs.mapInPandas(answers.similarity_batches(dict(cfg.get("quality"))),
                                                 "response_id string, similarity double")
                lake.upsert(answers.judgements(justifications, judged, similarities,
                                               float(settings["judge"]["threshold"]),
                                               float(settings["similarity_threshold"]), judge_model),
                            "hoax_judgements", ["response_id"])
                justified = lake.read("hoax_judgements").join(justifications.select("response_id"), "response_id",
                                                              "left_semi")
                every.append(justifications)
            if "json" in tasks:
                produce = answers.reply_batches(llm, _greedy(int(settings["json_max_tokens"]), seed), run_id, schema,
                                                "hoax json")
                count, json_answers = evaluation_run.answer_items(
                    lake, options, llm, model, "generate", answers.json_items(questions, prompts["json"]), produce,
                    command=COMMAND, source=source)
                answered += count
                json_answers = answers.with_json_verdict(json_answers, questions, schema).cache()
                cached.append(json_answers)
                every.append(json_answers.drop("json_verdict"))
            computed = answers.hoax_metrics(choice, justified, json_answers, questions).cache()
            setting_runs = evaluation_run.log_setting_runs(computed, [answers.SETTINGS[task] for task in tasks])
            now = dt.datetime.now(dt.timezone.utc)
            rows = computed.select(
                F.lit(evaluation_id).alias("evaluation_id"), F.lit(model).alias("model"),
                F.when(F.col("setting") == answers.SETTINGS["choice"], F.lit(mode)).otherwise(F.lit("generate"))
                .alias("answer_mode"), F.lit(source).alias("source"), "setting", "metric", "value", "n", "items",
                *[F.lit(None).cast(kind).alias(name) for name, kind in
                  (("kind", "string"), ("hop", "int"), ("style", "string"), ("topic", "string"), ("memory", "string"))],
                evaluation_run.run_id_of_setting(setting_runs).alias("mlflow_run_id"), F.lit(now).alias("computed_at"),
                *HOAX_DIMENSIONS, F.when(F.col("value").isNotNull(), 1).otherwise(0).alias("runs"),
                F.lit(None).cast("double").alias("value_spread"),
            ).withColumn("metric_id", evaluation_run.metric_id())
            per_item = every[0]
            for frame in every[1:]:
                per_item = per_item.unionByName(frame)
            published = evaluation_run.publish(
                lake, rows, evaluation_id=evaluation_id, model=model, mode=None, source=source, hoax=True,
                settings=[answers.SETTINGS[task] for task in tasks],
                stats_table="hoax_stats", per_item=per_item, per_item_artifact="hoax_responses.parquet")
            figure = figure_by_label(published.metrics, model)
            if figure is not None:
                mlflow.log_figure(figure, "hoax_accuracy_by_label.png")
            for frame in (computed, *cached):
                frame.unpersist()
        reports.append(HoaxModelReport(
            model=model, backend=llm["backend"], answer_mode=mode, answers=len(published.per_item),
            answered_now=answered, unparsed=int(published.per_item["unparsed"].fillna(False).sum()),
            mlflow_run_id=run_id, headline=published.headline))
    questions.unpersist()
    return reports
