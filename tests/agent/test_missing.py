"""The note a ModuleNotFoundError gets for a module the sandbox lacks (execbox_agent/missing.py):
it says the module is not installed, that nothing can be fetched, and what is installed instead;
a missing submodule of an installed package, or any other error, is left as Python reports it."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "src", "runtime"))
sys.path.append("/usr/lib/python3/dist-packages")  # Debian's stack, as in the sandbox

from execbox_agent import cell  # noqa: E402
from execbox_agent.missing import missing_module_note  # noqa: E402


def error_of(code):
    try:
        exec(code, {})
    except Exception as exc:  # noqa: BLE001
        event, _ = cell.run_error_event(exc, "<cell>", 1 << 20)
        return event
    raise AssertionError("no error from %r" % code)


@unittest.skipIf(sys.version_info < (3, 11), "exception notes are Python 3.11's")
class MissingModuleTest(unittest.TestCase):
    def test_a_missing_package_names_the_installed_stand_in(self):
        event = error_of("import polars_execbox_test_absent as pl")
        self.assertEqual(event["ename"], "ModuleNotFoundError")
        self.assertEqual(event["evalue"], "No module named 'polars_execbox_test_absent'")  # Python's own
        note = event["traceback"][-1]
        self.assertIn("no module named 'polars_execbox_test_absent' is installed", note)
        self.assertIn("no network", note)

    def test_stand_ins_and_close_names(self):
        if missing_module_note("numpy") is not None:
            self.skipTest("numpy is needed for this check")
        note = missing_module_note("polars") if missing_module_note("pandas") is None else None
        if note is not None:  # polars absent, pandas present: pandas is the stand-in
            self.assertIn("installed instead: pandas", note)
        self.assertIn("installed instead: numpy", missing_module_note("nmupy"))
        self.assertIn("no network", missing_module_note("nonexistent_http_lib_xyz"))

    def test_a_network_package_says_there_is_no_network(self):
        from execbox_agent import missing
        missing.NETWORK.add("execbox_test_net_pkg")
        try:
            note = missing_module_note("execbox_test_net_pkg")
        finally:
            missing.NETWORK.discard("execbox_test_net_pkg")
        self.assertIn("the sandbox has no network", note)

    def test_a_missing_submodule_of_an_installed_package_gets_no_note(self):
        event = error_of("import json.no_such_submodule")
        self.assertEqual(event["ename"], "ModuleNotFoundError")
        self.assertFalse(any("execbox:" in line for line in event["traceback"]), event["traceback"])
        self.assertIsNone(missing_module_note(""))

    def test_other_errors_are_untouched_and_the_note_is_added_once(self):
        event = error_of("from json import no_such_name")
        self.assertEqual(event["ename"], "ImportError")
        self.assertFalse(any("execbox:" in line for line in event["traceback"]))
        try:
            import no_such_module_twice  # noqa: F401
        except ModuleNotFoundError as exc:
            cell.run_error_event(exc, "<cell>", 1 << 20)
            cell.run_error_event(exc, "<cell>", 1 << 20)
            self.assertEqual(len(exc.__notes__), 1)


if __name__ == "__main__":
    unittest.main()
