"""The book's dependencies: every requirement pinned, and CI's Colab-runtime environment
on Colab's versions."""

from tests.helpers import ROOT


def pins(path):
    lines = (ROOT / path).read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def test_every_requirement_is_pinned():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    packages = [line for line in lines if line and not line.startswith("#")]
    assert all("==" in line for line in packages), packages
    assert pins("requirements.txt")["jupyter-book"].startswith("1.")


def test_the_colab_runtime_environment_takes_colab_s_versions():
    """CI's Colab-runtime environment: every package it names unpinned is pinned by Colab's
    constraints, and those pin the versions Colab's runtime reports (tools/colab_constraints)."""
    colab = {name.lower(): version for name, version in pins("constraints-colab.txt").items()}
    text = (ROOT / "requirements-colab-runtime.txt").read_text()
    lines = [line.strip() for line in text.splitlines()]
    names = [line for line in lines if line and not line.startswith(("#", "-c"))]
    assert "-c constraints-colab.txt" in lines
    assert [n for n in names if "==" not in n and n.lower() not in colab] == []
    assert {name: colab[name] for name in ("tensorflow", "keras", "numpy", "jax", "mlxtend")} == {
        "tensorflow": "2.20.0",
        "keras": "3.13.2",
        "numpy": "2.1.3",
        "jax": "0.7.2",
        "mlxtend": "0.23.4",
    }
    assert "torch" not in colab  # a CUDA build on Colab: the book's CPU wheel stands in
