"""The settings registry (:data:`mvsink.settings.REGISTRY`) as the Markdown table of ``docs/configuration.md``
(a test keeps the two in step)."""

from __future__ import annotations

from mvsink.settings import REGISTRY


def markdown_table() -> str:
    """The registry as the Markdown table of ``docs/configuration.md`` (variable | default | meaning)."""
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for s in REGISTRY:
        meaning = s.meaning + (
            f" (also `[mvsink] {s.airflow_option}` in Airflow's configuration)" if s.airflow_option else ""
        )
        lines.append(f"| `{s.name}` | {s.default} | {meaning} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
