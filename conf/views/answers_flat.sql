-- One row per MisBench model answer and evidence text it was shown: the question, its
-- options and roles, the text with its quality verdict, and what the model chose.
WITH answers AS (
  SELECT r.*, shown.evidence_id, shown.position AS evidence_position
  FROM eval_responses r
  LATERAL VIEW OUTER posexplode(r.evidence_ids) shown AS position, evidence_id
  WHERE r.setting NOT LIKE 'hoax%'
)
SELECT
  a.model, a.backend, a.answer_mode, a.setting, q.source, a.question_id, a.item_id, a.claim_id,
  a.kind, a.hop, a.relation, a.topic, a.style,
  q.question,
  -- the question's options as this answer saw them (a later run of evaluate.runs deals its
  -- own letters); detection, +Desc and RtD answer two options of their own (option_roles)
  CASE WHEN a.setting IN ('probe', 'single', 'pair', 'style')
       THEN transform(a.roles, r -> element_at(map_from_arrays(q.roles, q.options), r)) END AS options,
  a.roles AS option_roles,
  CASE WHEN a.setting IN ('probe', 'single', 'pair', 'style')
       THEN element_at(map_from_arrays(q.roles, q.options), a.chosen_role) END AS chosen_option,
  q.memory_answer, q.misinformation_answer,
  a.evidence_position, a.evidence_id, t.kind AS evidence_kind, t.style AS evidence_style,
  t.text AS evidence_text,
  qc.passed AS evidence_passed_quality, qc.failed_filter AS evidence_failed_filter,
  qc.entailment_score AS evidence_entailment_score, qc.similarity_score AS evidence_similarity_score,
  a.chosen_letter, a.chosen_role, a.unparsed, a.error, a.raw_answer,
  a.chosen_role = 'memory' AS chose_memory, a.chosen_role = 'misinformation' AS chose_misinformation,
  a.mlflow_run_id, a.answered_at
FROM answers a
LEFT JOIN questions q ON q.question_id = a.question_id
LEFT JOIN bench_texts t ON t.evidence_id = a.evidence_id AND t.source = q.source
LEFT JOIN evidence_qc qc ON qc.evidence_id = a.evidence_id
