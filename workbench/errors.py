"""The project's error types: one base class, so the CLI can tell a user's error from a bug.

`WorkbenchError` is the base of every error the project raises on purpose to tell the user
something they can fix (a bad config field, a missing file, an unknown plugin, a run folder
that cannot be resumed). The `workbench` command prints such an error as one line
`error: <message>` and exits with status 2.

`InternalError` (a `WorkbenchError`) is raised when the project's own checks find that it
went wrong itself (for example `workbench.engine.invariants.InvariantError`): that is a bug,
and the command prints its traceback like any other unexpected exception.

Each module keeps its own error class (`ConfigError`, `CheckpointError`, ...) and its usual
built-in base (`ValueError`, `RuntimeError`), so `except ValueError` around a config load
still works; they all also derive from `WorkbenchError`.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """An error the user can act on; its message says what is wrong and what to do."""


class InternalError(WorkbenchError):
    """The project's own consistency check failed: a bug, reported with its traceback."""


class RunError(WorkbenchError, RuntimeError):
    """A run cannot start or continue as asked; the message says what to do. Raised by the
    co-evolution loop and the parts it is built from (the model pair, the task sources, the
    context checks, the checkpointing); `workbench.engine.loop` exports it too."""


__all__ = ["InternalError", "RunError", "WorkbenchError"]
