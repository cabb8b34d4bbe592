"""The seed's linters as the agent runs them (execbox_agent/analyzers.py), with Debian's own
pyflakes, flake8 and bandit: findings with their tool and code, flake8 leaving pyflakes's F codes
to it, a block list by prefix and in any case, hostile source that is no Python, and an analyzer
that cannot run: a warning when only asked for, a refusal when a block list needs it."""
import os
import sys
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "src", "runtime"))

from execbox_agent import analyzers  # noqa: E402

CODE = "import os\nimport subprocess\nsubprocess.call('ls', shell=True)\nprint(nowhere)\n"


def codes(findings):
    return {(f["tool"], f["code"], f["severity"]) for f in findings}


class AnalyzersTest(unittest.TestCase):
    def test_each_linter_gives_its_codes(self):
        found = analyzers.analyze(CODE, ["pyflakes", "flake8", "bandit"], ())
        self.assertTrue({("pyflakes", "F401", "warning"), ("pyflakes", "F821", "warning"),
                         ("bandit", "B602", "warning")} <= codes(found), found)
        self.assertFalse([f for f in found if f["tool"] == "flake8" and f["code"].startswith("F")], found)
        self.assertEqual({f["line"] for f in found if f["code"] == "F821"}, {4})

    def test_a_block_list_by_prefix_in_any_case(self):
        found = analyzers.analyze(CODE, analyzers.analyzers_for((), ["b6", "F8"]), ["b6", "F8"])
        errors = {(f["code"], f["severity"]) for f in found if f["severity"] == "error"}
        self.assertEqual(errors, {("B602", "error"), ("B607", "error"), ("F821", "error")}, found)
        self.assertEqual(analyzers.analyzers_for((), ["E501", "B1"]), ["flake8", "bandit"])

    def test_source_that_is_no_python_is_not_a_crash(self):
        for source in ("\udcff = 1\n", "x = (1,\n", "\0" * 10, "(" * 100000):
            found = analyzers.analyze(source, ["pyflakes", "bandit"], ())
            self.assertIsInstance(found, list)
            self.assertTrue(all(f["severity"] == "warning" for f in found), found)

    def test_an_analyzer_that_cannot_run_warns_or_refuses_when_blocking(self):
        with mock.patch.object(analyzers.sys, "executable", "/nonexistent/python3"):
            asked = analyzers.analyze(CODE, ["bandit"], ())
            blocking = analyzers.analyze(CODE, ["bandit"], ["B602"])
        self.assertEqual([(f["code"], f["severity"]) for f in asked], [("unavailable", "warning")], asked)
        self.assertEqual([(f["code"], f["severity"]) for f in blocking], [("unavailable", "error")], blocking)
        self.assertIn("could not start", blocking[0]["message"])


if __name__ == "__main__":
    unittest.main()
