"""The suite itself: conftest.py and its plugins, the output policy, CI's commands."""
