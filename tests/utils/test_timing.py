import re
import time

import pytest

from utils.timing import median_time, printbar, steady_epoch_seconds, timer


def test_printbar_prints_a_bar_and_the_time(capsys):
    printbar()
    line = capsys.readouterr().out.rstrip("\n")
    assert re.fullmatch(r"=+\d{2}:\d{2}:\d{2}", line), line


def test_timer_measures_and_prints(capsys):
    with timer("sleep") as timing:
        time.sleep(0.05)
    assert 0.04 < timing.seconds < 1.0
    assert re.fullmatch(r"sleep: \d+\.\d{3} s\n", capsys.readouterr().out)


def test_timer_counts_cpu_time_apart_from_waiting():
    with timer("sleep", verbose=False) as waiting:
        time.sleep(0.2)
    with timer("work", verbose=False) as working:
        begin = time.process_time()
        while time.process_time() - begin < 0.2:  # 0.2 s of work, however long it waits
            pass
    assert waiting.cpu_seconds < waiting.seconds / 2
    assert working.cpu_seconds >= 0.2


def test_timer_can_be_quiet(capsys):
    with timer("quiet", verbose=False) as timing:
        time.sleep(0.05)
    assert 0.04 < timing.seconds < 1.0  # it still measures
    assert capsys.readouterr().out == ""


def test_median_time_runs_warmup_then_repeats():
    calls = []

    def call():
        calls.append(len(calls))
        time.sleep(0.3 if len(calls) <= 2 else 0.02)  # slow warm-up calls are not timed

    seconds = median_time(call, repeats=3, warmup=2)
    assert len(calls) == 5
    assert 0.015 < seconds < 0.25


def test_median_time_is_the_median():
    delays = iter([0.0, 0.2, 0.0, 0.0])  # warm-up, then three timed calls
    assert median_time(lambda: time.sleep(next(delays)), repeats=3, warmup=1) < 0.1


@pytest.mark.parametrize(
    "kwargs", [{"repeats": 0}, {"repeats": 1.5}, {"warmup": -1}, {"repeats": True}]
)
def test_median_time_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError, match="must be an int"):
        median_time(lambda: None, **kwargs)


def test_steady_epoch_seconds_leaves_out_the_tracing_epoch():
    assert steady_epoch_seconds({"epoch_seconds": [9.0, 1.0, 3.0, 2.0]}) == 2.0
    assert steady_epoch_seconds({"epoch_seconds": [9.0, 1.0]}) == 1.0
    assert steady_epoch_seconds({"epoch_seconds": [9.0]}) == 9.0  # one epoch: all there is


def test_steady_epoch_seconds_says_what_is_missing():
    with pytest.raises(ValueError, match="train at least one epoch"):
        steady_epoch_seconds({"epoch_seconds": []})
