"""`RunError`: a run cannot start or continue as asked. Raised by the loop and the parts it is
built from (the model pair, the task sources, the context checks); `workbench.engine.loop`
exports it, where callers import it from."""

from __future__ import annotations

from workbench.errors import WorkbenchError


class RunError(WorkbenchError, RuntimeError):
    """A run cannot start or continue as asked; the message says what to do."""
