"""What the tests of utils share: the figures a test draws are closed after it."""

import sys

import pytest


@pytest.fixture(autouse=True)
def close_figures():
    """matplotlib keeps every figure until it is closed: none outlives its test."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
