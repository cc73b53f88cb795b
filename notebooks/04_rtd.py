# Databricks notebook source
# MAGIC %md
# MAGIC # RtD: does outside knowledge help detect misinformation?
# MAGIC Three detection settings over the encyclopedia entries (style `wikipedia`), misinformation and correct:
# MAGIC
# MAGIC * `detection`: "is this passage misinformation?", the passage alone;
# MAGIC * `desc` (+Desc): the same with the description of the passage's key entity;
# MAGIC * `rtd` (RtD): the passage and evidence the model rebuilt from that description, shown as "Text 1" and
# MAGIC   "Text 2" in a seeded order; the model names the one more likely misinformation (the paper's last step;
# MAGIC   `evaluate.rtd.last_step: judge` asks the yes/no question against that evidence instead).
# MAGIC
# MAGIC All filled by `misbench evaluate` (settings `detection desc rtd`): `eval_metrics` (`success_rate` on
# MAGIC misinformation passages, `false_alarm_rate` on correct ones, each with its n; `without_description` and
# MAGIC `left_out_failed_step`: shares of the passages tried that had no description or lost a step),
# MAGIC `eval_responses` (one answer per passage), `rtd_entities` (the key entity each model named, the entity it
# MAGIC was resolved to in `entities`, its description) and `rtd_steps` (the generations).
# MAGIC
# MAGIC `detection` covers every style while +Desc and RtD read only the encyclopedia entries, so the gains below
# MAGIC compare against `detection` on the encyclopedia entries (`style = 'wikipedia'`). A model that calls every
# MAGIC passage misinformation scores a success rate of 1 with a false-alarm rate of 1: read the two together.
# MAGIC RtD's comparison is a forced choice between two texts: a model that always answers "A" names the passage
# MAGIC half the time (success and false-alarm rates near 0.5), so its gain over yes/no detection is not like for like.

# COMMAND ----------
# MAGIC %run ./00_setup

