from __future__ import annotations

import pytest


@pytest.fixture
def no_mvsink_env(monkeypatch):
    """No MVSINK_DATA_ROOT or MVSINK_VIEWS_DIR from the environment (the view-file tests use it)."""
    monkeypatch.delenv("MVSINK_DATA_ROOT", raising=False)
    monkeypatch.delenv("MVSINK_VIEWS_DIR", raising=False)
