"""Loading Bamboogle records into tasks: the official `{Question, Answer}` file and its kin.

Formats read (detected per file):

* the official file, a JSON list of `{"Question": str, "Answer": str}` (ToolRL's and the
  original Bamboogle release); task ids are the 0-based positions;
* JSON Lines of the same records, ids again the 0-based positions (blank lines skipped,
  they do not count as positions);
* FlashRAG's JSON Lines `{"id", "question", "golden_answers": [str, ...]}`, ids its own.

A bad record raises ValueError naming the file and the record. Tasks carry the gold in
`spec` (`question`, `answer`, `answers`), and the prompt the agent sees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench import Task

NAME = "bamboogle"
SAMPLES = Path(__file__).with_name("samples.json")

SYSTEM = (
    "You answer compositional factual questions that need two or more facts combined. "
    "Think step by step if it helps, then commit to one final answer."
)
AGENT_INSTRUCTION = (
    "Question: {question}\n\n"
    "Answer the question. You may reason briefly first. Then give only the final answer "
    "(a short name, date, number or phrase, not a sentence) inside <answer></answer> tags, "
    "for example <answer>Paris</answer>."
)


def make_task(question: str, answers: list[str], task_id: str = "", source: str = "seed",
              hops: list[str] | None = None) -> Task:
    """A task for one question with its gold answer(s); the first answer is the primary one."""
    spec: dict[str, Any] = {"question": question, "answer": answers[0], "answers": list(answers)}
    if hops:
        spec["hops"] = list(hops)
    return Task(
        domain=NAME,
        prompt=AGENT_INSTRUCTION.format(question=question.strip()),
        system=SYSTEM,
        spec=spec,
        id=task_id,
        source=source,
    )


def read_records(path: Path) -> list[tuple[int, Any]]:
    """(position, record) pairs of a JSON list file or a JSON Lines file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read Bamboogle data ({exc})") from exc
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        return list(enumerate(records))
    out: list[tuple[int, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((len(out), json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {lineno} is not valid JSON ({exc.msg})") from exc
    if not out:
        raise ValueError(f"{path}: no Bamboogle records in the file")
    return out


def record_to_task(path: Path, position: int, record: Any, source: str = "seed") -> Task:
    """One record (official or FlashRAG form) as a task; ValueError naming file and record."""
    where = f"{path}: record {position}"
    if not isinstance(record, dict):
        raise ValueError(f"{where} is {type(record).__name__}, not an object with Question and Answer")
    question: Any  # JSON values, checked below
    answers: Any
    if "Question" in record or "Answer" in record:
        question, answers, task_id = record.get("Question"), [record.get("Answer")], str(position)
    elif "question" in record and "golden_answers" in record:
        question, answers = record.get("question"), record.get("golden_answers")
        task_id = str(record.get("id", position))
        if not isinstance(answers, list) or not answers:
            raise ValueError(f"{where}: 'golden_answers' must be a non-empty list of strings")
    else:
        raise ValueError(f"{where} has fields {sorted(record)}; expected 'Question' and 'Answer'")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: the question must be a non-empty string, got {question!r}")
    for answer in answers:
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(f"{where}: the answer must be a non-empty string, got {answer!r}")
    return make_task(question, answers, task_id=task_id, source=source)


def load_file(path: str | Path, source: str = "seed") -> list[Task]:
    """All records of a Bamboogle file as tasks."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Bamboogle data file {str(path)!r} does not exist or is not a file")
    return [record_to_task(path, position, record, source) for position, record in read_records(path)]


def builtin_samples() -> list[Task]:
    """The small hand-written sample set shipped with the plugin (official format)."""
    tasks = load_file(SAMPLES)
    for i, task in enumerate(tasks):
        task.id = f"sample-{i}"
    return tasks
