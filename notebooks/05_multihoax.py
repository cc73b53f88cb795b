# Databricks notebook source
# MAGIC %md
# MAGIC # MultiHoax: false-premise questions and how models handle them
# MAGIC * `hoax_questions`, `hoax_stats` are filled by `misbench hoax` (multi-hop questions built from the graph,
# MAGIC   each hiding a false premise, so the only right option is "I do not know"; `hoax_stats` counts every
# MAGIC   candidate by the reason it was kept or not) or `misbench import-hoax` (questions of a MultiHoax release,
# MAGIC   under their own `source`);
# MAGIC * `eval_metrics` rows with settings `hoax_choice`, `hoax_justification`, `hoax_json`, `eval_responses` and
# MAGIC   `hoax_judgements` are filled by `misbench hoax-evaluate` (the paper's three tasks: choose an option;
# MAGIC   say why "I do not know", judged by a model; answer as JSON).
# MAGIC
# MAGIC Accuracy = share of answered questions where the model chose "I do not know" (justification: and the
# MAGIC judge says its reason names the false premise). Every metric is given overall and per label - `country`,
# MAGIC `category`, `reasoning_type`, `answer_type`, `false_premise_type`, each its own column of `eval_metrics`
# MAGIC (null: all; a question without the label counts as `unknown`) - with its n.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %md
# MAGIC ## The questions (`hoax_questions`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Questions per source and pattern
# MAGIC SELECT source, pattern,
# MAGIC        count(*) AS questions,
# MAGIC        count_if(reworded) AS reworded,
# MAGIC        count(DISTINCT subject_id) AS subjects,
# MAGIC        count(DISTINCT bridge_id) AS bridges,
# MAGIC        count(DISTINCT asked_property) AS asked_properties,
# MAGIC        count(DISTINCT premise_property) AS premise_properties,
# MAGIC        count_if(premise_proof IS NOT NULL) AS with_proof,  -- the graph proves the premise false
# MAGIC        count(DISTINCT country) AS countries,
# MAGIC        round(avg(size(options)), 2) AS mean_options
# MAGIC FROM hoax_questions
# MAGIC GROUP BY source, pattern
# MAGIC ORDER BY source, pattern

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Questions per label: reasoning_type, category, country, answer_type, false_premise_type
# MAGIC SELECT source, label, coalesce(value, '(none)') AS value,
# MAGIC        count(*) AS questions,
# MAGIC        round(try_divide(count(*), sum(count(*)) OVER (PARTITION BY source, label)), 3) AS share
# MAGIC FROM hoax_questions
# MAGIC LATERAL VIEW explode(map('reasoning_type', reasoning_type, 'category', category, 'country', country,
# MAGIC                          'answer_type', answer_type, 'false_premise_type', false_premise_type)) l AS label, value
# MAGIC GROUP BY source, label, coalesce(value, '(none)')
# MAGIC ORDER BY source, label, questions DESC, value

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Reasoning type against premise type and answer type
# MAGIC SELECT source, reasoning_type, false_premise_type, answer_type,
# MAGIC        count(*) AS questions,
# MAGIC        count(DISTINCT category) AS categories,
# MAGIC        count(DISTINCT country) AS countries
# MAGIC FROM hoax_questions
# MAGIC GROUP BY source, reasoning_type, false_premise_type, answer_type
# MAGIC ORDER BY source, questions DESC

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Where "I do not know" sits (dealt round-robin over A-D), per reasoning type
# MAGIC SELECT source, reasoning_type,
# MAGIC        count_if(idk_letter = 'A') AS A,
# MAGIC        count_if(idk_letter = 'B') AS B,
# MAGIC        count_if(idk_letter = 'C') AS C,
# MAGIC        count_if(idk_letter = 'D') AS D,
# MAGIC        count(*) AS questions
# MAGIC FROM hoax_questions
# MAGIC GROUP BY source, reasoning_type
# MAGIC ORDER BY source, reasoning_type

