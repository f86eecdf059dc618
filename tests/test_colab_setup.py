"""The Colab branch of the chapters' setup cell, executed: `google.colab` faked, the book
cloned from this checkout instead of GitHub, and `%pip install` stood in for (Colab has the
network; the test suite does not)."""

import json
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
    block = setup[setup.index('if "google.colab"'):]
    return block[: block.index("\nif ") + 1], setup


def test_every_chapter_has_the_same_colab_block():
    blocks = {colab_block(path)[0] for path in CHAPTERS}
    assert len(blocks) == 1, "the chapters' setup cells differ in their Colab block"


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to clone from")
def test_colab_branch_clones_installs_and_imports_utils(tmp_path):
    _, setup = colab_block(CHAPTERS[0])
    content = tmp_path / "content"  # Colab's working disk
    content.mkdir()
    cell = setup.replace(URL, f"file://{ROOT}").replace("/content", str(content))
    program = textwrap.dedent(f"""
        import os, sys, types
        sys.modules["google.colab"] = types.ModuleType("google.colab")  # what Colab has
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance()
        installs = []

        def pip(line):  # stands in for %pip: records the call, checks the file exists
            requirements = line.split("-r", 1)[1].strip()
            assert os.path.isfile(requirements), requirements
            installs.append(line)

        shell.register_magic_function(pip, "line", "pip")
        shell.run_cell({cell!r}).raise_error()
        import utils
        print("UTILS", os.path.dirname(utils.__file__))
        print("CWD", os.getcwd())
        print("PIP", installs)
        shell.run_cell({cell!r}).raise_error()  # run again: no second clone or install
        print("PIP AGAIN", installs)
    """)
    result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    clone = content / "multigpu-book"
    assert f"UTILS {clone / 'utils'}" in result.stdout
    assert f"CWD {clone / 'chapters'}" in result.stdout
    installed = f"['install --quiet -r {clone / 'requirements-colab.txt'}']"
    assert f"PIP {installed}" in result.stdout and f"PIP AGAIN {installed}" in result.stdout
    assert "setup_devices(1): 1 logical CPU" in result.stdout
