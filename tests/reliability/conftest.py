"""Every test here is ``slow``: crashes, kills, fuzzing and properties through real
workers. CI runs them; ``pytest -m 'not slow'`` leaves them out of a quick loop."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
