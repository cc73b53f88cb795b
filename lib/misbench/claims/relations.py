"""Relation templates from conf/relations.yaml and conf/multihop.yaml, validated at start.

A statement template needs both slots, ``<S>`` and ``<O>``; a question template needs
``<S>`` and must not reveal its answer ``<O>``. Errors name the relation and the file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from misbench.config import ConfigError, conf_dir, load_yaml

_PROPERTY = re.compile(r"^P[1-9][0-9]*$")
MULTIHOP_KINDS = ("compositional", "inference")
BIRTH, DEATH = "P569", "P570"  # date of birth, date of death
DATE_PROPERTIES = (BIRTH, DEATH)  # second hops whose value is a date


@dataclass(frozen=True)
class Relation:
    relation: str
    statement: str
    question: str
    answer_type: str
    topic: str
    changes_over_time: bool = False  # may get a temporal conflict
    multi_valued: bool = False  # usually several values, even where Wikidata lists one


@dataclass(frozen=True)
class RelationPair:
    first: str
    second: str
    kind: str
    statement: str
    question: str
    answer_type: str
    topic: str
    changes_over_time: bool = False
    multi_valued: bool = False

    @property
    def relation(self) -> str:
        return f"{self.first}/{self.second}"

    @property
    def literal_answer(self) -> bool:
        return self.second in DATE_PROPERTIES


def _check_entry(where: str, spec: dict, topics: list[str]) -> None:
    """Templates, topic and answer type of one relation or pair."""
    statement, question = spec.get("statement"), spec.get("question")
    if not isinstance(statement, str) or not statement.strip():
        raise ConfigError(f"{where}: no statement template")
    if not isinstance(question, str) or not question.strip():
        raise ConfigError(f"{where}: no question template")
    missing = [slot for slot in ("<S>", "<O>") if slot not in statement]
    if missing:
        raise ConfigError(f"{where}: statement template lacks {' and '.join(missing)}")
    if "<S>" not in question:
        raise ConfigError(f"{where}: question template lacks <S>")
    if "<O>" in question:
        raise ConfigError(f"{where}: question template gives away its answer <O>")
    if spec.get("topic") not in topics:
        raise ConfigError(f"{where}: unknown topic {spec.get('topic')!r} (topics: {topics})")
    if not spec.get("answer_type"):
        raise ConfigError(f"{where}: no answer_type")
    if not isinstance(spec.get("changes_over_time"), bool):
        raise ConfigError(f"{where}: changes_over_time must be true or false (may the object change "
                          "while the subject stays the same?)")
    if not isinstance(spec.get("multi_valued", False), bool):
        raise ConfigError(f"{where}: multi_valued must be true or false")


def _flags(spec: dict) -> dict:
    return {"changes_over_time": spec["changes_over_time"], "multi_valued": spec.get("multi_valued", False)}


def load_relations(path: Path | None = None) -> tuple[list[Relation], list[str]]:
    path = path or conf_dir() / "relations.yaml"
    data = load_yaml(path)
    topics = data.get("topics") or []
    if not topics:
        raise ConfigError(f"{path}: no topics listed")
    entries = data.get("relations") or {}
    if not entries:
        raise ConfigError(f"{path}: no relations")
    relations = []
    for relation, spec in entries.items():
        where = f"{path.name}: relation {relation}"
        if not _PROPERTY.match(str(relation)):
            raise ConfigError(f"{where}: not a Wikidata property id")
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected statement, question, answer_type, topic")
        _check_entry(where, spec, topics)
        relations.append(Relation(str(relation), spec["statement"], spec["question"], spec["answer_type"],
                                  spec["topic"], **_flags(spec)))
    return relations, list(topics)


def load_pairs(topics: list[str], path: Path | None = None,
               relations: list[Relation] | None = None) -> list[RelationPair]:
    """Two-hop pairs; with ``relations``, a pair is multi-valued also when either hop's
    relation is (several directors, several awards: several answers)."""
    path = path or conf_dir() / "multihop.yaml"
    multi = {r.relation for r in relations or () if r.multi_valued}
    data = load_yaml(path)
    pairs = []
    seen = set()
    for index, spec in enumerate(data.get("pairs") or []):
        where = f"{path.name}: pair {index + 1} ({spec.get('first')}/{spec.get('second')})"
        for hop in ("first", "second"):
            if not _PROPERTY.match(str(spec.get(hop, ""))):
                raise ConfigError(f"{where}: '{hop}' is not a Wikidata property id")
        if spec.get("kind") not in MULTIHOP_KINDS:
            raise ConfigError(f"{where}: kind must be one of {MULTIHOP_KINDS}")
        _check_entry(where, spec, topics)
        flags = _flags(spec)
        flags["multi_valued"] = flags["multi_valued"] or bool({spec["first"], spec["second"]} & multi)
        pair = RelationPair(
            spec["first"], spec["second"], spec["kind"], spec["statement"], spec["question"],
            spec["answer_type"], spec["topic"], **flags,
        )
        if pair.relation in seen:
            raise ConfigError(f"{where}: listed twice")
        seen.add(pair.relation)
        pairs.append(pair)
    return pairs
