"""Prompt files under prompts/: loaded by name, rendered with named fields, hashed.

A prompt is the user message ``prompts/<name>.txt``; its system message is
``prompts/<name>.system.txt`` where one exists, else ``prompts/system.txt`` (the writers').
``prompts/<name>.reply.txt``, where one exists, is how the model's reply begins: the model
continues from it (the LLM backends take a final assistant message as a reply begun), which
holds a small model to the sentence it must write. Fields are ``{name}``; rendering fails,
naming the prompt, if a field is missing.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from misbench.config import ConfigError, project_dir
from misbench.ids import digest

# The letters a prompt shows options under, in order: a question of n options uses the first n
# (MisBench's five, MultiHoax's four).
OPTION_LETTERS = ("A", "B", "C", "D", "E")


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str
    reply: str | None = None  # the start of the model's reply, continued by the model

    @property
    def fields(self) -> set[str]:
        templates = [self.user] + ([self.reply] if self.reply else [])
        return {field for template in templates for _, field, _, _ in string.Formatter().parse(template) if field}

    @property
    def sha(self) -> str:
        reply = f"\n---\n{self.reply}" if self.reply else ""
        return digest(f"{self.system}\n---\n{self.user}{reply}", 16)

    def messages(self, values: dict) -> list[dict]:
        missing = self.fields - set(values)
        if missing:
            raise ConfigError(f"prompt '{self.name}' needs {sorted(missing)}")
        messages = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format_map(values)},
        ]
        if self.reply:
            messages.append({"role": "assistant", "content": self.reply.format_map(values)})
        return messages


def prompt_wording(prompts) -> list[str]:
    """The templates of these prompts (system, user, begun reply): what a model could repeat
    back instead of writing (``quality.checks.prompt_ngrams`` takes their literal words)."""
    return [template for prompt in prompts for template in (prompt.system, prompt.user, prompt.reply) if template]


def messages_column(prompt: Prompt, field_columns: dict[str, str]):
    """A column of the prompt's chat messages (JSON) rendered from the named columns
    (field -> column). The chat template is not applied here: backends apply it at run time."""
    import json

    from pyspark.sql import functions as F

    @F.udf("string")
    def render(*values):
        return json.dumps(prompt.messages(dict(zip(field_columns.keys(), values))), ensure_ascii=False)

    return render(*[F.col(c).cast("string") for c in field_columns.values()])


def prompts_dir() -> Path:
    return project_dir() / "prompts"


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    folder = prompts_dir()
    path = folder / f"{name}.txt"
    if not path.is_file():
        raise ConfigError(f"no prompt file prompts/{name}.txt")
    own_system = folder / f"{name}.system.txt"
    system_path = own_system if own_system.is_file() else folder / "system.txt"
    system = system_path.read_text(encoding="utf-8").strip()
    reply_path = folder / f"{name}.reply.txt"
    reply = reply_path.read_text(encoding="utf-8").strip() if reply_path.is_file() else None
    return Prompt(name, system, path.read_text(encoding="utf-8").strip(), reply or None)
