"""Short, readable messages from Spark exceptions."""

from __future__ import annotations


def first_paragraph(exc: BaseException) -> str:
    text = str(exc).strip()
    for cut in ("\n\nJVM stacktrace", ";\n'", "\n== SQL", "\n\tat "):
        if cut in text:
            text = text[: text.index(cut)]
    return text[:800]
