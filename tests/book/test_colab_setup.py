"""The Colab branch of the chapters' setup cell, executed: `google.colab` faked and the book
cloned from this checkout instead of GitHub. It must leave every package of the runtime as it
found it: Colab has already imported some of them (numpy among them) when the cell runs, and
the chapters are tested against Colab's versions (CI's Colab-runtime step runs this file in
that environment too, `.ci/run`)."""

import json
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.helpers import ROOT

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def colab_block(path):
    """The `if "google.colab" ...:` block of a chapter's first code cell."""
    cells = json.loads(path.read_text())["cells"]
    setup = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    block = setup[setup.index('if "google.colab"') :]
    return block[: block.index("\nif ") + 1], setup


def test_every_chapter_has_the_same_colab_block():
    blocks = {colab_block(path)[0] for path in CHAPTERS}
    assert len(blocks) == 1, "the chapters' setup cells differ in their Colab block"


def test_the_colab_block_installs_nothing():
    block, _ = colab_block(CHAPTERS[0])
    assert not re.search(r"\b(pip|conda|install|uv)\b", block), (
        "the Colab branch must not install packages: Colab's own versions are the ones the "
        "chapters are tested against (constraints-colab.txt)"
    )


# starts a Python program, yet not `full`: CI's step 3 runs it with Colab's versions
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to clone from")
def test_colab_branch_clones_imports_utils_and_changes_no_package(tmp_path):
    _, setup = colab_block(CHAPTERS[0])
    content = tmp_path / "content"  # Colab's working disk
    content.mkdir()
    cell = setup.replace(URL, f"file://{ROOT}").replace("/content", str(content))
    program = textwrap.dedent(f"""
        import importlib.metadata, json, os, sys, types
        sys.modules["google.colab"] = types.ModuleType("google.colab")  # what Colab has
        from IPython.core.interactiveshell import InteractiveShell

        def packages():
            return sorted({{(d.metadata["Name"].lower(), d.version)
                           for d in importlib.metadata.distributions()}})

        before = packages()
        shell = InteractiveShell.instance()
        shell.run_cell({cell!r}).raise_error()
        import utils
        print("UTILS", os.path.dirname(utils.__file__))
        print("CWD", os.getcwd())
        shell.run_cell({cell!r}).raise_error()  # run again: no second clone
        changed = sorted(set(before) ^ set(packages()))
        print("CHANGED", json.dumps(changed), "OF", len(before))
    """)
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    clone = content / "multigpu-book"
    assert f"UTILS {clone / 'utils'}" in result.stdout
    assert f"CWD {clone / 'chapters'}" in result.stdout
    assert "setup_devices(1): 1 logical CPU" in result.stdout
    changed = re.search(r"CHANGED (.*) OF (\d+)", result.stdout)
    assert json.loads(changed.group(1)) == [] and int(changed.group(2)) > 50
