"""The format of the environment's reply for Bamboogle (`workbench_env_reply_format`): a JSON Schema
of `{"question", "answer", "hops"}` (generation.py's module doc; `hops` optional, as the renderer
leaves it out when a task has none, and allowed only when a seed has hops), every bound sized to the run's seeds with `longest`: the
lengths of the question, the answer and the hops, and the hops per task. The question is one line
ending with '?' of at least `MIN_QUESTION_CHARS` characters. What the schema cannot say (four
words at least, a short answer that is not in the question) stays with `generation.validate_spec`."""

from __future__ import annotations

import json
from typing import Any

from workbench import Task, longest

from .generation import MIN_QUESTION_CHARS, example_json


def reply_schema(seeds: list[Task]) -> dict[str, Any] | None:
    """The JSON Schema of one reply, bounded by what `seeds` show (None without a seed that renders:
    one with a question and an answer)."""
    objs = [json.loads(example_json(t)) for t in seeds if t.spec.get("question") and t.spec.get("answer")]
    if not objs:
        return None
    hops = [o["hops"] for o in objs if "hops" in o]
    text = {"type": "string", "minLength": 1}
    properties: dict[str, Any] = {
        "question": {"type": "string", "pattern": r"^[^\n]*\?$", "minLength": MIN_QUESTION_CHARS,
                     "maxLength": longest([o["question"] for o in objs])},
        "answer": {**text, "maxLength": longest([o["answer"] for o in objs])},
    }
    if hops:
        properties["hops"] = {"type": "array", "minItems": 1, "maxItems": longest(hops),
                              "items": {**text, "maxLength": longest([h for hs in hops for h in hs])}}
    return {"type": "object", "properties": properties, "required": ["question", "answer"], "additionalProperties": False}
