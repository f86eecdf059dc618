"""pytest's configuration, for the unit tests and for nbval: the option --full, and the two
plugins that hold the suite's policy (CONTRIBUTING.md, "Two tiers"). The markers are in
pytest.ini.

- tests/nbval_policy.py: how nbval runs the chapters (outputs compared by
  tests/output_policy.py, kernels started one at a time and with no heartbeat, nbval's lax
  mode on GPUs, stderr not compared, each chapter run again with other knobs in the full
  proof);
- tests/run_policy.py: how the suite runs (the two tiers, the pytest-xdist workers and the
  order files are handed out in, one temporary folder, the time each part took).
"""

#: registered in this order, so run_policy's hooks run first (pytest calls the plugin
#: registered last first): the tiers' choice and the order, then nbval's marks and re-runs
pytest_plugins = ("tests.nbval_policy", "tests.run_policy")


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="the full proof (CI, and contributors before a change lands): also run each "
        "chapter a second time with other knobs, and the tests marked `full` (papermill's "
        "device counts, the recipes launched end to end, the rendered book in a browser), "
        "which run only with this option, even when named",
    )
