"""wire_json (the agent's JSON without the json package) gives json's answers for what the
agent reads and writes, and refuses what json refuses with the same exception types."""
import json
import os
import sys
import unittest

from test_agent import AGENT

sys.path.insert(0, os.path.dirname(os.path.abspath(AGENT)))
from execbox_agent import wire_json  # noqa: E402


def json_dumps(value):
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


VALUES = [
    None, True, False, 0, -1, 10**40, 1.5, -0.0, 1e300, 5e-324, "", "plain", "é ü 日本 \U0001F600",
    "quotes \" and \\ and \n\t\x00\x1f controls", "\u2028\u2029", "\ud800 lone surrogate", [], {},
    [1, [2, [3, {"a": None}]]], {"type": "stream", "name": "stdout", "text": "x\n"},
    {"k": {"nested": [1.25, "s", False]}, "": 0}, {1: "int key", 2.5: "float key", None: "n", False: "f"},
]


class WireJsonTest(unittest.TestCase):
    def test_dumps_is_json_dumps_compact(self):
        for value in VALUES:
            with self.subTest(value=value):
                self.assertEqual(wire_json.dumps(value), json_dumps(value))

    def test_loads_reads_what_json_writes(self):
        for value in VALUES:
            for text in (json.dumps(value), json_dumps(value), " \n %s \t" % json.dumps(value, indent=2)):
                with self.subTest(text=text):
                    self.assertEqual(wire_json.loads(text), json.loads(text))

    def test_dumps_refuses_what_json_refuses(self):
        circular = []
        circular.append(circular)
        for value, error in [(float("nan"), ValueError), ([float("inf")], ValueError), (object(), TypeError),
                             ({1j: 1}, TypeError), ({"b": b"bytes"}, TypeError), (circular, ValueError)]:
            with self.subTest(value=value):
                self.assertRaises(error, json_dumps, value)
                self.assertRaises(error, wire_json.dumps, value)

    def test_loads_refuses_what_is_not_one_json_document(self):
        for text in ["", " ", "{", "[1,]", "NaN", "-Infinity", "1 2", '{"a":1}x', "'single'", "[1] [2]"]:
            with self.subTest(text=text):
                self.assertRaises(ValueError, wire_json.loads, text)

    def test_the_string_literal_keeps_non_ascii(self):
        self.assertEqual(wire_json.string("é\n"), '"é\\n"')


if __name__ == "__main__":
    unittest.main()