# COMMAND ----------
# MAGIC %sql
# MAGIC -- False premises: the premise property and the asked property, with their labels
# MAGIC SELECT q.source, q.premise_property, any_value(pp.label) AS premise_property_label,
# MAGIC        q.asked_property, any_value(ap.label) AS asked_property_label,
# MAGIC        count(*) AS questions,
# MAGIC        round(avg(size(coalesce(q.contradicted_statement_ids, array()))), 2) AS mean_contradicted_statements
# MAGIC FROM hoax_questions q
# MAGIC LEFT JOIN entities pp ON pp.id = q.premise_property
# MAGIC LEFT JOIN entities ap ON ap.id = q.asked_property
# MAGIC GROUP BY q.source, q.premise_property, q.asked_property
# MAGIC ORDER BY questions DESC, q.source
# MAGIC LIMIT 50

# COMMAND ----------
# MAGIC %sql
# MAGIC -- A few questions with their options, the near miss and the explanation
# MAGIC SELECT source, reasoning_type, question, options, idk_letter, near_miss, premise_statement, explanation
# MAGIC FROM hoax_questions
# MAGIC ORDER BY source, question_id
# MAGIC LIMIT 20

# COMMAND ----------
# MAGIC %md
# MAGIC ## Why candidates did not become questions (`hoax_stats`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Candidates (chain x premise) per source, pattern and reason; kept = questions
# MAGIC SELECT source, pattern, reason, candidates,
# MAGIC        round(share, 4) AS share,
# MAGIC        round(try_divide(candidates, sum(candidates) OVER (PARTITION BY source, pattern)), 4) AS share_of_pattern
# MAGIC FROM hoax_stats
# MAGIC ORDER BY source, pattern, candidates DESC

