"""GoAgent step 1: the pool of candidate groups a domain's teams are built from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maslab.core.topology import Template
from maslab.errors import ConfigError
from maslab.kit.parsing import parse_json_object


class Group(BaseModel):
    """A candidate group: its members are ``<name>:<role>``, wired by ``template``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    expertise: str = ""
    roles: tuple[str, ...] = Field(min_length=1)
    template: Template = "chain"

    def members(self) -> list[str]:
        return [f"{self.name}:{role}" for role in self.roles]


BUILTIN_POOL = (
    Group(
        name="solve_and_verify",
        expertise="break the problem down, solve it, check the result",
        roles=("decomposer", "solver", "verifier"),
    ),
    Group(
        name="plan_and_execute",
        expertise="plan first, then carry out the plan",
        roles=("planner", "executor"),
    ),
    Group(
        name="expert_panel",
        expertise="independent expert views pooled by a moderator",
        roles=("moderator", "domain expert", "generalist"),
        template="star",
    ),
    Group(
        name="debate_pair",
        expertise="two solvers who challenge each other",
        roles=("proponent", "skeptic"),
        template="complete",
    ),
)
TEMPLATE_WORDS: dict[str, Template] = {
    "chain": "chain", "sequential": "chain", "pipeline": "chain",
    "star": "star", "hub": "star", "hierarchical": "star",
    "complete": "complete", "mesh": "complete", "fully connected": "complete",
    "none": "none", "parallel": "none", "independent": "none",
}  # fmt: skip


def pool_prompt(domain: str, size: int, max_roles: int) -> str:
    return (
        f"You design teams of AI agents that solve tasks in this domain: {domain}.\n\n"
        f"Propose {size} different candidate groups. A group is a small team of at most "
        f"{max_roles} agents that works together on one aspect of such tasks (say, one agent "
        "breaks the problem down, one solves it and one checks it). Reply with one JSON object "
        'whose key "groups" holds the list of groups. Each group has a unique short "name" '
        '(snake_case), an "expertise" sentence, "roles" (a list of role names in working '
        'order) and "topology", how its members talk: "chain" (each hands its work to the '
        'next), "star" (the first role coordinates the others) or "complete" (everyone sees '
        "everyone)."
    )


def parse_pool(text: str, size: int, max_roles: int) -> list[Group]:
    """The valid groups of a pool reply (bad entries are skipped), at most ``size``."""
    data = parse_json_object(text)
    items = data.get("groups") if data else None
    pool: dict[str, Group] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"].strip().replace(":", "-")
        listed = item.get("roles")
        raw_roles = listed if isinstance(listed, list) else []
        roles = [r.strip() for r in raw_roles if isinstance(r, str) and r.strip()]
        roles = list(dict.fromkeys(roles))[:max_roles]
        if not name or name.casefold() in pool or not roles:
            continue
        expertise = item.get("expertise")
        pool[name.casefold()] = Group(
            name=name,
            expertise=expertise.strip() if isinstance(expertise, str) else "",
            roles=tuple(roles),
            template=TEMPLATE_WORDS.get(str(item.get("topology", "")).strip().lower(), "chain"),
        )
    return list(pool.values())[:size]


def read_json(path: str, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` ({} if the file does not exist)."""
    file = Path(path)
    if not file.exists():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable {what} ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} file holds one JSON object")
    return data


def groups_from(data: Any, path: str) -> list[Group]:
    """Stored groups, validated; a file's pool must hold at least one group."""
    try:
        groups = [Group.model_validate(g) for g in data]
    except (TypeError, ValidationError) as exc:
        raise ConfigError(f"{path}: malformed group pool ({exc})") from None
    if not groups:
        raise ConfigError(f"{path}: empty group pool")
    return groups


@dataclass(frozen=True)
class Pool:
    groups: list[Group]
    source: str  # "llm", "pool file", "selector file", "learned state", "builtin (...)"
