"""Embed a Markdown page (a pipeline's table, a study's page) in the report.

A page links its pictures and files relative to its own folder; inside the report those links must
be relative to the report's folder, so every relative link and image target is rewritten through the
page's folder. Absolute URLs, absolute paths, anchors and anything inside code are left as written.
"""

from __future__ import annotations

import posixpath
import re

CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.DOTALL)
INLINE_TARGET = re.compile(r"(!?\[[^\]\n]*\]\(\s*)(<[^>\n]*>|[^)\s]+)")
REFERENCE_TARGET = re.compile(r"^( {0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)", re.MULTILINE)
PATH_AND_REST = re.compile(r"([^?#]*)(.*)", re.DOTALL)
NOT_RELATIVE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|/|#)")  # a scheme (https:, mailto:), an absolute path, an anchor


def rebase_target(target: str, folder: str) -> str:
    """``target`` as seen from the report's folder, when it is relative to ``folder`` (the page's folder, relative to the report's)."""
    bracketed = target.startswith("<") and target.endswith(">")
    bare = target[1:-1] if bracketed else target
    path, query_or_fragment = PATH_AND_REST.match(bare).groups()
    if not path or NOT_RELATIVE.match(bare):
        return target
    rebased = posixpath.normpath(posixpath.join(folder, path)) + query_or_fragment
    return f"<{rebased}>" if bracketed else rebased


def rebase_links(markdown: str, folder: str) -> str:
    """Every relative link and image target of ``markdown`` (inline or a reference definition) rewritten through ``folder``."""
    if posixpath.normpath(folder) == ".":
        return markdown
    rewrite = lambda match: match.group(1) + rebase_target(match.group(2), folder)  # noqa: E731
    parts = CODE.split(markdown)
    for index in range(0, len(parts), 2):  # the odd parts are code, shown as written
        parts[index] = REFERENCE_TARGET.sub(rewrite, INLINE_TARGET.sub(rewrite, parts[index]))
    return "".join(parts)


def embed_page(markdown: str, folder: str = ".") -> str:
    """The page as a section's body: its own top-level heading dropped (the report gives each section its
    heading) and its links rebased from ``folder``, the page's folder relative to the report's."""
    lines = markdown.strip().splitlines()
    body = "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines).strip() + "\n"
    return rebase_links(body, folder)
