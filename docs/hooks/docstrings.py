"""griffe extension (mkdocs.yml, mkdocstrings' `extensions`): transformers-style docstrings become Google style.

The package's docstrings follow transformers' conventions, which griffe's Google parser shows raw in the API
reference. Before a docstring is parsed, this extension rewrites:

- an argument line ``name (`list[int]`, *optional*, defaults to `"x"`):`` into ``name (list[int]): Optional,
  defaults to `"x"`.``: the type without backticks (``of shape `(B, S)` `` moves into the description), the rest of
  the parenthesis in front of the description;
- a reference ``[`~transformers.MarianConfig`]`` into `` `MarianConfig` `` (``[`transformers.X`]`` keeps the whole
  path): transformers' doc-builder links have no target in this site;
- reStructuredText's ``::`` before a literal block into ``:`` (the indented block is already code in Markdown).

`SyntaxMTConfig`'s docstring is read from the class at run time, not from the source: the methods' options are
appended to it from the registry (each method declares its own in its module).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import griffe

# [`~transformers.MarianConfig`], [`transformers.MarianConfig`], [~transformers.MarianConfig] (not `x[~mask]`)
REFERENCE = re.compile(r"\[`(~?)([A-Za-z_][\w.]*)`\]|\[(~)([A-Za-z_]\w*(?:\.\w+)+)\]")
# an argument line: indent, one or more names, a parenthesis that holds backticks or *optional*, the description
ARGUMENT = re.compile(
    r"^(?P<indent>[ \t]+)(?P<names>\*{0,2}\w+(?:,[ \t]*\*{0,2}\w+)*)[ \t]+\((?P<spec>[^\n]*(?:`|\*optional\*)[^\n]*)\):"
    r"(?P<rest>[^\n]*)$",
    re.MULTILINE,
)
SECTION = re.compile(r"^\w[\w ]*:\s*$")
SHAPE = re.compile(r"^(?P<type>.*?)\s+of shape\s+(?P<shape>.+)$")
LITERAL_BLOCK = re.compile(r"(?<=\S)::[ \t]*$", re.MULTILINE)


def _split(spec: str) -> list[str]:
    """Split an argument's parenthesis at the commas outside backticks and brackets."""
    parts, depth, in_code, start = [], 0, False, 0
    for i, char in enumerate(spec):
        if char == "`":
            in_code = not in_code
        elif not in_code and char in "([{":
            depth += 1
        elif not in_code and char in ")]}":
            depth -= 1
        elif char == "," and not in_code and depth == 0:
            parts.append(spec[start:i].strip())
            start = i + 1
    parts.append(spec[start:].strip())
    return [part for part in parts if part]


def _code(text: str) -> str:
    return text if text.startswith("`") else f"`{text}`"


def argument_line(match: re.Match) -> str:
    """The Google-style line for one transformers-style argument line."""
    type_text, notes, optional, default = None, [], False, None
    for k, part in enumerate(_split(match.group("spec"))):
        if part == "*optional*":
            optional = True
        elif part.startswith("defaults to "):
            default = part.removeprefix("defaults to ").strip().rstrip(".")
        elif k == 0:
            shape = SHAPE.match(part)
            if shape:
                part = shape.group("type")
                notes.append(f"Shape {shape.group('shape')}.")
            type_text = " | ".join(t.strip().strip("`") for t in re.split(r"\s+or\s+", part))
        else:
            notes.append(part[:1].upper() + part[1:] + ".")
    if default is not None:
        notes.insert(0, f"Optional, defaults to {_code(default)}." if optional else f"Defaults to {_code(default)}.")
    elif optional:
        notes.insert(0, "Optional.")
    head = f"{match.group('indent')}{match.group('names')}" + (f" ({type_text})" if type_text else "")
    description = " ".join([*notes, match.group("rest").strip()]).strip()
    return f"{head}: {description}".rstrip()


def _reference(match: re.Match) -> str:
    tilde, name = (match.group(1), match.group(2)) if match.group(2) else (match.group(3), match.group(4))
    return f"`{name.rsplit('.', 1)[-1] if tilde else name}`"


def _args_section(text: str) -> str:
    """Put argument lines that stand at the left margin (as in transformers' `forward` docstrings) under an
    ``Args:`` header, indented with their descriptions, so that they are parsed as parameters."""
    out, in_block = [], False
    for line in text.split("\n"):
        if line and not line[0].isspace():  # a line at the margin starts, continues or ends a block
            is_argument = not SECTION.match(line) and ARGUMENT.match("    " + line)
            if is_argument and not in_block:
                out.append("Args:")
            in_block = bool(is_argument)
        out.append("    " + line if in_block and line else line)
    return "\n".join(out)


def convert(text: str) -> str:
    """Rewrite a transformers-style docstring into the Google style that griffe parses."""
    text = REFERENCE.sub(_reference, text)
    text = _args_section(text)
    text = ARGUMENT.sub(argument_line, text)
    return LITERAL_BLOCK.sub(":", text)


class TransformersDocstrings(griffe.Extension):
    """Rewrite every docstring before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.path == "hf_syntax_mt.configuration_syntax_mt.SyntaxMTConfig" and obj.docstring is not None:
            from hf_syntax_mt import SyntaxMTConfig  # its options' entries are generated from the method registry

            obj.docstring.value = inspect.cleandoc(SyntaxMTConfig.__doc__)
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
