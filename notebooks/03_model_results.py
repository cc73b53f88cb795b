# Databricks notebook source
# MAGIC %md
# MAGIC # Model results on MisBench
# MAGIC The paper's metrics per model, from `eval_metrics` and `eval_responses`, both filled by
# MAGIC `misbench evaluate` (one row per model, answer mode, source, setting, metric and breakdown; the latest
# MAGIC evaluation of a model, answer mode and source replaces its earlier rows; older runs stay in MLflow).
# MAGIC
# MAGIC * **success rate** (`detection`): share of misinformation passages the model calls misinformation; read it
# MAGIC   with the **false-alarm rate** (share of correct passages called misinformation).
# MAGIC * **MR**, memorization ratio (`single`: one misinformation encyclopedia entry; `style`: one text per
# MAGIC   style) = Rc / (Rc + Rm) on the model's Memory questions (those its `probe` answered right).
# MAGIC * **TendCM** (`pair`: correct and misinformation entry together) = (Rc - Rm) / (Rc + Rm) in [-1, 1];
# MAGIC   1 = always the correct evidence's answer. The paper reports it on Memory questions (`memory = 'memory'`,
# MAGIC   Figure 5) and Unknown ones (Figure 15); the rows without a memory breakdown pool both.
# MAGIC
# MAGIC Every value comes with its `n` (its denominator); an empty denominator gives a null value with n = 0.
# MAGIC A breakdown column left null in `eval_metrics` means "all", so each query below fixes every breakdown
# MAGIC column it does not show to null. `top_letter_share` near 1 means the answers are position bias.
# MAGIC MultiHoax (`hoax_*` settings) is in `05_multihoax`, RtD in `04_rtd`.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %md
# MAGIC ## What was evaluated

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Evaluations in eval_metrics: answers per model, answer mode, source and setting
# MAGIC SELECT model, answer_mode, source, setting,
# MAGIC        max(items) AS items,
# MAGIC        max(evaluation_id) AS evaluation_id,
# MAGIC        max(mlflow_run_id) AS mlflow_run_id,
# MAGIC        max(computed_at) AS computed_at
# MAGIC FROM eval_metrics
# MAGIC WHERE setting NOT LIKE 'hoax%'
# MAGIC   AND kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC GROUP BY model, answer_mode, source, setting
# MAGIC ORDER BY model, answer_mode, source, setting

# COMMAND ----------
# MAGIC %md
# MAGIC ## Headline per model

# COMMAND ----------
# MAGIC %sql
# MAGIC -- One row per model: probe accuracy, detection, MR and TendCM, each with its n
# MAGIC SELECT model, answer_mode, source,
# MAGIC        round(max(CASE WHEN setting = 'probe' AND metric = 'accuracy' AND memory IS NULL THEN value END), 3) AS probe_accuracy,
# MAGIC        max(CASE WHEN setting = 'probe' AND metric = 'accuracy' AND memory IS NULL THEN n END) AS probe_n,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'success_rate' AND memory IS NULL THEN value END), 3) AS success_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'success_rate' AND memory IS NULL THEN n END) AS success_rate_n,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' AND memory IS NULL THEN value END), 3) AS false_alarm_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' AND memory IS NULL THEN n END) AS false_alarm_n,
# MAGIC        round(max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' AND memory IS NULL THEN value END), 3) AS mr_single,
# MAGIC        max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' AND memory IS NULL THEN n END) AS mr_single_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' AND memory IS NULL THEN value END), 3) AS mr_style,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' AND memory IS NULL THEN n END) AS mr_style_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'memory' THEN value END), 3) AS tendcm_memory,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'memory' THEN n END) AS tendcm_memory_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'unknown' THEN value END), 3) AS tendcm_unknown,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'unknown' THEN n END) AS tendcm_unknown_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory IS NULL THEN value END), 3) AS tendcm_all,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory IS NULL THEN n END) AS tendcm_all_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('probe', 'detection', 'single', 'style', 'pair')
# MAGIC   AND kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL
# MAGIC GROUP BY model, answer_mode, source
# MAGIC ORDER BY model, answer_mode, source

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Every overall metric per model and setting (long form), with its n
# MAGIC SELECT model, answer_mode, source, setting, metric, round(value, 4) AS value, n, items
# MAGIC FROM eval_metrics
# MAGIC WHERE setting NOT LIKE 'hoax%'
# MAGIC   AND kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC ORDER BY model, answer_mode, source, setting, metric