# COMMAND ----------
# MAGIC %md
# MAGIC ## Detection, +Desc and RtD per model

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model: success and false-alarm rates of the three settings on the encyclopedia entries, and the gains
# MAGIC WITH m AS (
# MAGIC   SELECT model, answer_mode, source,
# MAGIC          max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN value END) AS detection_sr,
# MAGIC          max(CASE WHEN setting = 'detection' AND metric = 'success_rate' THEN n END) AS detection_sr_n,
# MAGIC          max(CASE WHEN setting = 'desc' AND metric = 'success_rate' THEN value END) AS desc_sr,
# MAGIC          max(CASE WHEN setting = 'desc' AND metric = 'success_rate' THEN n END) AS desc_sr_n,
# MAGIC          max(CASE WHEN setting = 'rtd' AND metric = 'success_rate' THEN value END) AS rtd_sr,
# MAGIC          max(CASE WHEN setting = 'rtd' AND metric = 'success_rate' THEN n END) AS rtd_sr_n,
# MAGIC          max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' THEN value END) AS detection_far,
# MAGIC          max(CASE WHEN setting = 'detection' AND metric = 'false_alarm_rate' THEN n END) AS detection_far_n,
# MAGIC          max(CASE WHEN setting = 'desc' AND metric = 'false_alarm_rate' THEN value END) AS desc_far,
# MAGIC          max(CASE WHEN setting = 'desc' AND metric = 'false_alarm_rate' THEN n END) AS desc_far_n,
# MAGIC          max(CASE WHEN setting = 'rtd' AND metric = 'false_alarm_rate' THEN value END) AS rtd_far,
# MAGIC          max(CASE WHEN setting = 'rtd' AND metric = 'false_alarm_rate' THEN n END) AS rtd_far_n
# MAGIC   FROM eval_metrics
# MAGIC   WHERE setting IN ('detection', 'desc', 'rtd') AND metric IN ('success_rate', 'false_alarm_rate')
# MAGIC     AND style = 'wikipedia' AND kind IS NULL AND hop IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC   GROUP BY model, answer_mode, source
# MAGIC )
# MAGIC SELECT model, answer_mode, source,
# MAGIC        round(detection_sr, 3) AS detection_success, detection_sr_n,
# MAGIC        round(desc_sr, 3) AS desc_success, desc_sr_n,
# MAGIC        round(rtd_sr, 3) AS rtd_success, rtd_sr_n,
# MAGIC        round(desc_sr - detection_sr, 3) AS desc_gain,
# MAGIC        round(rtd_sr - detection_sr, 3) AS rtd_gain,
# MAGIC        round(detection_far, 3) AS detection_false_alarms, detection_far_n,
# MAGIC        round(desc_far, 3) AS desc_false_alarms, desc_far_n,
# MAGIC        round(rtd_far, 3) AS rtd_false_alarms, rtd_far_n
# MAGIC FROM m
# MAGIC ORDER BY model, answer_mode, source

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model and kind: success rate of each setting on the encyclopedia entries (kind correct: false alarms)
# MAGIC WITH m AS (
# MAGIC   SELECT model, answer_mode, source, kind,
# MAGIC          CASE WHEN kind = 'correct' THEN 'false_alarm_rate' ELSE 'success_rate' END AS measure,
# MAGIC          max(CASE WHEN setting = 'detection' THEN value END) AS detection,
# MAGIC          max(CASE WHEN setting = 'detection' THEN n END) AS detection_n,
# MAGIC          max(CASE WHEN setting = 'desc' THEN value END) AS desc_value,
# MAGIC          max(CASE WHEN setting = 'desc' THEN n END) AS desc_n,
# MAGIC          max(CASE WHEN setting = 'rtd' THEN value END) AS rtd,
# MAGIC          max(CASE WHEN setting = 'rtd' THEN n END) AS rtd_n
# MAGIC   FROM eval_metrics
# MAGIC   WHERE setting IN ('detection', 'desc', 'rtd')
# MAGIC     AND ((kind <> 'correct' AND metric = 'success_rate') OR (kind = 'correct' AND metric = 'false_alarm_rate'))
# MAGIC     AND style = 'wikipedia' AND hop IS NULL AND topic IS NULL AND memory IS NULL
# MAGIC   GROUP BY model, answer_mode, source, kind
# MAGIC )
# MAGIC SELECT model, answer_mode, source, kind, measure,
# MAGIC        round(detection, 3) AS detection, detection_n,
# MAGIC        round(desc_value, 3) AS `desc`, desc_n,
# MAGIC        round(rtd, 3) AS rtd, rtd_n,
# MAGIC        round(desc_value - detection, 3) AS desc_gain,
# MAGIC        round(rtd - detection, 3) AS rtd_gain
# MAGIC FROM m
# MAGIC ORDER BY model, answer_mode, source, kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model, Memory / Unknown questions: the three settings (all styles the setting read)
# MAGIC SELECT model, answer_mode, source, memory, setting, metric, round(value, 3) AS value, n
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('detection', 'desc', 'rtd') AND metric IN ('success_rate', 'false_alarm_rate')
# MAGIC   AND memory IS NOT NULL AND kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL
# MAGIC ORDER BY model, answer_mode, source, memory, metric, setting

