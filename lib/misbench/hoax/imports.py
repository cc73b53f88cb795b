"""MultiHoax release files -> hoax_questions rows and rejects (pure Python; the job reads files).

The release lists, per question: the question, four options (one "I do not know"), an
explanation of the false premise and the labels (country, category, false premise type,
answer type, reasoning type). Column names are matched loosely ("False Premise Type",
``false_premise_type`` and ``fp_type`` are the same field); options come as a list or as
``option_a`` .. ``option_d`` (or ``A`` .. ``D``). JSON (an array), JSON lines and CSV are read.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Iterable, Iterator

from misbench.hoax.spec import ANSWER_TYPES, CATEGORIES, FALSE_PREMISE_TYPES, REASONING_TYPES
from misbench.hoax.stage import IDK, LETTERS, options_problems
from misbench.ids import digest

ALIASES = {
    "question": ("question", "mhfpq", "text"),
    "options": ("options", "choices", "answers"),
    "explanation": ("explanation", "description", "false_premise_explanation", "justification"),
    "country": ("country",),
    "category": ("category", "knowledge_category", "domain"),
    "false_premise_type": ("false_premise_type", "fp_type", "false_premise", "type_of_false_premise", "fpq_type"),
    "answer_type": ("answer_type",),
    "reasoning_type": ("reasoning_type", "mhq_type", "multi_hop_type", "question_type", "reasoning"),
}
REQUIRED = ("question", "options", "explanation")
# Each label's vocabulary (ours, the paper's) and the other spellings a release may use.
VOCABULARIES = {
    "reasoning_type": (REASONING_TYPES, {"named entity": "bridge entity", "bridge": "bridge entity",
                                         "named entity reasoning": "bridge entity", "geography": "geographical",
                                         "time": "temporal"}),
    "false_premise_type": (FALSE_PREMISE_TYPES, {}),
    "answer_type": (ANSWER_TYPES, {"common nouns": "common noun", "noun": "common noun", "place": "location"}),
    "category": (CATEGORIES, {"science and technology": "science & technology",
                              "arts and literature": "arts & literature", "holidays and leisure": "holidays & leisure",
                              "art & literature": "arts & literature", "art and literature": "arts & literature"}),
}


def vocabulary_label(field: str, value) -> tuple[str | None, str | None]:
    """(the label in our vocabulary, or None when absent; why it is unknown, or None)."""
    if value in (None, ""):
        return None, None
    text = " ".join(str(value).strip().lower().replace("-", " ").split())
    text = re.sub(r"\s+(reasoning|type)$", "", text) if field == "reasoning_type" and text not in VOCABULARIES[field][0] \
        else text
    allowed, synonyms = VOCABULARIES[field]
    text = synonyms.get(text, text)
    return (text, None) if text in allowed else (None, f"unknown {field.replace('_', ' ')} '{value}'")


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")


def records(path: Path) -> Iterator[tuple[int, dict | None, str | None]]:
    """(line or record number, record, why it could not be read) per record of one file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        for number, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=2):
            yield number, dict(row), None
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield 1, None, f"not JSON: {exc.msg}"
            return
        for number, record in enumerate(data, start=1):
            yield number, record if isinstance(record, dict) else None, None if isinstance(record, dict) else "not an object"
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, None, f"not JSON: {exc.msg}"
            continue
        yield number, record if isinstance(record, dict) else None, None if isinstance(record, dict) else "not an object"


def normalised(record: dict) -> dict:
    """The record's fields under our names; options as a list."""
    by_key = {_key(k): v for k, v in record.items()}
    out = {}
    for field, names in ALIASES.items():
        out[field] = next((by_key[n] for n in names if by_key.get(n) not in (None, "")), None)
    if out["options"] is None:
        lettered = [by_key.get(f"option_{x.lower()}", by_key.get(x.lower())) for x in LETTERS]
        if any(o not in (None, "") for o in lettered):
            out["options"] = [o for o in lettered if o not in (None, "")]
    if isinstance(out["options"], str):
        try:
            parsed = json.loads(out["options"])
            out["options"] = parsed if isinstance(parsed, list) else [out["options"]]
        except json.JSONDecodeError:
            out["options"] = [o.strip() for o in out["options"].split("|")]
    return out


def as_rows(files: Iterable[tuple[str, Iterable[tuple[int, dict | None, str | None]]]], source: str) -> tuple[list[dict], list[dict]]:
    """(question rows, reject rows) for the records of the named files."""
    rows, rejects, seen = [], [], set()

    def reject(file: str, line: int, reason: str, raw: object = None) -> None:
        rejects.append({"source": source, "file": file, "line": line, "reason": reason,
                        "record": None if raw is None else json.dumps(raw, ensure_ascii=False)[:2000]})

    for file, items in files:
        for line, record, problem in items:
            if problem:
                reject(file, line, problem)
                continue
            fields = normalised(record)
            missing = [f for f in REQUIRED if not fields[f]]
            if missing:
                reject(file, line, f"missing {', '.join(missing)}", record)
                continue
            options = [str(o).strip() for o in fields["options"]]
            idk = [i for i, o in enumerate(options) if o.casefold().rstrip(".") == IDK.casefold()]
            if len(idk) != 1:
                reject(file, line, "no single 'I do not know' option", record)
                continue
            options[idk[0]] = IDK
            problems = options_problems(options, idk[0])
            if problems:
                reject(file, line, "; ".join(problems), record)
                continue
            question = " ".join(str(fields["question"]).split())
            if question.casefold() in seen:
                reject(file, line, "repeated question", record)
                continue
            labels, unknown = {}, []
            for field in VOCABULARIES:
                labels[field], problem = vocabulary_label(field, fields[field])
                if problem:
                    unknown.append(problem)
            if unknown:
                reject(file, line, "; ".join(unknown), record)
                continue
            seen.add(question.casefold())
            rows.append({
                "question_id": digest(f"{source}|{question}", 16),
                "source": source, "pattern": "imported", "question": question, "template_question": None,
                "options": options, "option_roles": ["idk" if i == idk[0] else "distractor" for i in range(4)],
                "idk_index": idk[0], "idk_letter": LETTERS[idk[0]],
                "explanation": str(fields["explanation"]).strip(),
                **labels,
                "country": None if fields["country"] in (None, "") else str(fields["country"]).strip(),
            })
    return rows, rejects
