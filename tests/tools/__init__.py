"""The tests of tools, the maintainer's commands: tools/NAME.py in tests/tools/test_NAME.py."""
