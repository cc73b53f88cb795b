-- The headline number of each setting per model and question set, overall (no breakdown),
-- with its n: probe accuracy, detection / desc / rtd success rate, single and style
-- memorization ratio, pair TendCM with prior knowledge, MultiHoax accuracy per task. With
-- several runs (evaluate.runs) value is their mean, value_spread its standard deviation and n
-- counts the answers of every run. benchmark_version: the dump version of the questions
-- (docs/refresh.md; null for MultiHoax).
SELECT model, answer_mode, source, benchmark_version, setting, metric, value, value_spread, runs, n,
       mlflow_run_id, computed_at
FROM eval_metrics
WHERE kind IS NULL AND hop IS NULL AND style IS NULL AND topic IS NULL
  AND country IS NULL AND category IS NULL AND reasoning_type IS NULL
  AND answer_type IS NULL AND false_premise_type IS NULL
  AND (
    (setting = 'probe' AND metric = 'accuracy' AND memory IS NULL)
    OR (setting IN ('detection', 'desc', 'rtd') AND metric = 'success_rate' AND memory IS NULL)
    OR (setting IN ('single', 'style') AND metric = 'memorization_ratio' AND memory IS NULL)
    OR (setting = 'pair' AND metric = 'tendcm' AND memory = 'memory')
    OR (setting LIKE 'hoax%' AND metric = 'accuracy' AND memory IS NULL)
  )
