"""pytest configuration shared by the unit tests and nbval."""

import fcntl
import os
import tempfile

import nbformat
import pytest
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.channels import HBChannel
from nbconvert.filters import strip_ansi
from nbval import kernel as nbval_kernel
from nbval.plugin import IPyNbCell

from tests.helpers import count_nvidia_gpus, temporary_files_in_one_folder
from tests.other_knobs import assignments
from tests.output_policy import TolerantText

_nbval_sanitize = IPyNbCell.sanitize


def _sanitize_for_the_output_policy(self, text):
    """nbval's sanitizer, returning text whose `!=` follows tests/output_policy.py, with
    the cell's `difference_bound` where its metadata gives one."""
    sanitized = _nbval_sanitize(self, text)
    if not isinstance(sanitized, str):
        return sanitized
    return TolerantText(sanitized, self.cell.metadata.get("difference_bound"))


# nbval compares sanitized outputs with `!=`: this is how floats get a tolerance.
IPyNbCell.sanitize = _sanitize_for_the_output_policy

_nbval_start_new_kernel = nbval_kernel.start_new_kernel
#: one file for every pytest-xdist worker (and any suite running beside this one)
KERNEL_START_LOCK = "/tmp/multigpu-book-kernel-start.lock"


def _start_new_kernel_alone(*args, **kwargs):
    """nbval's kernel start, one at a time across pytest-xdist workers: jupyter_client
    picks free ports before the kernel binds them, so two kernels starting at once can
    pick the same ones and one never answers (jupyter/jupyter_client#487; seen here as
    "Kernel didn't respond in 60 seconds" for every cell of a chapter).

    nbval sends the kernel's stderr to /dev/null, so a kernel that died while starting
    said nothing ("Kernel died before replying to kernel_info", seen once for chapter 18 on
    a loaded machine): its stderr goes to a file instead, a failed start is tried once
    more, and a second failure raises with the tail of both starts' stderr."""
    said = []
    for attempt in (1, 2):
        with tempfile.TemporaryFile("w+") as stderr:
            kwargs["stderr"] = stderr  # the kernel keeps its own descriptor to the file
            try:
                with open(KERNEL_START_LOCK, "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                    return _nbval_start_new_kernel(*args, **kwargs)
            except RuntimeError as error:
                stderr.seek(0)
                said.append(f"start {attempt}: {error}; its stderr ends:\n{stderr.read()[-2000:]}")
    raise RuntimeError("the kernel did not start twice:\n" + "\n".join(said))


nbval_kernel.start_new_kernel = _start_new_kernel_alone


class _NoHeartbeat(HBChannel):
    """The kernel clients' heartbeat channel, never started. Its thread can block for good
    in a send to a kernel that missed a beat under load, and stop_channels() then waits for
    it: a CI run here hung in nbval's teardown that way. Nothing in the tests needs it:
    nbval and nbclient (papermill) start local kernels, whose managers poll the process."""

    def start(self) -> None:
        """Not started, so stop_channels() skips it (its thread is not alive)."""


for _client in (BlockingKernelClient, AsyncKernelClient):  # nbval's, and nbclient's
    _client.hb_channel_class = _NoHeartbeat


def pytest_xdist_auto_num_workers(config):
    """How many pytest-xdist workers `-n auto` (pytest.ini) starts: one per CPU core, at most
    4 (each runs TensorFlow in its own kernel). None on a GPU machine: the notebooks would
    share its GPUs, so there they run one after another."""
    cores = os.cpu_count() or 1
    return 0 if cores < 2 or count_nvidia_gpus() else min(cores, 4)


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="the full proof (CI, and contributors before a change lands): also run each "
        "chapter a second time with other knobs, and the tests marked `full` (papermill's "
        "device counts, the recipes launched end to end, the rendered book in a browser), "
        "which run only with this option, even when named",
    )


def pytest_ignore_collect(collection_path, config):
    """The rendered book's tests (a build and a browser) are the full proof's: without
    --full, their module is not even imported, so a machine without Chromium is fine."""
    if collection_path.name == "test_rendered_book.py" and not config.getoption("full"):
        return True
    return None


def pytest_configure(config):
    """Temporary files go to one folder removed at the end (tests/helpers.py). On a GPU
    machine, run every notebook cell but compare printed outputs only where asked.

    The committed outputs come from the book's CPU machine. On GPUs the same code prints
    other device names and slightly different floating-point numbers, so there nbval runs
    in its lax mode: every cell still executes and every assertion in it is checked, but
    only cells tagged `nbval-check-output` are compared. Set BOOK_NBVAL_STRICT=1 to
    compare everything anyway.
    """
    temporary_files_in_one_folder(config)
    share_the_cores(config)
    if getattr(config.option, "nbval", False) and os.environ.get("BOOK_NBVAL_STRICT") != "1":
        gpus = count_nvidia_gpus()
        if gpus:
            config.option.nbval_lax = True
            print(
                f"{gpus} NVIDIA GPU(s) found: notebooks run in nbval's lax mode "
                "(all cells and assertions run; outputs compared only where marked)."
            )


