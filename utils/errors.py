"""The line of a long error that says what went wrong: of an exception (TensorFlow's span
many lines; chapter 3, used by chapters 4, 10 and 19 and the multi_gpu_model appendix), or of
a failed program's output (`utils.launch.run_processes`)."""

from __future__ import annotations

import re


def error_line(err: BaseException, containing: str | None = None) -> str:
    """The line of an error message that says what went wrong, without TensorFlow's node names.

    Introduced in chapter 3. TensorFlow errors span many lines of graph node names; this
    returns the first non-empty line, or with `containing`, the first line that contains it
    (falling back to the first line when none does). A distributed value printed in the
    message (`PerReplica:{ 0: <tf.Tensor ...> }`, many lines) is shortened to `PerReplica:{...}`.
    """
    message = getattr(err, "message", None) or str(err)
    text = re.sub(r"\{\{[^}]*\}\}\s*", "", message)
    text = re.sub(r"(PerReplica|Mirrored):\{\n.*?\n\}", r"\1:{...}", text, flags=re.S)
    lines = _lines(text)
    if not lines:
        return type(err).__name__
    chosen = next(
        (line for line in lines if containing and containing in line), lines[0]
    )
    return re.split(r"\s\[(?:\[|Op:)", chosen)[0]


#: A line that names a Python exception, as a traceback's last line does.
EXCEPTION_LINE = re.compile(r"\b\w*(Error|Exception)\b: ")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def output_error_line(text: str) -> str:
    """The first line of a failed program's output that names a Python exception, else its
    last line (a program may fail without a traceback)."""
    lines = _lines(text)
    errors = [line for line in lines if EXCEPTION_LINE.search(line)]
    return (errors or lines or ["(no output)"])[0 if errors else -1]
