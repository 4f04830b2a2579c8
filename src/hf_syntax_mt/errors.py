"""The package's user-error types: bad input a user can fix, as opposed to a bug.

Every check at a boundary (a CLI flag, a public function's argument, a file a reader opens, a config option) raises
one of these, with a message that names the flag, argument, file, line or field, the value, and what to do. The CLI
prints a `UserError` as one ``error:`` line; anything else is a bug and keeps its traceback.

They subclass the built-in exception a caller would expect (`ValueError`, and `TypeError` for a wrong type), so
``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = ["DependencyVersionError", "UserError", "UserTypeError"]


class UserError(ValueError):
    """Bad input a user can fix; the message says what is wrong and what to do."""


class UserTypeError(UserError, TypeError):
    """An argument of the wrong type (e.g. a ``str`` where a list of sentences is meant)."""


class DependencyVersionError(ImportError):
    """An installed dependency outside the releases the package supports (`compat.check_versions`, at import); the
    CLI prints it as one ``error:`` line naming the release to install."""