# COMMAND ----------
# MAGIC %sql
# MAGIC -- What the RtD steps could not give: passages without a description, passages left out because a step failed
# MAGIC SELECT model, answer_mode, source, setting, metric, round(value, 3) AS share, n AS passages_tried,
# MAGIC        CAST(round(value * n) AS BIGINT) AS passages
# MAGIC FROM eval_metrics
# MAGIC WHERE setting IN ('desc', 'rtd') AND metric IN ('without_description', 'left_out_failed_step')
# MAGIC ORDER BY model, answer_mode, source, setting, metric

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Passage by passage: misinformation entries flagged without and with RtD (latest answer per setting)
# MAGIC WITH latest AS (
# MAGIC   SELECT model, answer_mode, setting, kind, try_element_at(evidence_ids, 1) AS passage_id,
# MAGIC          max_by(chosen_role, answered_at) AS chosen_role
# MAGIC   FROM eval_responses
# MAGIC   WHERE setting IN ('detection', 'desc', 'rtd') AND style = 'wikipedia' AND error IS NULL
# MAGIC   GROUP BY model, answer_mode, setting, kind, try_element_at(evidence_ids, 1)
# MAGIC ), per_passage AS (
# MAGIC   SELECT model, answer_mode, kind, passage_id,
# MAGIC          max(CASE WHEN setting = 'detection' THEN chosen_role END) AS detection,
# MAGIC          max(CASE WHEN setting = 'desc' THEN chosen_role END) AS desc_role,
# MAGIC          max(CASE WHEN setting = 'rtd' THEN chosen_role END) AS rtd
# MAGIC   FROM latest
# MAGIC   GROUP BY model, answer_mode, kind, passage_id
# MAGIC )
# MAGIC SELECT model, answer_mode,
# MAGIC        CASE WHEN kind = 'correct' THEN 'correct' ELSE 'misinformation' END AS passage,
# MAGIC        count(*) AS passages,
# MAGIC        count_if(detection = 'misinformation') AS flagged_by_detection,
# MAGIC        count_if(desc_role = 'misinformation') AS flagged_with_desc,
# MAGIC        count_if(rtd = 'misinformation') AS flagged_with_rtd,
# MAGIC        count_if(detection <> 'misinformation' AND rtd = 'misinformation') AS newly_flagged_by_rtd,
# MAGIC        count_if(detection = 'misinformation' AND rtd <> 'misinformation') AS no_longer_flagged_by_rtd,
# MAGIC        count_if(rtd IS NULL) AS no_rtd_answer
# MAGIC FROM per_passage
# MAGIC GROUP BY model, answer_mode, CASE WHEN kind = 'correct' THEN 'correct' ELSE 'misinformation' END
# MAGIC ORDER BY model, answer_mode, passage

# COMMAND ----------
# MAGIC %md
# MAGIC ## The key entities (`rtd_entities`)

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model: passages, key entity resolved, with a description, and the claim's subject
# MAGIC SELECT model,
# MAGIC        count(*) AS passages,
# MAGIC        count(extracted) AS named,
# MAGIC        count(entity_id) AS resolved,
# MAGIC        count(description) AS with_description,
# MAGIC        count_if(subject_match) AS is_claim_subject,
# MAGIC        round(try_divide(count(entity_id), count(*)), 3) AS resolved_rate,
# MAGIC        round(try_divide(count_if(subject_match), count(entity_id)), 3) AS subject_match_rate,
# MAGIC        count(DISTINCT entity_id) AS distinct_entities
# MAGIC FROM rtd_entities
# MAGIC GROUP BY model
# MAGIC ORDER BY model

# COMMAND ----------
# MAGIC %sql
# MAGIC -- Per model and kind of passage (from bench_texts): did the model name the claim's subject?
# MAGIC SELECT r.model, coalesce(t.kind, '(text not in bench_texts)') AS kind,
# MAGIC        count(*) AS passages,
# MAGIC        count(r.entity_id) AS resolved,
# MAGIC        count(r.description) AS with_description,
# MAGIC        count_if(r.subject_match) AS is_claim_subject,
# MAGIC        round(try_divide(count_if(r.subject_match), count(*)), 3) AS subject_match_rate
# MAGIC FROM rtd_entities r
# MAGIC LEFT JOIN (SELECT evidence_id, max(kind) AS kind FROM bench_texts GROUP BY evidence_id) t
# MAGIC   ON t.evidence_id = r.passage_id
# MAGIC GROUP BY r.model, coalesce(t.kind, '(text not in bench_texts)')
# MAGIC ORDER BY r.model, kind

