"""conftest.py: what a failed second run of a chapter reports."""

from conftest import failure_message


def test_a_failed_second_run_shows_the_failing_line_without_colour_codes():
    error = {
        "ename": "AssertionError",
        "evalue": "",  # a bare `assert` has no message
        "traceback": [
            "\x1b[0;31m----> 2\x1b[0m assert rate > 3",
            "\x1b[0;31mAssertionError\x1b[0m: ",
        ],
    }
    message = failure_message("code cell 4", "EPOCHS = 1", error)
    assert message == (
        "code cell 4 failed when run again with 'EPOCHS = 1':\n"
        "----> 2 assert rate > 3\nAssertionError: "
    )