def share_the_cores(config) -> None:
    """On a pytest-xdist worker, give the processes it starts (kernels, DDP ranks) its share
    of the cores as OpenMP threads, as torchrun does for its workers: PyTorch's OpenMP threads
    spin while they wait, so two workers each using every core slow each other down many
    times (chapter 18's training cell: 199 s beside a busy core, 6.5 s alone). A value the
    reader set is kept."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers and workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


class RunAllAgain(pytest.Item):
    """After nbval has run a notebook, turn its knobs and run all its code cells again.

    Readers change a value in the `parameters` cell and press "Run all" again, in the same
    kernel. The second run does that with the values in tests/other_knobs.py, put in right
    after the `parameters` cell: every assertion must hold for them, and nothing may fail
    for having run before (device setup repeated, files already written, settings changed).
    Outputs are not compared: they depend on the knobs.
    """

    def runtest(self):
        notebook = nbformat.read(str(self.parent.fspath), as_version=4)
        knobs = assignments(self.parent.fspath.purebasename)
        for index, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
            self._run(cell.source, f"code cell {index}", knobs)
            if "parameters" in cell.metadata.get("tags", ()) and knobs:
                self._run(knobs, "the other knobs", knobs)

    def _run(self, source, what, knobs):
        kernel = self.parent.kernel
        timeout = self.config.option.nbval_cell_timeout
        msg_id = kernel.execute_cell_input(source, allow_stdin=False)
        while True:
            reply = kernel.get_message(stream="shell", timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        kernel.await_idle(msg_id, timeout)
        if reply["content"]["status"] == "error":
            raise AssertionError(failure_message(what, knobs, reply["content"]))

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, 0, f"{self.parent.name}::Run all again, other knobs"


def failure_message(what: str, knobs: str, error: dict) -> str:
    """What a failed cell of the second run reports: the kernel's traceback, without its
    colour codes, which shows the line that failed (a bare `assert` has no message)."""
    return f"{what} failed when run again with {knobs!r}:\n" + strip_ansi(
        "\n".join(error["traceback"])
    )


# how the test ids of the chapters and of their papermill runs begin
CHAPTERS, PAPERMILL_RUNS = "chapters/", "tests/book/test_knobs.py"


def _runs_notebooks(item) -> bool:
    """Whether `item` executes a whole chapter: its nbval cells, or a papermill run of it."""
    return item.nodeid.startswith((CHAPTERS, PAPERMILL_RUNS))


def pytest_collection_modifyitems(session, config, items):
    """Do not compare stderr in notebooks (TensorFlow logs to it nondeterministically),
    mark each chapter's items `chapter`, start with the files that run chapters, and
    without --full leave out what only the full proof runs (tests marked `full`); with it,
    follow each notebook's cells with a second run of all of them, with other knobs.

    pytest-xdist hands out whole files (pytest.ini: --dist loadfile, in collection order with
    --no-loadscope-reorder). A chapter takes 15 s to 2 min and a unit-test file seconds, so
    with the chapters first the short files fill in at the end while the other worker
    finishes its last chapter, instead of one worker running a long chapter alone. The
    files with tests marked `full` (launches, a Slurm cluster, the GPU evidence's dry run: up
    to 2 min each) go first too, for the same reason.
    """
    full = config.getoption("full")
    if not full:
        left_out = [item for item in items if item.get_closest_marker("full")]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker("full")]
    long_files = {item.path for item in items if item.get_closest_marker("full")}
    items.sort(key=lambda item: not (_runs_notebooks(item) or item.path in long_files))
    extended = []
    for position, item in enumerate(items):
        extended.append(item)
        notebook = getattr(item, "parent", None)
        if not hasattr(notebook, "skip_compare"):
            continue
        item.add_marker("chapter")
        if "stderr" not in notebook.skip_compare:
            notebook.skip_compare = (*notebook.skip_compare, "stderr")
        following = items[position + 1] if position + 1 < len(items) else None
        if full and getattr(following, "parent", None) is not notebook:
            again = RunAllAgain.from_parent(notebook, name="Run all again, other knobs")
            again.add_marker("chapter")
            again.add_marker("full")
            extended.append(again)
    items[:] = extended


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
    if nodeid.startswith("tests/book/test_rendered_book.py"):
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
