"""What would change a refresh's mode, from the reason its commit recorded (``mvsink.mode_reason``): the fixes
``mvsink explain`` names, read off the reason's words (pure, no Spark), so the Airflow page can show them on the
view's tab beside the reason itself.

``mvsink explain`` decides its fixes on the analysed plan; this module only recognises the reasons those fixes
answer (a mode turned off, ``incremental: false``, checks on a non-linear query, the rewrites of a query the linear
path refuses). A reason it does not recognise has no fix here (the page then points to ``mvsink explain``).
"""

from __future__ import annotations

import re

from mvsink.core.commitinfo import REASON_HINTS

_ENABLES = re.compile(r"\b([A-Z][A-Z0-9_]+)=true enables")
NOT_INCREMENTAL = "incremental: false"


def mode_fixes(reason: str | None) -> list[str]:
    """The fixes for a recorded mode reason, the cheapest first (empty: none known, or nothing to fix)."""
    text = reason or ""
    if not text:
        return []
    if NOT_INCREMENTAL in text:
        return ["set `incremental: true` in the view file (the default)"]
    out = [f"set {s}=true (a setting of the refresh's environment)" for s in dict.fromkeys(_ENABLES.findall(text))]
    if "check" in text and ("linear" in text or "checks" in text):
        out.append(
            "move the view's checks to a view over this one: a view with checks refreshes incrementally only "
            "when its query is linear"
        )
    for words, hint in REASON_HINTS:
        if any(w in text for w in words):
            out.append(hint)
            break
    return out
