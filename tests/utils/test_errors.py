"""utils.errors: the useful line of a TensorFlow error, and of a failed program's output."""

import pytest
import tensorflow as tf

from utils.errors import error_line, output_error_line


def test_first_line_without_node_names_or_op_suffix():
    err = tf.errors.InvalidArgumentError(None, None, "Inputs must match. [Op:AddN] name: x\nmore")
    assert error_line(err) == "Inputs must match."
    err = tf.errors.InvalidArgumentError(
        None, None, "Graph execution error:\n\n(0) bad depth {{node a/b}} [[{{node c}}]]\n"
    )
    assert error_line(err) == "Graph execution error:"
    assert error_line(err, containing="depth") == "(0) bad depth"


def test_falls_back_to_the_first_line_and_reads_plain_exceptions():
    assert error_line(ValueError("first\nsecond"), containing="absent") == "first"
    assert error_line(RuntimeError("")) == "RuntimeError"


def test_a_real_tensorflow_error():
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        tf.add_n([tf.ones((2,)), tf.ones((3,))])
    assert error_line(info.value).startswith("Inputs to operation AddN of type AddN must have")


def test_a_printed_distributed_value_is_shortened():
    err = ValueError(
        "Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor: shape=(2,),\n"
        "  numpy=array([1, 2])>\n}) with an unsupported type to a Tensor."
    )
    assert error_line(err) == (
        "Attempt to convert a value (PerReplica:{...}) with an unsupported type to a Tensor."
    )


def test_a_programs_output_gives_its_exception_else_its_last_line():
    traceback = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'\n"
    assert output_error_line("loading\n" + traceback) == "KeyError: 'a'"
    assert output_error_line("step 1\nKilled\n\n") == "Killed"
    assert output_error_line("") == "(no output)"
