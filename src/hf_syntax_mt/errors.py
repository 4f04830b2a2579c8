"""The package's user-error types: bad input a user can fix, as opposed to a bug.

Every check at a boundary (a CLI flag, a public function's argument, a file a reader opens, a config option) raises
one of these, with a message that names the flag, argument, file, line or field, the value, and what to do. The CLI
prints a `UserError` as one ``error:`` line; anything else is a bug and keeps its traceback.

They subclass the built-in exception a caller would expect (`ValueError`, and `TypeError` for a wrong type), so
``except ValueError`` keeps working.
"""

from __future__ import annotations

import os

__all__ = ["DependencyVersionError", "MissingFileError", "UserError", "UserFileError", "UserTypeError", "file_error"]


class UserError(ValueError):
    """Bad input a user can fix; the message says what is wrong and what to do."""


class UserTypeError(UserError, TypeError):
    """An argument of the wrong type (e.g. a ``str`` where a list of sentences is meant)."""


class UserFileError(UserError, OSError):
    """A file or folder the user named that cannot be read or written (missing, a folder where a file is meant, no
    permission, a full disk), raised where the package opens it, naming the flag or argument, the file and the fix.
    It is an `OSError` too (``errno`` and ``filename`` set), so ``except OSError`` keeps working."""

    def __init__(self, message: str, errno: int | None = None, filename: str | None = None):
        super().__init__(message)
        self.errno, self.filename, self.strerror = errno, filename, None

    def __str__(self) -> str:
        return str(self.args[0])


class MissingFileError(UserFileError, FileNotFoundError):
    """A file the user named does not exist (a `FileNotFoundError` too)."""


_FIXES = {
    "FileNotFoundError": "check the path",
    "IsADirectoryError": "give a file, not a folder",
    "NotADirectoryError": "a part of the path is a file, not a folder: check the path",
    "PermissionError": "check the file's permissions",
}


def file_error(error: OSError, path: str | os.PathLike, what: str = "", writing: bool = False) -> UserFileError:
    """The `UserFileError` for an `OSError` met opening, reading or writing ``path`` (``what``: the flag or argument
    that named it, e.g. ``"--output"``). A full disk says so; the message keeps the system's words."""
    import errno as codes

    reason = (error.strerror or str(error)).rstrip(".")
    kind = type(error).__name__
    if error.errno == codes.ENOSPC:
        fix = "free some space on that disk, or write elsewhere"
    elif error.errno == codes.EROFS:
        fix = "the file system is read-only: write elsewhere"
    else:
        fix = _FIXES.get(kind, "check the path" if not writing else "check the path and that it can be written")
    where = f"{what} {path}" if what else str(path)
    verb = "cannot be written" if writing else "cannot be read"
    cls = MissingFileError if isinstance(error, FileNotFoundError) else UserFileError
    return cls(f"{where}: {verb} ({reason}); {fix}", error.errno, str(path))


class DependencyVersionError(ImportError):
    """An installed dependency outside the releases the package supports (`compat.check_versions`, at import); the
    CLI prints it as one ``error:`` line naming the release to install."""
