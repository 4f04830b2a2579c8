"""mkdocs hook: equations become MathML at build time, so that they render without a network and without JavaScript.

`pymdownx.arithmatex` (generic mode, mkdocs.yml) marks ``$...$`` and ``$$...$$`` as ``<span class="arithmatex">``
and ``<div class="arithmatex">`` holding the TeX; this hook replaces each by the MathML that `latex2mathml` writes,
which every current browser renders natively (no KaTeX or MathJax script, no font download). TeX that
`latex2mathml` cannot convert, or whose command it does not know, fails the build, naming the page and the formula.
"""

from __future__ import annotations

import html
import re

from mkdocs.exceptions import PluginError

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.DOTALL)
BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.DOTALL)
UNKNOWN = re.compile(r">([^<]*\\[^<]*)<")  # a backslash left in a text node: TeX it did not convert


def _converter():
    try:
        from latex2mathml.converter import convert
    except ImportError as error:  # the dev extra installs it
        raise PluginError(
            "the docs render equations with latex2mathml, which is not installed: pip install -e '.[dev]' "
            "(or pip install latex2mathml)"
        ) from error
    return convert


def to_mathml(content: str, page_path: str = "<page>") -> str:
    """Replace every arithmatex span (inline) and div (display) of the HTML `content` by MathML."""
    if "arithmatex" not in content:
        return content
    convert = _converter()

    def replace(match: re.Match, display: str) -> str:
        tex = html.unescape(match.group(1)).strip()
        try:
            mathml = convert(tex, display=display)
        except Exception as error:  # latex2mathml raises its own exception types for unknown commands
            raise PluginError(f"{page_path}: cannot render the equation {tex!r} as MathML: {error}") from error
        unknown = UNKNOWN.findall(mathml)  # latex2mathml keeps a command it does not know as text (`\foo`, `\_`)
        if unknown:
            raise PluginError(
                f"{page_path}: cannot render the equation {tex!r} as MathML: TeX left unconverted: {unknown[0]}"
            )
        return mathml if display == "inline" else f'<div class="arithmatex">{mathml}</div>'

    content = BLOCK.sub(lambda m: replace(m, "block"), content)
    return INLINE.sub(lambda m: replace(m, "inline"), content)


def on_page_content(html_content, page, config, files):
    return to_mathml(html_content, page.file.src_uri)
