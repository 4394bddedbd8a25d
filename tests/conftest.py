"""Shared fixtures: paths to the shared corpus and bug cases.

The corpus lives beside the checkout in ``../shared`` and is read in place, never
copied. When it is missing, tests that need it skip locally but FAIL under CI
(``CI`` set), so a CI run without the corpus cannot pass silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GAPSCOPE_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "traces" / "public"
BUGS = SHARED / "bugs"
SAMPLES = ROOT / "sample_traces"


def require(path: Path) -> Path:
    """Return ``path``; skip the test when it is missing, or fail when ``CI`` is set."""
    if not path.exists():
        msg = f"shared test data missing: {path}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def corpus() -> Path:
    return require(CORPUS)


@pytest.fixture
def bugs() -> Path:
    return require(BUGS)