# COMMAND ----------
# MAGIC %md
# MAGIC ## By kind of misinformation

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per kind: detection success rate, MR (single, style) and TendCM (pair; all and Memory questions)
# MAGIC SELECT model, answer_mode, source, kind,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'success_rate' AND memory IS NULL THEN value END), 3) AS success_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'success_rate' AND memory IS NULL THEN n END) AS success_rate_n,
# MAGIC        round(max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' AND memory IS NULL THEN value END), 3) AS mr_single,
# MAGIC        max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' AND memory IS NULL THEN n END) AS mr_single_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' AND memory IS NULL THEN value END), 3) AS mr_style,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' AND memory IS NULL THEN n END) AS mr_style_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory IS NULL THEN value END), 3) AS tendcm_all,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory IS NULL THEN n END) AS tendcm_all_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'memory' THEN value END), 3) AS tendcm_memory,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' AND memory = 'memory' THEN n END) AS tendcm_memory_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('detection', 'single', 'style', 'pair')
# MAGIC   AND kind IS NOT NULL AND kind <> 'correct' AND hop IS NULL AND style IS NULL AND topic IS NULL
# MAGIC GROUP BY model, answer_mode, source, kind
# MAGIC ORDER BY model, answer_mode, source, kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Detection per kind and Memory / Unknown questions (the paper's Table 3); kind correct: false alarms
# MAGIC SELECT model, answer_mode, source, kind, memory, metric, round(value, 3) AS value, n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting = 'detection'
# MAGIC   AND ((kind <> 'correct' AND metric = 'success_rate') OR (kind = 'correct' AND metric = 'false_alarm_rate'))
# MAGIC   AND hop IS NULL AND style IS NULL AND topic IS NULL
# MAGIC ORDER BY model, answer_mode, source, kind, memory NULLS FIRST

# COMMAND ----------
# MAGIC %sql
# MAGIC -- TendCM per kind, for Memory, Unknown and all questions (Figures 5 and 15)
# MAGIC SELECT model, answer_mode, source, kind, coalesce(memory, 'all') AS questions, round(value, 3) AS tendcm, n,
# MAGIC        items AS answers
# MAGIC FROM eval_metrics
# MAGIC WHERE setting = 'pair' AND metric = 'tendcm'
# MAGIC   AND kind IS NOT NULL AND hop IS NULL AND style IS NULL AND topic IS NULL
# MAGIC ORDER BY model, answer_mode, source, kind, questions

# COMMAND ----------
# MAGIC %md
# MAGIC ## By style

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per style: detection success / false alarms, MR with one text of that style, and how sure the model is of the true option
# MAGIC SELECT model, answer_mode, source, style,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN value END), 3) AS success_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN n END) AS success_rate_n,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' THEN value END), 3) AS false_alarm_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' THEN n END) AS false_alarm_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' THEN value END), 3) AS mr_style,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' THEN n END) AS mr_style_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memory_option_probability' THEN value END), 3) AS p_memory_option,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memory_option_probability' THEN n END) AS p_memory_option_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memory_option_probability_when_chosen' THEN value END), 3) AS p_memory_when_chosen,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memory_option_probability_when_chosen' THEN n END) AS p_memory_when_chosen_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('detection', 'style')
# MAGIC   AND style IS NOT NULL AND kind IS NULL AND hop IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC GROUP BY model, answer_mode, source, style
# MAGIC ORDER BY model, answer_mode, source, style

# COMMAND ----------
# MAGIC %sql
# MAGIC -- MR per style and kind (setting style)
# MAGIC SELECT model, answer_mode, source, style, kind, round(value, 3) AS mr, n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting = 'style' AND metric = 'memorization_ratio'
# MAGIC   AND style IS NOT NULL AND kind IS NOT NULL AND hop IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC ORDER BY model, answer_mode, source, style, kind

