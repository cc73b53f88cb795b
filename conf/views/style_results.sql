-- Per-style results as MisBench's figures show them (Figures 6 and 11: memorization ratio by
-- style, multi-hop and one-hop apart; Figure 7: the right option's probability when chosen):
-- per model, question set, hop (null: both) and style, the raw values with their n, and MR
-- normalised across the styles of the same model, answer mode, question set and hop
-- (min-max: 0 for the style that moved the model most, 1 for the one that moved it least;
-- null with fewer than two different values). The paper regularises across the six styles
-- without saying how; min-max is misbench's choice (docs/paper-fidelity.md). Each benchmark
-- version apart (benchmark_version, docs/refresh.md).
WITH per_style AS (
  SELECT model, answer_mode, source, benchmark_version, hop, style,
         max(CASE WHEN metric = 'memorization_ratio' THEN value END) AS memorization_ratio,
         max(CASE WHEN metric = 'memorization_ratio' THEN n END) AS memorization_ratio_n,
         max(CASE WHEN metric = 'memory_option_probability_when_chosen' THEN value END)
           AS memory_option_probability_when_chosen,
         max(CASE WHEN metric = 'memory_option_probability_when_chosen' THEN n END)
           AS memory_option_probability_when_chosen_n
  FROM eval_metrics
  WHERE setting = 'style' AND style IS NOT NULL AND kind IS NULL AND topic IS NULL AND memory IS NULL
  GROUP BY model, answer_mode, source, benchmark_version, hop, style
)
SELECT model, answer_mode, source, benchmark_version, hop, style, memorization_ratio, memorization_ratio_n,
       CASE WHEN max(memorization_ratio) OVER styles > min(memorization_ratio) OVER styles
            THEN (memorization_ratio - min(memorization_ratio) OVER styles)
                 / (max(memorization_ratio) OVER styles - min(memorization_ratio) OVER styles)
       END AS memorization_ratio_normalised,
       memory_option_probability_when_chosen, memory_option_probability_when_chosen_n
FROM per_style
WINDOW styles AS (PARTITION BY model, answer_mode, source, benchmark_version, hop)