# COMMAND ----------
# MAGIC %md
# MAGIC ## Model results (`eval_metrics`, settings `hoax_*`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model: accuracy of each task with its n, and the side metrics
# MAGIC SELECT model, answer_mode, source,
# MAGIC        round(max(CASE WHEN setting = 'hoax_choice' AND metric = 'accuracy' THEN value END), 3) AS choice_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_choice' AND metric = 'accuracy' THEN n END) AS choice_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_choice' AND metric = 'near_miss_rate' THEN value END), 3) AS choice_near_miss_rate,
# MAGIC        round(max(CASE WHEN setting = 'hoax_choice' AND metric = 'unparsed_rate' THEN value END), 3) AS choice_unparsed_rate,
# MAGIC        round(max(CASE WHEN setting = 'hoax_justification' AND metric = 'accuracy' THEN value END), 3) AS justification_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_justification' AND metric = 'accuracy' THEN n END) AS justification_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_justification' AND metric = 'judged_names_premise_rate' THEN value END), 3) AS judged_names_premise_rate,
# MAGIC        max(CASE WHEN setting = 'hoax_justification' AND metric = 'judged_names_premise_rate' THEN n END) AS judged_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_json' AND metric = 'accuracy' THEN value END), 3) AS json_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_json' AND metric = 'accuracy' THEN n END) AS json_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_json' AND metric = 'invalid_json_rate' THEN value END), 3) AS invalid_json_rate,
# MAGIC        round(max(CASE WHEN setting = 'hoax_json' AND metric = 'schema_violation_rate' THEN value END), 3) AS schema_violation_rate,
# MAGIC        max(computed_at) AS computed_at
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('hoax_choice', 'hoax_justification', 'hoax_json')
# MAGIC   AND country IS NULL AND category IS NULL AND reasoning_type IS NULL AND answer_type IS NULL
# MAGIC   AND false_premise_type IS NULL
# MAGIC GROUP BY model, answer_mode, source
# MAGIC ORDER BY model, answer_mode, source

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Every overall metric per model and task (long form), with its n
# MAGIC SELECT model, source, setting, answer_mode, metric, round(value, 4) AS value, n, items
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('hoax_choice', 'hoax_justification', 'hoax_json')
# MAGIC   AND country IS NULL AND category IS NULL AND reasoning_type IS NULL AND answer_type IS NULL
# MAGIC   AND false_premise_type IS NULL
# MAGIC ORDER BY model, source, setting, metric

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Accuracy per label and task (the paper's Tables 3-6), each with its n
# MAGIC WITH labelled AS (
# MAGIC   SELECT model, answer_mode, source, setting, metric, value, n,
# MAGIC          CASE WHEN country IS NOT NULL THEN 'country'
# MAGIC               WHEN category IS NOT NULL THEN 'category'
# MAGIC               WHEN reasoning_type IS NOT NULL THEN 'reasoning_type'
# MAGIC               WHEN answer_type IS NOT NULL THEN 'answer_type'
# MAGIC               WHEN false_premise_type IS NOT NULL THEN 'false_premise_type' END AS label,
# MAGIC          coalesce(country, category, reasoning_type, answer_type, false_premise_type) AS label_value
# MAGIC   FROM eval_metrics
# MAGIC   WHERE setting IN ('hoax_choice', 'hoax_justification', 'hoax_json')
# MAGIC     AND metric IN ('accuracy', 'near_miss_rate')
# MAGIC     AND coalesce(country, category, reasoning_type, answer_type, false_premise_type) IS NOT NULL
# MAGIC )
# MAGIC SELECT model, answer_mode, source, label, label_value,
# MAGIC        round(max(CASE WHEN setting = 'hoax_choice' AND metric = 'accuracy' THEN value END), 3) AS choice_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_choice' AND metric = 'accuracy' THEN n END) AS choice_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_choice' AND metric = 'near_miss_rate' THEN value END), 3) AS choice_near_miss_rate,
# MAGIC        round(max(CASE WHEN setting = 'hoax_justification' AND metric = 'accuracy' THEN value END), 3) AS justification_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_justification' AND metric = 'accuracy' THEN n END) AS justification_n,
# MAGIC        round(max(CASE WHEN setting = 'hoax_json' AND metric = 'accuracy' THEN value END), 3) AS json_accuracy,
# MAGIC        max(CASE WHEN setting = 'hoax_json' AND metric = 'accuracy' THEN n END) AS json_n
# MAGIC FROM labelled
# MAGIC GROUP BY model, answer_mode, source, label, label_value
# MAGIC ORDER BY model, answer_mode, source, label, choice_n DESC, label_value

# COMMAND ----------
# MAGIC %sql
# MAGIC -- What the models chose (latest answer per item): idk = "I do not know", near_miss = the answer without the premise
# MAGIC WITH latest AS (
# MAGIC   SELECT *, row_number() OVER (PARTITION BY model, answer_mode, setting, item_id
# MAGIC                                ORDER BY answered_at DESC, response_id) AS pick
# MAGIC   FROM eval_responses
# MAGIC   WHERE setting IN ('hoax_choice', 'hoax_json')
# MAGIC )
# MAGIC SELECT model, answer_mode, setting,
# MAGIC        count(*) AS answers,
# MAGIC        count_if(chosen_role = 'idk') AS idk,
# MAGIC        count_if(chosen_role = 'near_miss') AS near_miss,
# MAGIC        count_if(chosen_role = 'context') AS context,
# MAGIC        count_if(chosen_role = 'distractor') AS distractor,
# MAGIC        count_if(error IS NULL AND chosen_role IS NULL) AS unread,
# MAGIC        count_if(error IS NOT NULL) AS errors,
# MAGIC        count_if(chosen_letter = 'A') AS A,
# MAGIC        count_if(chosen_letter = 'B') AS B,
# MAGIC        count_if(chosen_letter = 'C') AS C,
# MAGIC        count_if(chosen_letter = 'D') AS D
# MAGIC FROM latest
# MAGIC WHERE pick = 1
# MAGIC GROUP BY model, answer_mode, setting
# MAGIC ORDER BY model, answer_mode, setting

# COMMAND ----------
# MAGIC %md
# MAGIC ## The judge (`hoax_judgements`)
# MAGIC One row per justification: the judge's probability that it names the false premise, its verdict, and the
# MAGIC justification's similarity to the stored explanation. A small model judging itself says "Yes" readily.

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model and judge: justifications, verdicts, mean judge probability and similarity
# MAGIC SELECT model, judge_model,
# MAGIC        count(*) AS justifications,
# MAGIC        count(names_premise) AS judged,
# MAGIC        count_if(names_premise) AS names_premise,
# MAGIC        round(try_divide(count_if(names_premise), count(names_premise)), 3) AS names_premise_rate,
# MAGIC        count_if(similar) AS similar,
# MAGIC        round(avg(judge_yes_probability), 3) AS mean_judge_probability,
# MAGIC        round(avg(similarity), 3) AS mean_similarity,
# MAGIC        max(judged_at) AS last_judged_at
# MAGIC FROM hoax_judgements
# MAGIC GROUP BY model, judge_model
# MAGIC ORDER BY model, judge_model

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Justifications beside the stored explanation
# MAGIC SELECT j.model, q.question, left(j.justification, 300) AS justification, left(q.explanation, 300) AS explanation,
# MAGIC        round(j.judge_yes_probability, 3) AS judge_yes_probability, j.names_premise,
# MAGIC        round(j.similarity, 3) AS similarity, j.similar
# MAGIC FROM hoax_judgements j
# MAGIC LEFT JOIN hoax_questions q ON q.question_id = j.question_id
# MAGIC ORDER BY j.model, j.names_premise, j.similarity DESC
# MAGIC LIMIT 30

# COMMAND ----------
# Plot: accuracy per task and model, and hoax_choice accuracy per label
import matplotlib.pyplot as plt
import pandas as pd

TASKS = ["hoax_choice", "hoax_justification", "hoax_json"]
LABELS = ["reasoning_type", "category", "false_premise_type", "answer_type", "country"]
hoax = spark.sql("""
    SELECT model, answer_mode, source, setting, value, n, country, category, reasoning_type, answer_type,
           false_premise_type
    FROM eval_metrics
    WHERE setting IN ('hoax_choice', 'hoax_justification', 'hoax_json') AND metric = 'accuracy'
""").toPandas()


def bar_with_n(ax, x, value, n, width, color, label=None):
    if value is None or pd.isna(value):
        ax.annotate("n=0", (x, 0), ha="center", va="bottom", fontsize=7)
        return
    ax.bar(x, value, width, color=color, label=label)
    ax.annotate(f"n={int(n)}", (x, value), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)


if hoax.empty:
    print("no hoax_* metrics in eval_metrics: run misbench hoax-evaluate first")
else:
    hoax["series"] = hoax["model"] + " / " + hoax["answer_mode"] + " / " + hoax["source"]
    names = sorted(hoax["series"].unique())
    overall = hoax[hoax[LABELS].isna().all(axis=1)]
    fig, grid = plt.subplots(2, 3, figsize=(15, 8))
    axes = grid.ravel()
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        rows = overall[overall["series"] == name]
        for j, task in enumerate(TASKS):
            match = rows[rows["setting"] == task]
            bar_with_n(axes[0], j + (i - (len(names) - 1) / 2) * width,
                       match["value"].iloc[0] if len(match) else None, match["n"].iloc[0] if len(match) else 0,
                       width, f"C{i}", name if j == 0 else None)
    axes[0].set_xticks(range(len(TASKS)), [t.replace("hoax_", "") for t in TASKS])
    axes[0].set_title("accuracy per task", fontsize=10)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=7)
    choice = hoax[hoax["setting"] == "hoax_choice"]
    for ax, label in zip(axes[1:], LABELS):
        rows = choice[choice[label].notna()]
        groups = sorted(rows[label].unique())[:15]
        for i, name in enumerate(names):
            mine = rows[rows["series"] == name]
            for j, group in enumerate(groups):
                match = mine[mine[label] == group]
                bar_with_n(ax, j + (i - (len(names) - 1) / 2) * width,
                           match["value"].iloc[0] if len(match) else None, match["n"].iloc[0] if len(match) else 0,
                           width, f"C{i}")
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"hoax_choice accuracy per {label}", fontsize=10)
    for ax in axes:
        ax.set_ylim(0, 1.1)
    show(fig)
