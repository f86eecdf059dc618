"""The book's output policy: how a re-run chapter's printed output is compared with the
committed one. Declared here once; conftest.py makes nbval use it.

Committed outputs come from one machine; readers re-run them on other CPUs, other core
counts and GPUs, where results of float arithmetic differ in their last digits. So, after
nbval_sanitize.cfg has masked what legitimately varies (timings, addresses):

- **exactly**: all text, and every integer (counts, shapes, indices, epochs, booleans and
  device names are text or integers);
- **within a tolerance**: every number written with a decimal point or an exponent
  (`92.7`, `0.3944`, `4e-08`). Two such numbers match when they differ by at most the
  largest of `ABSOLUTE`, `RELATIVE` times the larger of the two, and one unit of the last
  digit either of them prints (92.7 vs 92.6 is rounding; 92.7 vs 40.1 is a regression).
- numbers in **scientific notation** are, throughout the book, sizes of differences between
  two computations (`largest weight difference 4e-03`): rounding noise, whose digits change
  with the thread count and whose order of magnitude is the information. They also match
  when they are within a factor of `SCIENTIFIC_FACTOR` of each other (4e-03 vs 6e-03, not
  4e-08 vs 3e-04).

What a chapter claims is asserted in its cells, with tolerances that hold on any hardware;
this comparison only keeps the printed numbers honest.
"""

from __future__ import annotations

import re

#: Relative tolerance for printed floats: 5% of the larger value.
RELATIVE = 0.05
#: Absolute tolerance for printed floats: differences of rounding-error size (float32 ~1e-7).
ABSOLUTE = 1e-5
#: Numbers in scientific notation (sizes of differences) may differ by this factor.
SCIENTIFIC_FACTOR = 10.0

# A number that is not part of a word or of a dotted version string such as 2.21.0.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.]*\d)")


def printed_numbers(line: str) -> list[tuple[str, str]]:
    """Each number printed in `line` with its kind: "integer", "zero" (a float that is exactly
    0, such as 0e+00), "difference" (other scientific notation: the size of a difference
    between two computations), "percent" (followed by %), or "decimal" (a loss, a mean)."""
    found = []
    for match in NUMBER.finditer(line):
        token = match.group()
        if not _is_float(token):
            kind = "integer"
        elif float(token) == 0:
            kind = "zero"
        elif "e" in token.lower():
            kind = "difference"
        elif line[match.end() : match.end() + 1] == "%":
            kind = "percent"
        else:
            kind = "decimal"
        found.append((token, kind))
    return found


def _is_float(token: str) -> bool:
    return "." in token or "e" in token.lower()


def _last_digit_unit(token: str) -> float:
    """The value of one unit in the last printed digit: 0.1 for 92.7, 1e-08 for 4e-08."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    if exponent and float(mantissa) == 0:
        return 0.0  # 0e+00 is an exact zero, not "something below 1"
    return 10.0 ** (int(exponent or 0) - decimals)


def numbers_match(reference: str, actual: str) -> bool:
    """Whether two printed numbers agree under the policy (integers: exactly)."""
    if not (_is_float(reference) and _is_float(actual)):
        return reference == actual
    a, b = float(reference), float(actual)
    allowed = max(
        ABSOLUTE,
        RELATIVE * max(abs(a), abs(b)),
        _last_digit_unit(reference),
        _last_digit_unit(actual),
    )
    if abs(a - b) <= allowed:
        return True
    scientific = "e" in (reference + actual).lower()
    return scientific and a * b > 0 and max(a / b, b / a) <= SCIENTIFIC_FACTOR


def outputs_match(reference: str, actual: str) -> bool:
    """Whether two printed outputs agree: the same text, the same integers, floats within
    the tolerance."""
    if reference == actual:
        return True
    ref_text, act_text = NUMBER.split(reference), NUMBER.split(actual)
    if ref_text != act_text:
        return False
    return all(
        numbers_match(r, a) for r, a in zip(NUMBER.findall(reference), NUMBER.findall(actual))
    )


class TolerantText(str):
    """A sanitized output whose `==` and `!=` follow the output policy (what nbval uses)."""

    def __eq__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return outputs_match(str(self), str(other))

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__
