"""pytest configuration shared by the unit tests and nbval."""


def pytest_collection_modifyitems(items):
    """Do not compare stderr in notebooks: TensorFlow logs to it nondeterministically."""
    for item in items:
        notebook = getattr(item, "parent", None)
        if hasattr(notebook, "skip_compare") and "stderr" not in notebook.skip_compare:
            notebook.skip_compare = (*notebook.skip_compare, "stderr")
