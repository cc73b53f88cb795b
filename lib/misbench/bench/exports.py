"""The benchmark in the formats other tools read.

- ``hf``: a Hugging Face ``datasets`` folder: ``data/test.parquet`` (one row per question,
  the options, the answer letter per role and the texts by kind and style) and a ``README.md``
  dataset card whose YAML header names the data files.
- ``lm-eval``: an lm-evaluation-harness task per setting (``probe``: no evidence;
  ``single``: one misinformation entry): the rendered user prompt as ``text``, the letters as
  choices, the memory answer's letter as target, the data as parquet named in
  ``dataset_kwargs.data_files``, and a group that runs both.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.bench.stage import LETTERS
from misbench.claims.stage import CONFLICT_KINDS
from misbench.styles import ENTRY_STYLE, style_order

LM_EVAL_SETTINGS = ("probe", "single")


def hf_rows(questions: DataFrame, texts: DataFrame, styles: Sequence[str] = ()) -> pd.DataFrame:
    """One row per question: the question, options, letters, and its texts by kind and style:
    a column for the entries and each of ``styles`` (``generate.styles``; null where no text
    passed) and for any other style the texts have."""
    rows = texts.select("evidence_id", "style", "text").collect()
    by_id = {r["evidence_id"]: r["text"] for r in rows}
    frame = questions.toPandas()
    out = pd.DataFrame({
        "question_id": frame["question_id"], "source": frame["source"], "claim_id": frame["claim_id"],
        "kinds": frame["kinds"].map(list), "hop": frame["hop"], "relation": frame["relation"],
        "topic": frame["topic"], "question": frame["question"], "options": frame["options"].map(list),
        "roles": frame["roles"].map(list),
        "answer": frame["letters"].map(lambda letters: dict(letters)["memory"]),
        "misinformation_answer_letter": frame["letters"].map(lambda letters: dict(letters)["misinformation"]),
        "pair_misinformation_first": frame["pair_misinformation_first"],
    })
    styles = style_order({ENTRY_STYLE, *styles, *(r["style"] for r in rows)}, styles)
    for kind in CONFLICT_KINDS:
        for style in styles:
            out[f"misinformation_{kind}_{style}"] = frame["misinformation_texts"].map(
                lambda m, kind=kind, style=style: by_id.get(dict(dict(m or {}).get(kind) or {}).get(style)))
    for style in styles:
        out[f"correct_{style}"] = frame["correct_texts"].map(lambda m, style=style: by_id.get(dict(m or {}).get(style)))
    return out


def dataset_card(rows: pd.DataFrame, name: str) -> str:
    kinds = {kind: int(rows["kinds"].map(lambda ks, kind=kind: kind in ks).sum()) for kind in CONFLICT_KINDS}
    return f"""---
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test.parquet
license: cc0-1.0
task_categories:
- multiple-choice
language:
- en
pretty_name: {name}
---
# {name}

Misinformation benchmark built by misbench from Wikidata (facts under CC0). {len(rows)} questions,
one per claim (with misinformation texts of kind {", ".join(f"{k}: {v}" for k, v in kinds.items())}).

Each row is one question about one fact. `options` are five answers in display order (letters
{", ".join(LETTERS)}); `roles` says what each is: `memory` (the true answer), `misinformation`
(the false answer that every misinformation text of the question claims), `irrelevant` (a
false answer of the same type), `unsure`, `not_in_options`. `answer` is the true answer's
letter. `misinformation_<kind>_<style>` hold the misinformation texts (kinds factual, temporal,
semantic; the styles the run generated, the paper's six by default; null where no text passed quality control, and temporal only where the
fact can change over time) and `correct_<style>` the correct ones; the single-text setting
uses `misinformation_<kind>_wikipedia`, the two-text setting that and `correct_wikipedia`,
the first of them as `pair_misinformation_first` says.

Metrics (MisBench, Appendix F.1): memorization ratio Rc / (Rc + Rm) on questions the model
answers right without evidence; evidence tendency TendCM = (Rc - Rm) / (Rc + Rm).
"""


def export_hf(questions: DataFrame, texts: DataFrame, out: Path, name: str = "misbench",
              styles: Sequence[str] = ()) -> int:
    rows = hf_rows(questions, texts, styles)
    (out / "data").mkdir(parents=True, exist_ok=True)
    rows.to_parquet(out / "data" / "test.parquet", index=False)
    (out / "README.md").write_text(dataset_card(rows, name), encoding="utf-8")
    return len(rows)


def lm_eval_rows(items: DataFrame) -> pd.DataFrame:
    """Items of one setting as lm-eval documents: system and user text, letters, target."""
    frame = items.select("item_id", "question_id", "kind", "messages", "roles").toPandas()
    messages = frame["messages"].map(json.loads)
    return pd.DataFrame({
        "item_id": frame["item_id"], "question_id": frame["question_id"], "kind": frame["kind"],
        "system": messages.map(lambda m: next((x["content"] for x in m if x["role"] == "system"), "")),
        "text": messages.map(lambda m: next(x["content"] for x in m if x["role"] == "user")),
        "label": frame["roles"].map(lambda roles: list(roles).index("memory")),
    })


def task_yaml(task: str, data_file: Path) -> str:
    return f"""# lm-evaluation-harness task written by `misbench export --format lm-eval`.
# Run: lm_eval --model hf --model_args pretrained=MODEL --include_path {data_file.parent} \\
#        --tasks {task} --apply_chat_template --system_instruction "$(cat {task}.system.txt)"
task: {task}
dataset_path: parquet
dataset_kwargs:
  data_files:
    test: {data_file}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{text}}}}"
doc_to_choice: {json.dumps(list(LETTERS))}
doc_to_target: label
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def export_lm_eval(items: DataFrame, out: Path, prefix: str = "misbench") -> list[str]:
    """One task per setting in ``LM_EVAL_SETTINGS`` and a group ``<prefix>`` of them."""
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    for setting in LM_EVAL_SETTINGS:
        rows = lm_eval_rows(items.where(F.col("setting") == setting))
        if rows.empty:
            continue
        task = f"{prefix}_{setting}"
        data_file = (out / f"{task}.parquet").resolve()
        rows.to_parquet(data_file, index=False)
        # lm-eval takes one system prompt per run (--system_instruction): the setting's own.
        (out / f"{task}.system.txt").write_text(rows["system"].iloc[0], encoding="utf-8")
        (out / f"{task}.yaml").write_text(task_yaml(task, data_file), encoding="utf-8")
        tasks.append(task)
    (out / f"{prefix}.yaml").write_text(
        f"group: {prefix}\ntask:\n" + "".join(f"  - {t}\n" for t in tasks)
        + "aggregate_metric_list:\n  - metric: acc\n    aggregation: mean\n    weight_by_size: true\n",
        encoding="utf-8")
    return tasks
