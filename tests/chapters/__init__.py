"""Each chapter's own tests, one file a chapter named after it (test_chNN_<name>.py): what a
chapter writes and teaches, checked outside its notebook. Chapter 19's workers are asserted in
the chapter's own cells (under nbval, and again in its second run), so it has no file here."""
