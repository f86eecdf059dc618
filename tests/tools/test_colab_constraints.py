"""tools.colab_constraints: Colab's pip freeze turned into constraints pip can take."""

from tools import colab_constraints

FREEZE = """\
# Do not modify this file directly
absl-py==1.4.0
google-colab @ file:///colabtools/dist/google_colab-1.0.0.tar.gz
numpy==2.1.3
pip==24.1.2
setuptools==75.2.0
torch==2.11.0+cu128
torchvision==0.26.0+cu128
"""


def test_kept_are_the_pinned_packages_pip_can_install_here():
    kept, dropped = colab_constraints.constraints(FREEZE)
    assert kept == ["absl-py==1.4.0", "numpy==2.1.3"]
    assert len(dropped) == 5  # a URL, the installer's tools, the CUDA builds


def test_the_file_names_its_source_and_what_it_left_out(tmp_path, monkeypatch, capsys):
    freeze = tmp_path / "pip-freeze.gpu.txt"
    freeze.write_text(FREEZE)
    output = tmp_path / "constraints-colab.txt"
    monkeypatch.setattr(colab_constraints, "OUTPUT", output)
    colab_constraints.main([str(freeze), "--source", "commit abc, 2026-08-19"])
    text = output.read_text()
    assert "(commit abc, 2026-08-19)" in text
    assert "CUDA builds (torch, torchvision)" in text and "pip, setuptools, wheel" in text
    assert text.splitlines()[-2:] == ["absl-py==1.4.0", "numpy==2.1.3"]
    assert "2 constraints; left out: 5" in capsys.readouterr().out
