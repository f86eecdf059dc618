"""Each chapter's own tests, one file a chapter named after it (test_chNN_<name>.py): what a
chapter writes and teaches, checked outside its notebook."""
