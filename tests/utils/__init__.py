"""The tests of utils, one file a module: utils/NAME.py is tested in tests/utils/test_NAME.py."""
