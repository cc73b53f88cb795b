-- One row per MultiHoax model answer: the question, its false premise and labels, the chosen
-- option, and for justifications the judge's verdict and the similarity to the explanation.
SELECT
  r.model, r.backend, r.answer_mode, r.setting AS task, q.source, r.question_id,
  q.question, q.options, q.option_roles, q.idk_letter, q.near_miss, q.explanation,
  q.premise_subject_label, q.premise_property, q.premise_object_label,
  q.reasoning_type, q.false_premise_type, q.answer_type, q.category, q.country,
  r.chosen_letter, r.chosen_role, r.chosen_role = 'idk' AS chose_i_do_not_know,
  r.unparsed, r.error, r.raw_answer,
  j.justification, j.judge_model, j.judge_yes_probability, j.names_premise, j.similarity,
  r.mlflow_run_id, r.answered_at
FROM eval_responses r
JOIN hoax_questions q ON q.question_id = r.question_id
LEFT JOIN hoax_judgements j ON j.response_id = r.response_id
WHERE r.setting LIKE 'hoax%'
