"""Prompt files under prompts/: loaded by name, rendered with named fields, hashed.

A prompt is the user message ``prompts/<name>.txt``; its system message is
``prompts/<name>.system.txt`` where one exists, else ``prompts/system.txt`` (the writers').
Fields are ``{name}``; rendering fails, naming the prompt, if a field is missing.
"""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from misbench.config import ConfigError, project_dir


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    user: str

    @property
    def fields(self) -> set[str]:
        return {field for _, field, _, _ in string.Formatter().parse(self.user) if field}

    @property
    def sha(self) -> str:
        return hashlib.sha256(f"{self.system}\n---\n{self.user}".encode()).hexdigest()[:16]

    def messages(self, values: dict) -> list[dict]:
        missing = self.fields - set(values)
        if missing:
            raise ConfigError(f"prompt '{self.name}' needs {sorted(missing)}")
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format_map(values)},
        ]


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
    return Prompt(name, system, path.read_text(encoding="utf-8").strip())
