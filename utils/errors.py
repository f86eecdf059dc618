"""Reading TensorFlow's long error messages (chapter 3; used by chapters 4, 6, 10 and 12)."""

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
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    chosen = next(
        (line for line in lines if containing and containing in line), lines[0]
    )
    return re.split(r"\s\[(?:\[|Op:)", chosen)[0]
