"""How nbval runs the chapters: a pytest plugin (conftest.py loads it).

- Outputs are compared by tests/output_policy.py: nbval's sanitizer returns text whose `!=`
  applies it, with a cell's `difference_bound`.
- Kernels talk over Unix sockets in the suite's temporary folder (no TCP port to race for),
  start one at a time across the pytest-xdist workers, and a kernel that dies while
  starting is started once more and says why.
- The kernel clients run no heartbeat channel.
- stderr is not compared, and each notebook's items carry the marker `chapter`.
- On a GPU machine, nbval's lax mode (BOOK_NBVAL_STRICT=1 compares anyway).
- In the full proof (--full), each notebook's cells are followed by `RunAllAgain`: all its
  code cells once more, in the same kernel, with the knobs of tests/other_knobs.py.

nbval and jupyter_client are patched when this module is imported, before any kernel starts.
"""

import fcntl
import os
import tempfile

import nbformat
import pytest
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.channels import HBChannel
from jupyter_client.manager import KernelManager
from nbconvert.filters import strip_ansi
from nbval import kernel as nbval_kernel
from nbval.plugin import IPyNbCell

from tests.helpers import count_nvidia_gpus
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


def _kernel_on_unix_sockets(**kwargs) -> KernelManager:
    """nbval's kernel manager, with the kernel's channels on Unix sockets in the suite's
    temporary folder instead of TCP ports. Over TCP, jupyter_client picks free ports before
    the kernel binds them, so anything that takes one in between (another kernel starting,
    or one of the ports the chapters' DDP programs and torchrun pick the same way) leaves a
    kernel that never answers or dies at its start (jupyter/jupyter_client#487; seen here
    as "Kernel didn't respond in 60 seconds" for every cell of a chapter, and once as
    "Kernel died before replying to kernel_info" for chapter 18 on a loaded machine).
    Socket files in the suite's own folder are taken by nothing else."""
    folder = os.environ.get("TMPDIR", tempfile.gettempdir())
    return KernelManager(transport="ipc", ip=os.path.join(folder, "kernel"), **kwargs)


nbval_kernel.KernelManager = _kernel_on_unix_sockets
_nbval_start_new_kernel = nbval_kernel.start_new_kernel
#: one file for every pytest-xdist worker (and any suite running beside this one)
KERNEL_START_LOCK = "/tmp/multigpu-book-kernel-start.lock"


def _start_new_kernel_alone(*args, **kwargs):
    """nbval's kernel start, one at a time across pytest-xdist workers: a kernel's socket
    files are named before it creates them, so two kernels starting at once in one folder
    could pick the same names (each worker has its own temporary folder; the lock covers a
    suite run without one, and spreads the starts' load).

    nbval sends the kernel's stderr to /dev/null, so a kernel that died while starting
    said nothing: its stderr goes to a file instead, a failed start is tried once more, and
    a second failure raises with the tail of both starts' stderr."""
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


def pytest_configure(config):
    """On a GPU machine, run every notebook cell but compare printed outputs only where asked.

    The committed outputs come from the book's CPU machine. On GPUs the same code prints
    other device names and slightly different floating-point numbers, so there nbval runs
    in its lax mode: every cell still executes and every assertion in it is checked, but
    only cells tagged `nbval-check-output` are compared. Set BOOK_NBVAL_STRICT=1 to
    compare everything anyway.
    """
    if getattr(config.option, "nbval", False) and os.environ.get("BOOK_NBVAL_STRICT") != "1":
        gpus = count_nvidia_gpus()
        if gpus:
            config.option.nbval_lax = True
            print(
                f"{gpus} NVIDIA GPU(s) found: notebooks run in nbval's lax mode "
                "(all cells and assertions run; outputs compared only where marked)."
            )


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


def pytest_collection_modifyitems(session, config, items):
    """Do not compare stderr in notebooks (TensorFlow logs to it nondeterministically), mark
    each chapter's items `chapter`, and with --full follow each notebook's cells with a
    second run of all of them, with other knobs (marked `chapter` and `full`).

    tests/run_policy.py's hook has already left out what only the full proof runs and put
    the files that run chapters first (conftest.py registers it after this module, and pytest
    calls the plugin registered last first); a notebook's cells stay together either way."""
    full = config.getoption("full")
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
