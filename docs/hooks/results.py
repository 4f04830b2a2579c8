"""mkdocs hook: the study pages read their tables and figures from the repository at build time.

- A line ``::include PATH`` (PATH relative to the repository root) is replaced by that Markdown file. A missing file
  fails the build (`PluginError`), so a renamed results file cannot leave a page silently empty.
- A line ``::include? PATH`` is the same for a file that may not exist yet (a study still running, a benchmark
  whose results are not committed): a missing file becomes a note that says which command writes it.
- Included headings are moved under the page's own: a leading ``# title`` is dropped, and the others are demoted so
  that the highest becomes ``###``.
- Every ``*.png`` under ``benchmarks/results`` is added to the site as ``results/<path below benchmarks/results>``,
  so a page links ``../results/multi30k/curves.png`` and a missing figure is a broken link in the strict build.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
INCLUDE = re.compile(r"^::include(\?)?[ \t]+(\S+)[ \t]*$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})(?=\s)", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)


def _demote(text: str) -> str:
    """Drop a leading H1 and shift the other headings (outside code fences) so that the highest becomes H3."""
    lines = text.strip("\n").splitlines()
    if lines and re.match(r"^#\s", lines[0]):
        lines = lines[1:]
    in_fence, levels = False, []
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := HEADING.match(line)):
            levels.append(len(m.group(1)))
    shift = 3 - min(levels) if levels else 0
    out, in_fence = [], False
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and shift and (m := HEADING.match(line)):
            line = "#" * min(6, len(m.group(1)) + shift) + line[len(m.group(1)) :]
        out.append(line)
    return "\n".join(out)


def include(markdown: str, page_path: str) -> str:
    """Replace every ``::include`` line of `markdown` (the page `page_path`) by the file it names."""

    def replace(match: re.Match) -> str:
        optional, rel = match.group(1) == "?", match.group(2)
        path = (ROOT / rel).resolve()
        if not path.is_relative_to(ROOT):
            raise PluginError(f"{page_path}: ::include {rel} lies outside the repository")
        if not path.is_file():
            if optional:
                return (f'!!! note "Not built yet"\n    `{rel}` does not exist in this checkout yet; the page shows it '
                        "once the study or benchmark that writes it has run.")  # fmt: skip
            raise PluginError(f"{page_path}: ::include {rel}: no such file (give the path from the repository root, "
                              "or use ::include? for a file that may not exist yet)")  # fmt: skip
        return _demote(path.read_text(encoding="utf-8"))

    return INCLUDE.sub(replace, markdown)


def on_page_markdown(markdown, page, config, files):
    return include(markdown, page.file.src_uri)


def on_files(files, config):
    for png in sorted(RESULTS.rglob("*.png")) if RESULTS.is_dir() else ():
        uri = "results/" + png.relative_to(RESULTS).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files