# COMMAND ----------
# MAGIC %md
# MAGIC ## By topic and by hop

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per topic: detection success rate, MR and TendCM, each with its n (tendcm_all: Memory and
# MAGIC -- Unknown questions pooled, as eval_metrics has no topic x memory breakdown)
# MAGIC SELECT model, answer_mode, source, topic,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN value END), 3) AS success_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN n END) AS success_rate_n,
# MAGIC        round(max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' THEN value END), 3) AS mr_single,
# MAGIC        max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' THEN n END) AS mr_single_n,
# MAGIC        round(max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' THEN value END), 3) AS mr_style,
# MAGIC        max(CASE WHEN setting = 'style' AND metric = 'memorization_ratio' THEN n END) AS mr_style_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' THEN value END), 3) AS tendcm_all,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' THEN n END) AS tendcm_all_n,
# MAGIC        round(max(CASE WHEN setting = 'probe' AND metric = 'accuracy' THEN value END), 3) AS probe_accuracy,
# MAGIC        max(CASE WHEN setting = 'probe' AND metric = 'accuracy' THEN n END) AS probe_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('probe', 'detection', 'single', 'style', 'pair')
# MAGIC   AND topic IS NOT NULL AND kind IS NULL AND hop IS NULL AND style IS NULL AND memory IS NULL
# MAGIC GROUP BY model, answer_mode, source, topic
# MAGIC ORDER BY model, answer_mode, source, topic

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per hop: detection success rate, MR and TendCM, each with its n (tendcm_all: Memory and
# MAGIC -- Unknown questions pooled; per hop on Memory questions: the kind x memory cell above)
# MAGIC SELECT model, answer_mode, source, hop,
# MAGIC        round(max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN value END), 3) AS success_rate,
# MAGIC        max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN n END) AS success_rate_n,
# MAGIC        round(max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' THEN value END), 3) AS mr_single,
# MAGIC        max(CASE WHEN setting = 'single' AND metric = 'memorization_ratio' THEN n END) AS mr_single_n,
# MAGIC        round(max(CASE WHEN setting = 'pair' AND metric = 'tendcm' THEN value END), 3) AS tendcm_all,
# MAGIC        max(CASE WHEN setting = 'pair' AND metric = 'tendcm' THEN n END) AS tendcm_all_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('detection', 'single', 'pair')
# MAGIC   AND hop IS NOT NULL AND kind IS NULL AND style IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC GROUP BY model, answer_mode, source, hop
# MAGIC ORDER BY model, answer_mode, source, hop

# COMMAND ----------
# MAGIC %md
# MAGIC ## Answers that could not be read, and position bias

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Unparsed, error and top-letter rates per model and setting
# MAGIC SELECT model, answer_mode, source, setting,
# MAGIC        round(max(CASE WHEN metric = 'unparsed_rate' THEN value END), 3) AS unparsed_rate,
# MAGIC        max(CASE WHEN metric = 'unparsed_rate' THEN n END) AS unparsed_n,
# MAGIC        round(max(CASE WHEN metric = 'error_rate' THEN value END), 3) AS error_rate,
# MAGIC        max(CASE WHEN metric = 'error_rate' THEN n END) AS error_n,
# MAGIC        round(max(CASE WHEN metric = 'top_letter_share' THEN value END), 3) AS top_letter_share,
# MAGIC        max(CASE WHEN metric = 'top_letter_share' THEN n END) AS top_letter_n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting NOT LIKE 'hoax%'
# MAGIC   AND kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC GROUP BY model, answer_mode, source, setting
# MAGIC ORDER BY model, answer_mode, source, setting

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Answer letters per model and setting (the latest answer per item; earlier prompts' answers left aside)
# MAGIC WITH latest AS (
# MAGIC   SELECT *, row_number() OVER (PARTITION BY model, answer_mode, setting, item_id
# MAGIC                                ORDER BY answered_at DESC, response_id) AS pick
# MAGIC   FROM eval_responses
# MAGIC   WHERE setting NOT LIKE 'hoax%'
# MAGIC )
# MAGIC SELECT model, answer_mode, setting,
# MAGIC        count(*) AS answers,
# MAGIC        count_if(error IS NOT NULL) AS errors,
# MAGIC        count_if(error IS NULL AND unparsed) AS unparsed,
# MAGIC        count_if(chosen_letter = 'A') AS A,
# MAGIC        count_if(chosen_letter = 'B') AS B,
# MAGIC        count_if(chosen_letter = 'C') AS C,
# MAGIC        count_if(chosen_letter = 'D') AS D,
# MAGIC        count_if(chosen_letter = 'E') AS E,
# MAGIC        round(try_divide(greatest(count_if(chosen_letter = 'A'), count_if(chosen_letter = 'B'),
# MAGIC                                  count_if(chosen_letter = 'C'), count_if(chosen_letter = 'D'),
# MAGIC                                  count_if(chosen_letter = 'E')),
# MAGIC                         count_if(chosen_letter IS NOT NULL)), 3) AS top_letter_share,
# MAGIC        round(try_divide(1.0, avg(size(letters)) FILTER (WHERE letters IS NOT NULL)), 3) AS uniform_share
# MAGIC FROM latest
# MAGIC WHERE pick = 1
# MAGIC GROUP BY model, answer_mode, setting
# MAGIC ORDER BY model, answer_mode, setting

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Roles chosen per model and setting (memory = the true answer; misinformation = the conflict's answer)
# MAGIC WITH latest AS (
# MAGIC   SELECT *, row_number() OVER (PARTITION BY model, answer_mode, setting, item_id
# MAGIC                                ORDER BY answered_at DESC, response_id) AS pick
# MAGIC   FROM eval_responses
# MAGIC   WHERE setting NOT LIKE 'hoax%'
# MAGIC )
# MAGIC SELECT model, answer_mode, setting, coalesce(chosen_role, '(unparsed or error)') AS chosen_role,
# MAGIC        count(*) AS answers,
# MAGIC        round(try_divide(count(*), sum(count(*)) OVER (PARTITION BY model, answer_mode, setting)), 3) AS share
# MAGIC FROM latest
# MAGIC WHERE pick = 1
# MAGIC GROUP BY model, answer_mode, setting, coalesce(chosen_role, '(unparsed or error)')
# MAGIC ORDER BY model, answer_mode, setting, answers DESC

# COMMAND ----------
# MAGIC %md
# MAGIC ## Plots

# COMMAND ----------
# Plot helpers: one bar per model (and answer mode / source where several), n written on each bar
import matplotlib.pyplot as plt
import pandas as pd

KINDS = ["factual", "temporal", "semantic"]


def with_series(frame):
    """A `series` column: the model, plus answer mode and source where they vary."""
    frame = frame.copy()
    label = frame["model"].astype(str)
    for column in ("answer_mode", "source"):
        if column in frame and frame[column].nunique() > 1:
            label = label + " / " + frame[column].astype(str)
    frame["series"] = label
    return frame


def grouped_bars(ax, frame, group_column, groups, title, ylabel, ylim=(0, 1)):
    """Bars of `value` per group and series; a null value (n = 0) is drawn as 'n=0' at the axis."""
    series = sorted(frame["series"].unique()) if not frame.empty else []
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        rows = frame[frame["series"] == name]
        for j, group in enumerate(groups):
            x = j + (i - (len(series) - 1) / 2) * width
            match = rows[rows[group_column] == group]
            value = match["value"].iloc[0] if len(match) else None
            n = int(match["n"].iloc[0]) if len(match) and pd.notna(match["n"].iloc[0]) else 0
            if value is None or pd.isna(value):
                ax.annotate("n=0", (x, 0), ha="center", va="bottom", fontsize=7)
                continue
            ax.bar(x, value, width, color=f"C{i}", label=name if j == 0 else None)
            ax.annotate(f"n={n}", (x, value), xytext=(0, 2 if value >= 0 else -10), textcoords="offset points",
                        ha="center", fontsize=7)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(*ylim)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if series:
        ax.legend(fontsize=7)


# COMMAND ----------
# Plot: success rate, MR and TendCM by kind, per model
by_kind = with_series(spark.sql("""
    SELECT model, answer_mode, source, setting, metric, kind, value, n FROM eval_metrics
    WHERE ((setting = 'detection' AND metric = 'success_rate')
        OR (setting = 'single' AND metric = 'memorization_ratio')
        OR (setting = 'pair' AND metric = 'tendcm'))
      AND kind IS NOT NULL AND hop IS NULL AND style IS NULL AND topic IS NULL
      AND ((setting <> 'pair' AND memory IS NULL) OR (setting = 'pair' AND memory = 'memory'))
""").toPandas())
if by_kind.empty:
    print("no per-kind metrics in eval_metrics: run misbench evaluate first")
else:
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    for ax, (setting, metric, title, ylabel, ylim) in zip(axes, [
            ("detection", "success_rate", "detection: success rate", "success rate", (0, 1.1)),
            ("single", "memorization_ratio", "single: memorization ratio (Memory questions)", "MR", (0, 1.1)),
            ("pair", "tendcm", "pair: TendCM on Memory questions (1 = follows the correct evidence)", "TendCM", (-1.1, 1.1))]):
        rows = by_kind[(by_kind["setting"] == setting) & (by_kind["metric"] == metric)]
        grouped_bars(ax, rows, "kind", KINDS, title, ylabel, ylim)
    show(fig)

# COMMAND ----------
# Plot: MR and detection success rate by style, per model
by_style = with_series(spark.sql("""
    SELECT model, answer_mode, source, setting, metric, style, value, n FROM eval_metrics
    WHERE ((setting = 'style' AND metric = 'memorization_ratio') OR (setting = 'detection' AND metric = 'success_rate'))
      AND style IS NOT NULL AND kind IS NULL AND hop IS NULL AND topic IS NULL AND memory IS NULL
""").toPandas())
if by_style.empty:
    print("no per-style metrics in eval_metrics: run misbench evaluate with the style and detection settings")
else:
    # the entries' style first, then the rewrites (generate.styles) by name, as misbench's figures
    styles = sorted(set(by_style["style"]), key=lambda style: (style != "wikipedia", style))
    fig, axes = plt.subplots(1, 2, figsize=(14, 3.8))
    grouped_bars(axes[0], by_style[by_style["setting"] == "style"], "style", styles,
                 "style: memorization ratio per style", "MR", (0, 1.1))
    grouped_bars(axes[1], by_style[by_style["setting"] == "detection"], "style", styles,
                 "detection: success rate per style", "success rate", (0, 1.1))
    show(fig)

# COMMAND ----------
# Plot: answer letter spread per model and setting (latest answer per item)
letters = spark.sql("""
    WITH latest AS (
      SELECT *, row_number() OVER (PARTITION BY model, answer_mode, setting, item_id
                                   ORDER BY answered_at DESC, response_id) AS pick
      FROM eval_responses WHERE setting NOT LIKE 'hoax%'
    )
    SELECT model, answer_mode, setting, coalesce(chosen_letter, '?') AS letter, count(*) AS answers
    FROM latest WHERE pick = 1 GROUP BY model, answer_mode, setting, coalesce(chosen_letter, '?')
""").toPandas()
if letters.empty:
    print("eval_responses is empty: run misbench evaluate first")
else:
    letters = with_series(letters)
    names = sorted(letters["series"].unique())
    fig, axes = plt.subplots(1, len(names), figsize=(6.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        table = letters[letters["series"] == name].pivot_table(
            index="setting", columns="letter", values="answers", aggfunc="sum", fill_value=0)
        shares = table.div(table.sum(axis=1), axis=0)
        bottom = pd.Series(0.0, index=shares.index)
        for letter in shares.columns:
            ax.bar(shares.index, shares[letter], bottom=bottom, label=letter)
            bottom = bottom + shares[letter]
        for x, total in enumerate(table.sum(axis=1)):
            ax.annotate(f"n={int(total)}", (x, 1), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("share of answers")
        ax.set_title(f"{name}: chosen letter (?: unparsed or error)", fontsize=10)
        ax.legend(fontsize=7, ncol=6, loc="lower right")
    show(fig)
