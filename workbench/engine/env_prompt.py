"""The environment prompt as a few-shot chat (`env.prompt_format: turns`).

A plugin writes its environment prompt as one instruction with example tasks inside it. A
small instruct model asked that way mostly answers with prose or code about the format
instead of one task in it (SmolLM2-135M-Instruct: 0 of 8 BFCL generations parsed). Chat
models copy the form of their own earlier replies far more reliably, so in `turns` format
the engine keeps the plugin's prompt, examples included (some plugins refer to them, e.g.
TravelPlanner's sandbox numbers), as the first user message, then shows each example
rendered in the task format (`workbench_render_task`) as the model's own reply, each
followed by a request for a different task. The model's next reply is the new task.
"""

from __future__ import annotations

FOLLOW_UP = "Write one more new task in exactly the same format, different from every task so far. Reply with the task only."


def few_shot_turns(instruction: str, rendered_examples: list[str | None]) -> list[dict[str, str]]:
    """[user: instruction, (assistant: example, user: follow-up) per rendered example]; an
    example the plugin cannot render is left out (the instruction still shows it)."""
    messages = [{"role": "user", "content": instruction}]
    shown = [text for text in rendered_examples if text]
    for text in shown:
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": FOLLOW_UP}]
    return messages
