"""utils.tfds_import: tensorflow-datasets imported where it does not import as installed.

In the book's environment nothing is repaired. In Colab's versions (CI's Colab-versions
step, whose pip finds the wheels offline) tensorflow-metadata fails to import and writing a
dataset lacks importlib_resources: the test shows the failure, then the repair.
"""

import subprocess
import sys

import pytest

from tests.helpers import run_fresh
from utils import tfds_import
from utils.tfds_import import import_tensorflow_datasets, repairs_needed

COLAB_LIKE = bool(repairs_needed())


@pytest.mark.skipif(COLAB_LIKE, reason="this environment needs the repair")
def test_nothing_is_installed_where_tensorflow_datasets_imports(monkeypatch):
    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran")

    monkeypatch.setattr(tfds_import.subprocess, "run", no_pip)
    assert hasattr(import_tensorflow_datasets(), "load")


@pytest.mark.skipif(not COLAB_LIKE, reason="tensorflow-datasets imports here as installed")
def test_colabs_versions_fail_and_the_repair_writes_and_reads_a_dataset(tmp_path):
    failed = run_fresh("import tensorflow_metadata.proto")
    assert failed.returncode != 0 and "Protobuf Gencode/Runtime versions" in failed.stderr
    repaired = run_fresh(f"""
        import numpy as np
        import tensorflow as tf
        from utils import import_tensorflow_datasets

        tfds = import_tensorflow_datasets({str(tmp_path / "repairs")!r})
        images = {{"image": np.zeros((8, 4, 4, 1), np.uint8), "label": np.arange(8) % 2}}
        tfds.dataset_builders.store_as_tfds_dataset(
            name="tiny",
            version="1.0.0",
            features=tfds.features.FeaturesDict({{
                "image": tfds.features.Image(shape=(4, 4, 1)),
                "label": tfds.features.ClassLabel(num_classes=2),
            }}),
            split_datasets={{"train": tf.data.Dataset.from_tensor_slices(images)}},
            data_dir={str(tmp_path / "data")!r},
            download_config=tfds.download.DownloadConfig(num_shards=2),
        )
        read = tfds.load("tiny", split="train", data_dir={str(tmp_path / "data")!r})
        print("examples read:", sum(1 for _ in read))
    """)
    assert "examples read: 8" in repaired.stdout, repaired.stderr[-3000:]


def test_another_import_error_is_raised_as_it_is(monkeypatch):
    def broken(name):
        raise ImportError("No module named 'tensorflow_metadata'")

    monkeypatch.setattr(tfds_import.importlib, "import_module", broken)
    with pytest.raises(ImportError, match="No module named 'tensorflow_metadata'"):
        import_tensorflow_datasets()


def test_a_failed_repair_says_what_to_install_and_how_offline(monkeypatch, tmp_path):
    def version_error(name):
        raise RuntimeError("Detected incompatible Protobuf Gencode/Runtime versions")

    monkeypatch.setattr(tfds_import.importlib, "import_module", version_error)
    monkeypatch.setattr(
        tfds_import.subprocess,
        "run",
        lambda *args, **kwargs: subprocess.CompletedProcess(args, 1, "", "no network"),
    )
    with pytest.raises(RuntimeError, match="tensorflow-metadata==1.17.3.*PIP_FIND_LINKS"):
        import_tensorflow_datasets(tmp_path)


@pytest.mark.parametrize(
    "message",
    [
        "Detected incompatible Protobuf Gencode/Runtime versions when loading x.proto",
        "Detected mismatched Protobuf Gencode/Runtime major versions when loading x.proto",
    ],
)
def test_both_protobuf_wordings_call_for_the_repair(monkeypatch, message):
    """protobuf 5.29.6 and 5.26 to 5.29.5 word the mismatch differently."""

    def version_error(name):
        raise RuntimeError(message)

    monkeypatch.setattr(tfds_import.importlib, "import_module", version_error)
    assert tfds_import.WORKING_METADATA in repairs_needed()


def test_a_folder_that_holds_the_repair_runs_no_pip(monkeypatch, tmp_path):
    """The processes a chapter starts find the folder filled and do not run pip again."""
    for name in ("tensorflow_metadata-1.17.3.dist-info", "importlib_resources-7.1.0.dist-info"):
        (tmp_path / name).mkdir()

    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran")

    monkeypatch.setattr(tfds_import.subprocess, "run", no_pip)
    monkeypatch.setattr(sys, "path", list(sys.path))
    tfds_import._install(
        [tfds_import.WORKING_METADATA, tfds_import.IMPORTLIB_RESOURCES], tmp_path, 10
    )
    assert sys.path[0] == str(tmp_path)
