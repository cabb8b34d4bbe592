"""Runs the HTTP API end-to-end tests: run.py [EXECBOX [EXECBOX_WORKER]] [unittest args...]

EXECBOX (the execbox binary) and EXECBOX_WORKER may also come from the environment. Ends with
unittest's summary; the exit status is non-zero when a test failed."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
args = sys.argv[1:]
if args and not args[0].startswith("-") and os.path.isfile(args[0]):
    os.environ["EXECBOX"] = os.path.abspath(args.pop(0))
    if args and not args[0].startswith("-") and os.path.isfile(args[0]):
        os.environ["EXECBOX_WORKER"] = os.path.abspath(args.pop(0))
if "EXECBOX" not in os.environ:
    sys.exit("usage: run.py EXECBOX [EXECBOX_WORKER] [test names...] (or set EXECBOX)")

loader = unittest.TestLoader()
if args:
    suite = loader.loadTestsFromNames(args)
else:
    suite = loader.discover(here, pattern="test_*.py", top_level_dir=here)
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
