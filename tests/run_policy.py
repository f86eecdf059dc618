"""How the suite runs: a pytest plugin (conftest.py loads it).

- The two tiers: without --full, the tests marked `full` are left out and the rendered
  book's module is not even imported; the report's header says which tier runs.
- The pytest-xdist workers: how many `-n auto` starts, the cores each one's processes use
  (threads per operation, PyTorch's and TensorFlow's), and the order the files are handed
  out in (the long ones first).
- One temporary folder for every kernel and process, removed at the end (tests/helpers.py).
- The time each part of the suite took, at the end of the report.
"""

import os

from tests.helpers import count_nvidia_gpus, temporary_files_in_one_folder

# how the test ids of the chapters and of their papermill runs begin
CHAPTERS, PAPERMILL_RUNS = "chapters/", "tests/book/test_knobs.py"
#: the rendered book's tests (a build and a browser): only in the full proof
RENDERED_BOOK = "tests/book/test_rendered_book.py"


def pytest_xdist_auto_num_workers(config):
    """How many pytest-xdist workers `-n auto` (pytest.ini) starts: one per CPU core, at most
    4 (each runs TensorFlow in its own kernel). None on a GPU machine: the notebooks would
    share its GPUs, so there they run one after another."""
    cores = os.cpu_count() or 1
    return 0 if cores < 2 or count_nvidia_gpus() else min(cores, 4)


def pytest_ignore_collect(collection_path, config):
    """The rendered book's tests (a build and a browser) are the full proof's: without
    --full, their module is not even imported, so a machine without Chromium is fine."""
    if collection_path.name == "test_rendered_book.py" and not config.getoption("full"):
        return True
    return None


def pytest_configure(config):
    """Temporary files go to one folder removed at the end (tests/helpers.py), and a
    pytest-xdist worker's processes take its share of the cores."""
    temporary_files_in_one_folder(config)
    share_the_cores(config)


#: The thread counts each pytest-xdist worker's processes take: PyTorch's (OpenMP) and
#: TensorFlow's threads for the work inside one operation.
THREAD_SETTINGS = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


def share_the_cores(config) -> None:
    """On a pytest-xdist worker, give the processes it starts (kernels, DDP ranks) its share
    of the cores as threads per operation, as torchrun does for its workers with OpenMP's:
    threads that spin while they wait make two workers that each use every core slow each
    other down (chapter 18's training cell: 199 s beside a busy core, 6.5 s alone; the
    chapters together: 292 s with TensorFlow's default, 251 s with its share). A value the
    reader set is kept."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers and workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        for setting in THREAD_SETTINGS:
            os.environ.setdefault(setting, str(threads))


def _runs_notebooks(item) -> bool:
    """Whether `item` executes a whole chapter: its nbval cells, or a papermill run of it."""
    return item.nodeid.startswith((CHAPTERS, PAPERMILL_RUNS))


def pytest_collection_modifyitems(session, config, items):
    """Without --full, leave out what only the full proof runs (tests marked `full`), and
    start with the files that run chapters.

    pytest-xdist hands out whole files (pytest.ini: --dist loadfile, in collection order with
    --no-loadscope-reorder). A chapter takes 15 s to 2 min and a unit-test file seconds, so
    with the chapters first the short files fill in at the end while the other worker
    finishes its last chapter, instead of one worker running a long chapter alone. The
    files with tests marked `full` (launches, a Slurm cluster, the GPU evidence's dry run: up
    to 2 min each) go first too, for the same reason.
    """
    if not config.getoption("full"):
        left_out = [item for item in items if item.get_closest_marker("full")]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker("full")]
    long_files = {item.path for item in items if item.get_closest_marker("full")}
    items.sort(key=lambda item: not (_runs_notebooks(item) or item.path in long_files))


def pytest_report_header(config):
    """Say which tier runs: the reader's check, or the full proof (--full)."""
    if config.getoption("full"):
        return "the full proof: every chapter twice, and the tests marked `full`"
    return (
        "the reader's check: each chapter once, and the unit and structure tests "
        "(the full proof: pytest --full, CONTRIBUTING.md)"
    )


_SECONDS_BY_PART: dict[str, float] = {}


def _part(nodeid: str) -> str:
    """Which part of the suite a test belongs to, for the time summary."""
    if nodeid.startswith(CHAPTERS):
        if nodeid.endswith("Run all again, other knobs"):
            return "chapters, run again with other knobs"
        return "chapters (nbval)"
    if nodeid.startswith(RENDERED_BOOK):
        return "book build and browser"
    if nodeid.startswith(PAPERMILL_RUNS):
        return "chapters with other knobs (papermill)"
    return "unit and structure tests"


def pytest_runtest_logreport(report):
    _SECONDS_BY_PART[_part(report.nodeid)] = (
        _SECONDS_BY_PART.get(_part(report.nodeid), 0.0) + report.duration
    )


def pytest_terminal_summary(terminalreporter):
    """Print the time each part of the suite took."""
    if _SECONDS_BY_PART:
        terminalreporter.section("time per part")
        workers = terminalreporter.config.option.numprocesses
        if workers:
            terminalreporter.write_line(
                f"(test time summed over {workers} pytest-xdist "
                "workers side by side: more than the wall time)"
            )
        for part, seconds in sorted(_SECONDS_BY_PART.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:8.0f} s  {part}")
