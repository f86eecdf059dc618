"""Import tensorflow-datasets where it does not import as installed (chapter 7).

On Colab's runtime of 2026 (googlecolab/backend-info a724079), tensorflow-datasets 4.9.10
fails twice: tensorflow-metadata 1.21.0 was generated with protobuf 6.31.1 and checks for it
at import, while Colab has protobuf 5.29.6 (tensorflow/metadata#68); and writing a dataset
needs `importlib_resources`, which Colab does not have. What is missing is installed with pip
into a folder of this user's own (`utils.data.BOOK_CACHE`), put first on `sys.path` of this
process only: no installed package changes. A folder that already holds the wanted versions
is used as it is, so the processes a chapter starts do not run pip again.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

from utils.data import BOOK_CACHE

#: the newest tensorflow-metadata whose generated code imports with protobuf 5.29
WORKING_METADATA = "tensorflow-metadata==1.17.3"
#: what tensorflow-datasets imports when it writes a dataset, not among its requirements
IMPORTLIB_RESOURCES = "importlib_resources==7.1.0"
#: what protobuf says when generated code is newer than the installed runtime: 5.29.6
#: "... Protobuf Gencode/Runtime versions ...", 5.26 to 5.29.5 "... Gencode/Runtime major
#: versions ..."
_GENCODE_MISMATCH = "Gencode/Runtime"


def repairs_needed() -> list[str]:
    """The packages tensorflow-datasets needs here and lacks: `WORKING_METADATA` if the
    installed tensorflow-metadata needs a newer protobuf, `IMPORTLIB_RESOURCES` if it is
    missing. Any other failure to import tensorflow-metadata is raised as it is."""
    needed = []
    try:
        importlib.import_module("tensorflow_metadata.proto")
    except (
        Exception
    ) as error:  # protobuf raises its own VersionError, not an ImportError
        if _GENCODE_MISMATCH not in str(error):
            raise
        needed.append(WORKING_METADATA)
    if importlib.util.find_spec("importlib_resources") is None:
        needed.append(IMPORTLIB_RESOURCES)
    return needed


def import_tensorflow_datasets(
    folder: str | Path | None = None, *, timeout_s: float = 300
):
    """`tensorflow_datasets`, imported, after installing what `repairs_needed` names into
    `folder` (by default `BOOK_CACHE/tfds-repairs`, this user's), put first on `sys.path`."""
    needed = repairs_needed()
    if needed:
        _install(needed, Path(folder or BOOK_CACHE / "tfds-repairs"), timeout_s)
        if WORKING_METADATA in needed:
            found = importlib.metadata.version("tensorflow-metadata")
            if found != WORKING_METADATA.split("==")[1]:
                raise ImportError(
                    f"tensorflow-metadata {found} was imported where {WORKING_METADATA} "
                    f"was installed: remove the folder {folder or BOOK_CACHE / 'tfds-repairs'} "
                    "and run again."
                )
    tfds = importlib.import_module("tensorflow_datasets")
    if not hasattr(tfds, "load"):  # its __init__ logs its own failure and goes on
        raise ImportError(
            "tensorflow_datasets failed to import: see the error logged above."
        )
    return tfds


def _install(requirements: list[str], folder: Path, timeout_s: float) -> None:
    """pip install `requirements` into `folder` (unless it holds them already), first on
    sys.path, and forget the halves of tensorflow_metadata a failed import left in
    sys.modules."""
    wanted = [
        r.replace("-", "_").replace("==", "-") + ".dist-info" for r in requirements
    ]
    if not all((folder / name).is_dir() for name in wanted):
        _pip_install(requirements, folder, timeout_s)
    sys.path.insert(0, str(folder))
    for name in [m for m in sys.modules if m.startswith("tensorflow_metadata")]:
        del sys.modules[name]


def _pip_install(requirements: list[str], folder: Path, timeout_s: float) -> None:
    """pip install `requirements` into `folder`, replacing what is there."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    command += ["--no-deps", "--upgrade", "--target", str(folder), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if result.returncode:
        raise RuntimeError(
            f"tensorflow-datasets needs {', '.join(requirements)} here, and pip could not "
            f"install them: {result.stderr.strip()[-500:]} Without a network, download their "
            "wheels beforehand and point pip at them (PIP_FIND_LINKS)."
        )
