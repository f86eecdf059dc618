"""The book's output policy: how a re-run chapter's printed output is compared with the
committed one. Declared here once; tests/nbval_policy.py makes nbval use it.

Committed outputs come from one machine; readers re-run them on other CPUs, thread counts,
kernel libraries and library versions, where float results differ in their last digits.
After nbval_sanitize.cfg has masked what is not a result (durations, clock times,
addresses, ratios of timings), every line must keep its text, and each number printed in it
is compared by its kind (`printed_numbers`):

- **integer** (counts, shapes, epochs, indices): exactly.
- **zero**, a zero in scientific notation (`0e+00`): in a cell that asserts the result
  exactly (`== 0`), it must stay exactly zero.
- **difference**, any other number in scientific notation: throughout the book, the size
  of a difference between two computations (`largest weight difference 4e-03`). Rounding
  noise: its digits change with the kernels and the thread count, and training amplifies
  it. Two match when they are within `DIFFERENCE_FACTOR` of each other, or both at most
  `ROUNDING_FLOOR` (rounding of a single float32 computation, where 4e-08 and 0e+00 are the
  same finding).
- **percent** (an accuracy): within `PERCENT_POINTS` points.
- **decimal** (a loss, a mean, a rate): within `RELATIVE` of the committed value, or one
  unit of its last printed digit.

Exactness is the assertion's job. A cell that claims a bound rather than an exact result
(`assert gap < 1e-5`) says so in its metadata, `"difference_bound": 1e-05`, the bound it
asserts: there a printed zero is a difference like any other, and any two differences at
most that bound are the same finding ("below the bound"), whatever each machine's rounding
printed (0e+00 with TensorFlow's own kernels, 4e-06 with oneDNN's). Without it, a printed
zero is compared exactly, and the cell asserts `== 0` (tests/book/test_notebooks.py checks that
each printed zero is one or the other). The bound applies to every difference the cell
prints, so each of them is asserted: below the bound, exactly, or far above it.

Each tolerance is the largest variation measured between real runs of the chapters
(`python -m tools.output_variation`: 1, 2 and 8 threads, oneDNN's kernels on and off,
Colab's library versions), rounded up; tests/suite/test_output_policy.py holds those
measurements and the regressions that must still fail. What a chapter claims is asserted
in its own cells; this comparison keeps the printed numbers honest.
"""

from __future__ import annotations

import re

#: Differences (scientific notation) may differ by this factor. Measured: up to 20x
#: (chapter 3's loss difference after training: 4e-05 with oneDNN, 2e-06 without).
DIFFERENCE_FACTOR = 25.0
#: Differences at most this large are all rounding of one float32 computation.
ROUNDING_FLOOR = 1e-6
#: Accuracies may differ by this many percentage points. Measured: up to 3.1 (chapter 12's
#: largest batch with a scaled learning rate: 92.4% on 2 threads, 89.3% on 1 with oneDNN).
PERCENT_POINTS = 3.5
#: Other decimals may differ by this fraction of the committed value. Measured: 0.03%.
RELATIVE = 0.01

# A number that is not part of a word or of a dotted version string such as 2.21.0.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.]*\d)")


def printed_numbers(line: str) -> list[tuple[str, str]]:
    """Each number printed in `line` with its kind: "integer", "zero", "difference",
    "percent" or "decimal" (the module's docstring says what each means)."""
    found = []
    for match in NUMBER.finditer(line):
        token = match.group()
        scientific = "e" in token.lower()
        if not (scientific or "." in token):
            kind = "integer"
        elif scientific:
            kind = "zero" if float(token) == 0 else "difference"
        elif line[match.end() : match.end() + 1] == "%":
            kind = "percent"
        else:
            kind = "decimal"
        found.append((token, kind))
    return found


def _last_digit_unit(token: str) -> float:
    """The value of one unit in the last printed digit: 0.1 for 92.7, 0.0001 for 0.3944."""
    return 10.0 ** -len(token.partition(".")[2])


def numbers_match(reference: str, actual: str, kind: str, bound: float | None = None) -> bool:
    """Whether `actual` agrees with the committed `reference`, a number of `kind`, in a
    cell that asserts its differences below `bound` (None: a printed zero is exact)."""
    if bound is not None and kind == "zero":
        kind = "difference"
    if kind in ("integer", "zero") or reference == actual:
        return reference == actual
    if ("e" in actual.lower()) != (kind == "difference"):
        return False  # printed in another notation: a change of format
    a, b = float(reference), float(actual)
    if kind == "difference":
        if max(abs(a), abs(b)) <= max(ROUNDING_FLOOR, bound or 0.0):
            return True
        return a * b > 0 and max(a / b, b / a) <= DIFFERENCE_FACTOR
    if kind == "percent":
        return abs(a - b) <= PERCENT_POINTS + 1e-9
    return abs(a - b) <= max(RELATIVE * abs(a), _last_digit_unit(reference)) + 1e-12


def outputs_match(reference: str, actual: str, bound: float | None = None) -> bool:
    """Whether a re-run's printed output agrees with the committed one: the same text, and
    every number within the tolerance of its kind (`bound`: the cell's difference_bound)."""
    if reference == actual:
        return True
    if NUMBER.split(reference) != NUMBER.split(actual):
        return False
    scientific = {"zero", "difference"}
    return all(
        numbers_match(ref, act, kind, bound)
        and (act_kind == kind or {kind, act_kind} <= scientific)  # format kept
        for (ref, kind), (act, act_kind) in zip(printed_numbers(reference), printed_numbers(actual))
    )


class TolerantText(str):
    """A sanitized output whose `==` and `!=` follow the output policy (what nbval uses),
    for a cell whose metadata gives `bound` as its difference_bound (or none)."""

    def __new__(cls, text: str, bound: float | None = None):
        made = super().__new__(cls, text)
        made.bound = bound
        return made

    def __eq__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return outputs_match(str(self), str(other), self.bound)

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__