# COMMAND ----------
# MAGIC %sql
# MAGIC -- The entities named most often
# MAGIC SELECT model, coalesce(entity, '(not resolved)') AS entity, entity_id,
# MAGIC        count(*) AS passages,
# MAGIC        count_if(subject_match) AS as_claim_subject,
# MAGIC        collect_set(extracted) AS names_used,
# MAGIC        any_value(left(description, 100)) AS description
# MAGIC FROM rtd_entities
# MAGIC GROUP BY model, coalesce(entity, '(not resolved)'), entity_id
# MAGIC ORDER BY passages DESC, model
# MAGIC LIMIT 30

# COMMAND ----------
# MAGIC %sql
# MAGIC -- A look at the rows: the claim's subject beside the entity the model named
# MAGIC SELECT r.model, r.claim_id, c.subject_label AS claim_subject, r.extracted, r.entity, r.entity_id,
# MAGIC        r.subject_match, left(r.description, 120) AS description, r.passage_id
# MAGIC FROM rtd_entities r
# MAGIC LEFT JOIN claims c ON c.claim_id = r.claim_id
# MAGIC ORDER BY r.subject_match, r.model, r.claim_id
# MAGIC LIMIT 50

# COMMAND ----------
# MAGIC %sql
# MAGIC -- The RtD generations (rtd_steps): per step and model, texts, failures and cost
# MAGIC SELECT style AS step, model, kind,
# MAGIC        count(*) AS generations,
# MAGIC        count_if(error IS NOT NULL) AS failed,
# MAGIC        count_if(finish_reason = 'length') AS cut_at_max_tokens,
# MAGIC        round(avg(tokens_out), 1) AS mean_tokens_out,
# MAGIC        round(avg(latency_s), 2) AS mean_latency_s
# MAGIC FROM rtd_steps
# MAGIC GROUP BY style, model, kind
# MAGIC ORDER BY step, model, kind

# COMMAND ----------
# Plot: success rate (misinformation entries) and false-alarm rate (correct entries) of detection, +Desc and RtD
import matplotlib.pyplot as plt
import pandas as pd

SETTINGS = ["detection", "desc", "rtd"]
KINDS = ["factual", "temporal", "semantic", "correct"]
rtd = spark.sql("""
    SELECT model, answer_mode, source, setting, kind, value, n FROM eval_metrics
    WHERE setting IN ('detection', 'desc', 'rtd')
      AND ((kind <> 'correct' AND metric = 'success_rate') OR (kind = 'correct' AND metric = 'false_alarm_rate'))
      AND style = 'wikipedia' AND hop IS NULL AND topic IS NULL AND memory IS NULL
""").toPandas()
if rtd.empty:
    print("no detection / desc / rtd metrics in eval_metrics: run misbench evaluate --settings detection desc rtd")
else:
    rtd["series"] = rtd["model"] + " / " + rtd["answer_mode"] + " / " + rtd["source"]
    names = sorted(rtd["series"].unique())
    kinds = [k for k in KINDS if k in set(rtd["kind"])]
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 3.6 * len(names)), squeeze=False)
    width = 0.8 / len(SETTINGS)
    for ax, name in zip(axes[:, 0], names):
        rows = rtd[rtd["series"] == name]
        for i, setting in enumerate(SETTINGS):
            for j, kind in enumerate(kinds):
                x = j + (i - 1) * width
                match = rows[(rows["setting"] == setting) & (rows["kind"] == kind)]
                value = match["value"].iloc[0] if len(match) else None
                n = int(match["n"].iloc[0]) if len(match) else 0
                if value is None or pd.isna(value):
                    ax.annotate("n=0", (x, 0), ha="center", va="bottom", fontsize=7)
                    continue
                ax.bar(x, value, width, color=f"C{i}", label=setting if j == 0 else None)
                ax.annotate(f"n={n}", (x, value), xytext=(0, 2), textcoords="offset points", ha="center",
                            fontsize=7)
        ax.set_xticks(range(len(kinds)), [f"{k}\n(false alarms)" if k == "correct" else k for k in kinds])
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("share flagged as misinformation")
        ax.set_title(f"{name}: encyclopedia entries flagged, per setting", fontsize=10)
        ax.legend(fontsize=7, ncol=3)
    show(fig)
