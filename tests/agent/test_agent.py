"""Unit tests for the execbox Python agent (the package src/runtime/execbox_agent).

Run from the repository root with Debian's interpreter (the one the jail uses):

    /usr/bin/python3 -m unittest discover -s tests/agent -v

Each test runs the agent as a subprocess exactly the way the jail does
(`python3 -I -S -B -u -X utf8 execbox_agent/__main__.py request.json`, fd 3 the report pipe, a
work dir as cwd, an environment like the jail's), but without the jail, and checks the JSON Lines
report.
Tests that need pandas or matplotlib are skipped if Debian's python3-pandas /
python3-matplotlib are missing. EXECBOX_AGENT=/path/to/execbox_agent tests another copy (a
package directory of that name).

The warm mode (warm_up() in a zygote, serve() in each forked child) is tested the same way
without the C++ zygote: a child forked from this process, or from a small zygote script, calls
serve() on one end of a socketpair and the test plays the host on the other.
"""
import base64
import importlib
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# EXECBOX_AGENT runs the tests against another copy of the agent (e.g. a mutated one).
AGENT = os.environ.get("EXECBOX_AGENT") or os.path.join(ROOT, "src", "runtime", "execbox_agent")
AGENT_MAIN = os.path.join(AGENT, "__main__.py")  # the cold agent's script
POLICIES = os.path.join(ROOT, "src", "runtime", "lint_profiles")
PYTHON = "/usr/bin/python3"
FIGURES = {"max_width_px": 2000, "max_height_px": 2000, "max_bytes": 4194304, "dpi": 100}

_shared = {}


def setUpModule():
    # One matplotlib font cache for the whole run (building it takes seconds).
    _shared["config"] = tempfile.mkdtemp(prefix="execbox-agent-test-")


def tearDownModule():
    shutil.rmtree(_shared.pop("config"), ignore_errors=True)


def _have(module):
    probe = "import sys; sys.path.append('/usr/lib/python3/dist-packages'); import " + module
    return subprocess.run([PYTHON, "-I", "-S", "-c", probe], capture_output=True).returncode == 0


HAVE_PANDAS = _have("pandas")
HAVE_MATPLOTLIB = _have("matplotlib")
HAVE_NUMPY = _have("numpy")


def load_policy(name):
    with open(os.path.join(POLICIES, name + ".json")) as f:
        return json.load(f)


class Run:
    def __init__(self, returncode, stdout, stderr, events, work):
        self.returncode, self.stdout, self.stderr, self.events, self.work = (
            returncode, stdout, stderr, events, work)

    def of_type(self, kind):
        return [e for e in self.events if e["type"] == kind]

    def one(self, kind):
        found = self.of_type(kind)
        if len(found) != 1:
            raise AssertionError("expected one %s event, got %d: %r" % (kind, len(found), self.events))
        return found[0]

    @property
    def error(self):
        return self.one("error")

    @property
    def exit_code(self):
        return self.one("exit")["code"]

    def streams(self):
        return [(e["name"], e["text"]) for e in self.of_type("stream")]

    def stream_text(self, name):
        return "".join(text for n, text in self.streams() if n == name)

    def __repr__(self):
        return "Run(rc=%r, stdout=%r, stderr=%r, events=%r)" % (
            self.returncode, self.stdout[:2000], self.stderr[:2000], self.events)


def run_agent(code, mode="run", policy=None, stdin=b"", filename="<cell>", figures=None,
              timeout=120, **extra):
    """Runs the agent like the jail does and returns what it reported."""
    base = tempfile.mkdtemp(prefix="execbox-agent-")
    try:
        work = os.path.join(base, "work")
        home = os.path.join(base, "home")
        os.mkdir(work)
        os.mkdir(home)
        request = {"mode": mode, "code": code, "filename": filename, "policy": policy,
                   "figures": figures or FIGURES, "max_repr_bytes": 1048576,
                   "max_stream_event_bytes": 1048576}
        request.update(extra)
        request_path = os.path.join(base, "request.json")
        with open(request_path, "w") as f:
            json.dump(request, f)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "HOME": home, "TMPDIR": base, "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": _shared.get("config") or os.path.join(base, "mpl"),
               "XDG_CACHE_HOME": os.path.join(base, "cache"),
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        read_end, write_end = os.pipe()
        try:
            # fd 3 in the child is the report pipe's write end: dup2 makes it inheritable, and
            # close_fds=False keeps it (the parent's other fds are non-inheritable).
            proc = subprocess.Popen(
                [PYTHON, "-I", "-S", "-B", "-u", "-X", "utf8", AGENT_MAIN, request_path], cwd=work,
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                close_fds=False, preexec_fn=lambda: os.dup2(write_end, 3))
        finally:
            os.close(write_end)
        chunks = []

        def read_report():
            while True:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)

        reader = threading.Thread(target=read_report)
        reader.start()
        try:
            stdout, stderr = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            reader.join()
            os.close(read_end)
        report = b"".join(chunks)
        # Every line must be strict JSON in valid UTF-8.
        events = [json.loads(line.decode("utf-8")) for line in report.splitlines()]
        files = {}
        for name in os.listdir(work):
            path = os.path.join(work, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    files[name] = f.read()
        return Run(proc.returncode, stdout, stderr, events, files)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise AssertionError("not a PNG: %r" % data[:24])
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


class AgentTestCase(unittest.TestCase):
    maxDiff = None

    def assertClean(self, run):
        """Ran to the end, no error, exit 0, exit event last."""
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.of_type("error"), [], run)
        self.assertEqual(run.events[-1], {"type": "exit", "code": 0}, run)

    def assertNoAgentFrames(self, lines):
        text = "\n".join(lines) if isinstance(lines, list) else lines
        self.assertNotIn("agent.py", text)
        self.assertNotIn("execbox_agent", text)
        self.assertNotIn("/opt/execbox", text)

    def assertFinished(self, run, code):
        self.assertEqual(run.returncode, code, run)
        self.assertEqual(run.events[-1], {"type": "exit", "code": code}, run)
        self.assertEqual(len(run.of_type("exit")), 1, run)


# ---------------------------------------------------------------------------------------------

class SyntaxErrorTest(AgentTestCase):
    def check(self, code, ename, evalue, line, column, text, mode="run"):
        run = run_agent(code, mode=mode)
        self.assertFinished(run, 1)
        error = run.error
        self.assertEqual(error["phase"], "compile")
        self.assertEqual(error["ename"], ename)
        self.assertEqual(error["evalue"], evalue)
        self.assertEqual(error["line"], line)
        self.assertEqual(error["column"], column)
        self.assertEqual(error["text"], text)
        self.assertEqual(error["traceback"][0], '  File "<cell>", line %d' % line)
        self.assertEqual(error["traceback"][-1], "%s: %s" % (ename, evalue))
        self.assertEqual(run.stdout, b"", "the code must not run")
        self.assertEqual(run.of_type("result"), [])
        return run

    def test_invalid_syntax(self):
        run = self.check("print('ran')\nx = = 1\n", "SyntaxError", "invalid syntax", 2, 5, "x = = 1")
        self.assertEqual(run.error["traceback"],
                         ['  File "<cell>", line 2', "    x = = 1", "        ^",
                          "SyntaxError: invalid syntax"])
        # Printed on stderr like Python does.
        self.assertIn(b"SyntaxError: invalid syntax", run.stderr)

    def test_expected_colon(self):
        run = self.check("x = 1\nif x\n    pass\n", "SyntaxError", "expected ':'", 2, 5, "if x")
        self.assertIn("        ^", run.error["traceback"])

    def test_never_closed(self):
        self.check("print('ran')\nx = (1,\n", "SyntaxError", "'(' was never closed", 2, 5, "x = (1,")

    def test_indentation_error(self):
        self.check("def f():\nreturn 1\n", "IndentationError",
                   "expected an indented block after function definition on line 1", 2, 1, "return 1")

    def test_unexpected_indent(self):
        # CPython's offset for this one is the indent width and it prints no caret; the agent
        # adds one under the statement so the position is visible.
        run = self.check("x = 1\n  y = 2\n", "IndentationError", "unexpected indent", 2, 2, "  y = 2")
        self.assertEqual(run.error["traceback"][1:],
                         ["    y = 2", "    ^", "IndentationError: unexpected indent"])

    def test_tab_error(self):
        run = self.check("if 1:\n\tx = 1\n        y = 2\n", "TabError",
                         "inconsistent use of tabs and spaces in indentation", 3, 1, "        y = 2")
        self.assertIn("    ^", run.error["traceback"])

    def test_compiler_error_gets_its_line(self):
        # Found by the compiler, not the parser: CPython gives no text; the agent adds it.
        run = self.check("print('ran')\nreturn 5\n", "SyntaxError", "'return' outside function",
                         2, 1, "return 5")
        self.assertEqual(run.error["traceback"][1:3], ["    return 5", "    ^^^^^^^^"])

    def test_column_counts_characters(self):
        self.check("ééé = $\n", "SyntaxError", "invalid syntax", 1, 7, "ééé = $")

    def test_null_byte(self):
        # CPython 3.11's compile() raises ValueError for this; 3.12 a SyntaxError. Either way
        # it is not Python: reported as a SyntaxError at the NUL.
        self.check("print(1)\nx = 1\0\n", "SyntaxError",
                   "source code string cannot contain null bytes", 2, 6, "x = 1\0")

    def test_lone_surrogate_in_source(self):
        # The report is always valid UTF-8: the surrogate in the text becomes U+FFFD.
        self.check("x = '\ud800'\n", "SyntaxError",
                   "source code cannot contain lone surrogates (U+D800)", 1, 6, "x = '\ufffd'")

    def test_check_mode_reports_it_without_stderr(self):
        run = self.check("if x\n", "SyntaxError", "expected ':'", 1, 5, "if x", mode="check")
        self.assertEqual(run.stderr, b"")

    def test_file_name_in_traceback(self):
        run = run_agent("def f(:\n", filename="script.py")
        self.assertEqual(run.error["traceback"][0], '  File "script.py", line 1')

    def test_too_deeply_nested(self):
        run = run_agent("x = " + "1+" * 5000 + "1\n")
        self.assertFinished(run, 1)
        self.assertEqual(run.error["phase"], "compile")
        self.assertEqual(run.error["ename"], "RecursionError")


# ---------------------------------------------------------------------------------------------

class ResultTest(AgentTestCase):
    def result(self, code):
        run = run_agent(code)
        self.assertClean(run)
        results = run.of_type("result")
        return run, (results[0] if results else None)

    def test_last_expression_is_the_result_and_not_printed(self):
        run, result = self.result("x = 20\nx + 22")
        self.assertEqual(result, {"type": "result", "data": {"text/plain": "42"}, "metadata": {}})
        self.assertEqual(run.stdout, b"")
        self.assertEqual(run.events[-2:], [result, {"type": "exit", "code": 0}])

    def test_none_is_not_shown(self):
        self.assertIsNone(self.result("None")[1])
        run, result = self.result("print('hi')")
        self.assertIsNone(result)
        self.assertEqual(run.stdout, b"hi\n")

    def test_statement_has_no_result(self):
        self.assertIsNone(self.result("x = 1")[1])
        self.assertIsNone(self.result("for i in range(3):\n    i")[1])

    def test_last_of_several_expressions(self):
        self.assertEqual(self.result("1; 2")[1]["data"]["text/plain"], "2")
        self.assertEqual(self.result("1\n'a' * 3")[1]["data"]["text/plain"], "'aaa'")

    def test_trailing_semicolon_hides_the_result(self):
        self.assertIsNone(self.result("x = 5\nx;  # quiet")[1])

    def test_expression_spanning_lines(self):
        self.assertEqual(self.result("(1 +\n 2)")[1]["data"]["text/plain"], "3")

    def test_result_after_statements_sees_globals(self):
        code = ("def f(n):\n    return n * 2\n"
                "class A:\n    def __repr__(self):\n        return 'A!'\n[f(2), A()]")
        self.assertEqual(self.result(code)[1]["data"]["text/plain"], "[4, A!]")

    def test_repr_capped(self):
        run = run_agent("'x' * 10000", max_repr_bytes=1000)
        text = run.one("result")["data"]["text/plain"]
        self.assertLessEqual(len(text.encode()), 1000)
        self.assertIn("truncated", text)
        self.assertTrue(text.startswith("'xxx") and text.endswith("xxx'"))

    def test_repr_that_raises_falls_back(self):
        run, result = self.result(
            "class Bad:\n    def __repr__(self):\n        raise ValueError('no')\nBad()")
        self.assertIn("<__main__.Bad object at", result["data"]["text/plain"])
        self.assertIn(b"ValueError: no", run.stderr)

    def test_lone_surrogate_in_repr(self):
        run, result = self.result("chr(0xd800) + 'x'")
        self.assertEqual(result["data"]["text/plain"], "'\\ud800x'")  # repr escapes it
        run, result = self.result("class S:\n    def __repr__(self):\n        return chr(0xd800)\nS()")
        self.assertEqual(result["data"]["text/plain"], "\ufffd")


# ---------------------------------------------------------------------------------------------

class DisplayTest(AgentTestCase):
    def test_display_order_interleaved_with_prints(self):
        code = ("import sys\nprint('a')\ndisplay(1)\nprint('b')\ndisplay('x', [2])\n"
                "print('c', file=sys.stderr)\n3")
        run = run_agent(code)
        self.assertClean(run)
        kinds = [(e["type"], e.get("name") or e.get("data", {}).get("text/plain"))
                 for e in run.events]
        self.assertEqual(kinds, [("stream", "stdout"), ("display", "1"), ("stream", "stdout"),
                                 ("display", "'x'"), ("display", "[2]"), ("stream", "stderr"),
                                 ("result", "3"), ("exit", None)])
        self.assertEqual(run.streams(), [("stdout", "a\n"), ("stdout", "b\n"), ("stderr", "c\n")])

    def test_mimebundle(self):
        code = ("class M:\n"
                "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                "        return {'text/html': '<b>m</b>', 'application/json': {'k': [1, 2]},\n"
                "                'image/png': b'\\x89PNG-ish'}, {'text/html': {'isolated': True}}\n"
                "    def _repr_markdown_(self):\n"
                "        return '*m*'\n"
                "display(M())")
        run = run_agent(code)
        self.assertClean(run)
        event = run.one("display")
        data = event["data"]
        self.assertEqual(data["text/html"], "<b>m</b>")
        self.assertEqual(data["application/json"], {"k": [1, 2]})
        self.assertEqual(base64.b64decode(data["image/png"]), b"\x89PNG-ish")
        self.assertEqual(data["text/markdown"], "*m*")  # the bundle did not give it
        self.assertIn("<__main__.M object", data["text/plain"])
        self.assertEqual(event["metadata"], {"text/html": {"isolated": True}})

    def test_repr_methods(self):
        code = ("class R:\n"
                "    def _repr_html_(self): return '<i>r</i>'\n"
                "    def _repr_latex_(self): return '$r$'\n"
                "    def _repr_svg_(self): return '<svg/>'\n"
                "    def _repr_png_(self): return b'png-bytes'\n"
                "    def _repr_jpeg_(self): return None\n"
                "    def _repr_json_(self): return ({'a': 1}, {'expanded': True})\n"
                "    def __repr__(self): return 'R()'\n"
                "R()")
        run = run_agent(code)
        self.assertClean(run)
        result = run.one("result")
        self.assertEqual(result["data"], {
            "text/html": "<i>r</i>", "text/latex": "$r$", "image/svg+xml": "<svg/>",
            "image/png": base64.b64encode(b"png-bytes").decode(), "application/json": {"a": 1},
            "text/plain": "R()"})
        self.assertEqual(result["metadata"], {"application/json": {"expanded": True}})

    def test_raising_repr_method_is_skipped_with_a_warning(self):
        code = ("class B:\n"
                "    def _repr_html_(self):\n"
                "        raise ValueError('boom')\n"
                "    def _repr_markdown_(self):\n"
                "        return '**ok**'\n"
                "    def __repr__(self):\n"
                "        return 'B()'\n"
                "display(B())\nprint('still running')")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.one("display")["data"], {"text/markdown": "**ok**", "text/plain": "B()"})
        stderr = run.stream_text("stderr")
        self.assertIn("_repr_html_", stderr)
        self.assertIn("ValueError: boom", stderr)
        self.assertIn('File "<cell>", line 3, in _repr_html_', stderr)
        self.assertNoAgentFrames(stderr)
        self.assertEqual(run.stdout, b"still running\n")

    def test_objects_claiming_every_attribute_and_classes(self):
        code = ("class Any:\n    def __getattr__(self, name):\n        return lambda *a, **k: '<p>'\n"
                "    def __repr__(self):\n        return 'Any()'\n"
                "class WithHtml:\n    def _repr_html_(self): return '<b>'\n"
                "display(Any(), WithHtml)")
        run = run_agent(code)
        self.assertClean(run)
        first, second = run.of_type("display")
        self.assertEqual(first["data"], {"text/plain": "Any()"})
        self.assertEqual(second["data"], {"text/plain": "<class '__main__.WithHtml'>"})

    def test_display_raw_and_metadata(self):
        run = run_agent("display({'text/html': '<b>x</b>', 'text/plain': 'x'}, raw=True, "
                        "metadata={'tag': 1})")
        self.assertClean(run)
        event = run.one("display")
        self.assertEqual(event["data"], {"text/html": "<b>x</b>", "text/plain": "x"})
        self.assertEqual(event["metadata"], {"tag": 1})

    def test_display_returns_none_and_is_a_builtin(self):
        run = run_agent("import builtins\nr = display(1)\nprint(r, builtins.display is display)")
        self.assertClean(run)
        self.assertEqual(run.stdout, b"None True\n")

    @unittest.skipUnless(HAVE_PANDAS, "python3-pandas is not installed")
    def test_dataframe_html(self):
        run = run_agent("import pandas as pd\npd.DataFrame({'alpha': [1, 2], 'beta': [3.5, 4.5]})")
        self.assertClean(run)
        data = run.one("result")["data"]
        self.assertIn("<table", data["text/html"])
        self.assertIn("alpha", data["text/html"])
        self.assertIn("alpha", data["text/plain"])
        self.assertIn("4.5", data["text/plain"])

    @unittest.skipUnless(HAVE_PANDAS, "python3-pandas is not installed")
    def test_series_html(self):
        run = run_agent("import pandas as pd\ns = pd.Series([10, 20], name='counts')\n"
                        "display(s)\ns")
        self.assertClean(run)
        for event in (run.one("display"), run.one("result")):
            self.assertIn("<table", event["data"]["text/html"])
            self.assertIn("counts", event["data"]["text/html"])
            self.assertIn("Name: counts", event["data"]["text/plain"])


# ---------------------------------------------------------------------------------------------

@unittest.skipUnless(HAVE_MATPLOTLIB, "python3-matplotlib is not installed")
class FigureTest(AgentTestCase):
    def png(self, event):
        self.assertEqual(event["type"], "display")
        data = base64.b64decode(event["data"]["image/png"], validate=True)
        width, height = png_size(data)
        self.assertEqual((width, height), (event["metadata"]["width"], event["metadata"]["height"]))
        return data, width, height

    def test_show_emits_every_open_figure_in_order_and_closes_them(self):
        code = ("import matplotlib.pyplot as plt\nprint('before')\n"
                "plt.figure(); plt.plot([1, 2, 3])\n"
                "plt.figure(figsize=(3, 2)); plt.plot([3, 2, 1])\n"
                "plt.show()\nprint('after', plt.get_fignums())")
        run = run_agent(code)
        self.assertClean(run)
        kinds = [e["type"] for e in run.events]
        self.assertEqual(kinds, ["stream", "display", "display", "stream", "exit"])
        first, second = run.of_type("display")
        self.assertEqual(self.png(first)[1:], (640, 480))
        self.assertEqual(self.png(second)[1:], (300, 200))
        self.assertEqual(first["data"]["text/plain"], "<Figure size 640x480 with 1 Axes>")
        self.assertNotIn("downscaled", first["metadata"])
        self.assertEqual(run.stdout, b"before\nafter []\n")

    def test_figure_never_shown_is_emitted_at_the_end(self):
        code = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\n"
                "ax.plot([1, 2])\nprint('done')\n42")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual([e["type"] for e in run.events], ["stream", "display", "result", "exit"])
        self.assertEqual(self.png(run.one("display"))[1:], (400, 300))

    def test_figure_emitted_when_the_code_raises(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 / 0")
        self.assertFinished(run, 1)
        self.assertEqual([e["type"] for e in run.events if e["type"] != "stream"],
                         ["display", "error", "exit"])
        self.png(run.one("display"))
        self.assertEqual(run.error["ename"], "ZeroDivisionError")

    def test_huge_figure_is_downscaled_and_flagged(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.figure(figsize=(100, 100))\n"
                        "plt.plot([1, 2])\nplt.show()")
        self.assertClean(run)
        event = run.one("display")
        _, width, height = self.png(event)
        self.assertLessEqual(width, 2000)
        self.assertLessEqual(height, 2000)
        self.assertGreater(width, 1500)
        self.assertTrue(event["metadata"]["downscaled"])
        self.assertEqual(event["metadata"]["original_width"], 10000)
        self.assertEqual(event["metadata"]["original_height"], 10000)
        self.assertIn("10000x10000", event["data"]["text/plain"])

    def test_png_over_the_byte_cap_is_rendered_smaller(self):
        code = ("import matplotlib.pyplot as plt, random\nrandom.seed(1)\n"
                "plt.figure(figsize=(8, 8))\n"
                "plt.scatter([random.random() for _ in range(3000)], "
                "[random.random() for _ in range(3000)], c=[random.random() for _ in range(3000)])")
        figures = dict(FIGURES, max_bytes=30000)
        run = run_agent(code, figures=figures)
        self.assertClean(run)
        event = run.one("display")
        data, width, _ = self.png(event)
        self.assertLessEqual(len(data), 30000)
        self.assertTrue(event["metadata"]["downscaled"])
        self.assertEqual(event["metadata"]["original_width"], 800)
        self.assertLess(width, 800)

    def test_impossible_cap_is_a_note_not_silence(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.plot([1, 2])",
                        figures=dict(FIGURES, max_bytes=100))
        self.assertClean(run)
        event = run.one("display")
        self.assertNotIn("image/png", event["data"])
        self.assertIn("not shown", event["data"]["text/plain"])
        self.assertTrue(event["metadata"]["omitted"])

    def test_displayed_figure_is_not_repeated(self):
        run = run_agent("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(2, 2))\n"
                        "plt.plot([1])\ndisplay(fig)")
        self.assertClean(run)
        self.assertEqual(self.png(run.one("display"))[1:], (200, 200))

    def test_figure_as_result(self):
        run = run_agent("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(2, 1))\nfig")
        self.assertClean(run)
        self.assertEqual(run.of_type("display"), [])
        result = run.one("result")
        data = base64.b64decode(result["data"]["image/png"])
        self.assertEqual(png_size(data), (200, 100))
        self.assertEqual(result["metadata"], {"width": 200, "height": 100})

    def test_figure_show_method(self):
        # Figure.show() only warns on Agg; here it shows that figure, once.
        run = run_agent("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(3, 3))\n"
                        "fig.show()\nprint('shown')")
        self.assertClean(run)
        self.assertEqual([e["type"] for e in run.events], ["display", "stream", "exit"])
        self.assertEqual(self.png(run.one("display"))[1:], (300, 300))
        self.assertEqual(run.stderr, b"")

    def test_savefig_into_the_work_dir(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                        "plt.savefig('plot.png')\nplt.close('all')")
        self.assertClean(run)
        self.assertEqual(png_size(run.work["plot.png"]), (640, 480))
        self.assertEqual(run.of_type("display"), [])

    def test_matplotlib_is_not_imported_unless_used(self):
        run = run_agent("import sys\nsorted(m for m in sys.modules if m.startswith('matplotlib'))")
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"], "[]")

    def test_use_agg_explicitly_still_works(self):
        run = run_agent("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                        "plt.plot([1])\nplt.show()\nmatplotlib.get_backend()")
        self.assertClean(run)
        self.png(run.one("display"))
        self.assertEqual(run.one("result")["data"]["text/plain"], "'agg'")
        self.assertNotIn(b"non-GUI backend", run.stderr)


# ---------------------------------------------------------------------------------------------

class TracebackTest(AgentTestCase):
    def run_error(self, code, ename, exit_code=1, first_line="Traceback (most recent call last):"):
        run = run_agent(code)
        self.assertFinished(run, exit_code)
        error = run.error
        self.assertEqual(error["phase"], "run")
        self.assertEqual(error["ename"], ename)
        self.assertEqual(error["traceback"][0], first_line)
        self.assertNoAgentFrames(error["traceback"])
        self.assertNoAgentFrames(run.stderr.decode())
        # The same traceback is printed on stderr, as Python would.
        self.assertIn("\n".join(error["traceback"]), run.stderr.decode())
        return run, error

    def test_nested_user_functions(self):
        code = "def f(x):\n    return g(x)\n\ndef g(x):\n    return 1 / x\n\nf(0)\n"
        _, error = self.run_error(code, "ZeroDivisionError")
        self.assertEqual(error["evalue"], "division by zero")
        self.assertEqual(error["line"], 5)
        tb = error["traceback"]
        self.assertEqual(tb[1:3], ['  File "<cell>", line 7, in <module>', "    f(0)"])
        self.assertIn('  File "<cell>", line 2, in f', tb)
        self.assertIn('  File "<cell>", line 5, in g', tb)
        self.assertIn("    return 1 / x", tb)
        self.assertEqual(tb[-1], "ZeroDivisionError: division by zero")

    def test_error_inside_a_library_keeps_library_frames(self):
        _, error = self.run_error("import json\njson.loads('{')", "JSONDecodeError")
        tb = error["traceback"]
        self.assertEqual(tb[1], '  File "<cell>", line 2, in <module>')
        self.assertTrue(any("json/decoder.py" in line for line in tb), tb)
        self.assertTrue(tb[-1].startswith("json.decoder.JSONDecodeError: Expecting property name"))

    @unittest.skipUnless(HAVE_NUMPY, "python3-numpy is not installed")
    def test_error_inside_numpy(self):
        _, error = self.run_error("import numpy as np\nnp.linalg.inv(np.zeros((2, 2)))", "LinAlgError")
        tb = error["traceback"]
        self.assertEqual(tb[1], '  File "<cell>", line 2, in <module>')
        self.assertTrue(any("numpy/linalg" in line for line in tb), tb)
        self.assertEqual(error["evalue"], "Singular matrix")

    def test_chained_exceptions(self):
        code = ("def load():\n    raise KeyError('k')\n"
                "try:\n    load()\nexcept KeyError as e:\n    raise ValueError('bad') from e\n")
        _, error = self.run_error(code, "ValueError")
        text = "\n".join(error["traceback"])
        self.assertIn("KeyError: 'k'", text)
        self.assertIn("The above exception was the direct cause of the following exception:", text)
        self.assertIn('File "<cell>", line 2, in load', text)
        self.assertEqual(text.count("Traceback (most recent call last):"), 2)

    def test_exception_during_handling(self):
        code = "try:\n    {}['x']\nexcept KeyError:\n    undefined_name\n"
        _, error = self.run_error(code, "NameError")
        text = "\n".join(error["traceback"])
        self.assertIn("During handling of the above exception, another exception occurred:", text)
        self.assertIn("NameError: name 'undefined_name' is not defined", text)

    def test_recursion_error(self):
        _, error = self.run_error("def r(n):\n    return r(n + 1)\nr(0)", "RecursionError")
        tb = error["traceback"]
        self.assertTrue(any("Previous line repeated" in line for line in tb), tb)
        self.assertEqual(tb[1], '  File "<cell>", line 3, in <module>')
        self.assertEqual(tb[-1], "RecursionError: maximum recursion depth exceeded")

    def test_recursion_error_with_a_tiny_limit(self):
        _, error = self.run_error("import sys\nsys.setrecursionlimit(60)\ndef r():\n    r()\nr()",
                                  "RecursionError")
        self.assertEqual(error["line"], 4)

    def test_keyboard_interrupt(self):
        _, error = self.run_error("def f():\n    raise KeyboardInterrupt\nf()", "KeyboardInterrupt", 130)
        self.assertEqual(error["traceback"][1:3], ['  File "<cell>", line 3, in <module>', "    f()"])

    def test_memory_error_raised_by_user(self):
        _, error = self.run_error("raise MemoryError('too big')", "MemoryError")
        self.assertEqual(error["evalue"], "too big")

    def test_real_memory_error(self):
        _, error = self.run_error("data = [1]\nblob = bytearray(1 << 60)", "MemoryError")
        self.assertEqual(error["line"], 2)

    def test_exception_group(self):
        code = "raise ExceptionGroup('many', [ValueError('a'), TypeError('b')])"
        _, error = self.run_error(code, "ExceptionGroup",
                                  first_line="  + Exception Group Traceback (most recent call last):")
        text = "\n".join(error["traceback"])
        self.assertIn("ValueError: a", text)
        self.assertIn("TypeError: b", text)

    def test_error_in_open_keeps_only_the_user_frame(self):
        # open() is wrapped by the agent (to flush unclosed files): its frame must not show.
        _, error = self.run_error("open('missing.txt')", "FileNotFoundError")
        self.assertEqual(error["traceback"], [
            "Traceback (most recent call last):", '  File "<cell>", line 1, in <module>',
            "    open('missing.txt')",
            "FileNotFoundError: [Errno 2] No such file or directory: 'missing.txt'"])

    def test_unprintable_exception(self):
        code = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()"
        _, error = self.run_error(code, "E")
        self.assertIsInstance(error["evalue"], str)

    def test_error_in_last_expression(self):
        _, error = self.run_error("x = 1\nx.nope", "AttributeError")
        self.assertEqual(error["line"], 2)
        self.assertEqual(run_agent("x = 1\nx.nope").of_type("result"), [])

    def test_file_name_and_sys_excepthook(self):
        run = run_agent("def f():\n    raise ValueError(1)\nf()", filename="job.py")
        self.assertIn('  File "job.py", line 2, in f', run.error["traceback"])
        run = run_agent("import sys\nsys.excepthook = lambda t, v, tb: print('hooked', t.__name__, "
                        "file=sys.stderr)\nraise ValueError")
        self.assertEqual(run.stderr, b"hooked ValueError\n")
        self.assertEqual(run.error["ename"], "ValueError")


# ---------------------------------------------------------------------------------------------

class StreamTest(AgentTestCase):
    def test_interleaved_stdout_and_stderr_keep_their_order(self):
        code = ("import sys\nprint('o1')\nprint('e1', file=sys.stderr)\nprint('o2')\n"
                "sys.stderr.write('e2\\n')\nsys.stdout.write('o3\\n')")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.streams(), [("stdout", "o1\n"), ("stderr", "e1\n"), ("stdout", "o2\n"),
                                         ("stderr", "e2\n"), ("stdout", "o3\n")])
        self.assertEqual(run.stdout, b"o1\no2\no3\n")
        self.assertEqual(run.stderr, b"e1\ne2\n")

    def test_partial_writes_are_merged(self):
        run = run_agent("print('a', end='')\nprint('b', 'c')\nimport sys\nsys.stdout.write('d')")
        self.assertClean(run)
        self.assertEqual(run.streams(), [("stdout", "ab c\n"), ("stdout", "d")])

    def test_invalid_utf8_bytes(self):
        run = run_agent("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok\\n')\n"
                        "sys.stdout.buffer.write(b'\\xe2\\x82')\nsys.stdout.buffer.write(b'\\xac\\n')")
        self.assertClean(run)
        self.assertEqual(run.stdout, b"\xff\xfe ok\n\xe2\x82\xac\n")
        self.assertEqual(run.stream_text("stdout"), "\ufffd\ufffd ok\n\u20ac\n")

    def test_nul_bytes(self):
        run = run_agent("print('a\\0b')\nimport sys\nsys.stderr.buffer.write(b'\\0\\n')\n'x\\0y'")
        self.assertClean(run)
        self.assertEqual(run.stdout, b"a\x00b\n")
        self.assertEqual(run.stream_text("stdout"), "a\0b\n")
        self.assertEqual(run.stream_text("stderr"), "\0\n")
        self.assertEqual(run.one("result")["data"]["text/plain"], "'x\\x00y'")

    def test_surrogates(self):
        run = run_agent("print('\\udc80')\nprint('\\ud800')\nimport os\nprint(os.fsdecode(b'\\xff'))")
        self.assertClean(run)
        # A surrogate-escaped byte goes out as the byte; any other lone surrogate as U+FFFD.
        self.assertEqual(run.stdout, b"\x80\n\xef\xbf\xbd\n\xff\n")
        self.assertEqual(run.stream_text("stdout"), "\ufffd\n\ufffd\n\ufffd\n")

    def test_stream_events_are_capped(self):
        run = run_agent("for i in range(10):\n    print('x' * 49)", max_stream_event_bytes=120)
        self.assertClean(run)
        self.assertEqual(len(run.stdout), 500)  # the live output is not capped by the agent
        self.assertEqual(sum(len(text) for _, text in run.streams()), 120)
        truncated = [i for i, e in enumerate(run.events) if e["type"] == "stream_truncated"]
        self.assertEqual(len(truncated), 1)
        self.assertEqual(run.events[truncated[0] + 1:], [{"type": "exit", "code": 0}])

    def test_reconfigure_and_rewrapped_stdout(self):
        code = ("import io, sys\nsys.stdout.reconfigure(encoding='utf-8')\nprint('one')\n"
                "sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\nprint('two')")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.stdout, b"one\ntwo\n")
        self.assertEqual(run.stream_text("stdout"), "one\ntwo\n")

    def test_input_reads_stdin_then_eof(self):
        code = "a = input()\nb = input('name? ')\nprint(a + '|' + b)\ninput()"
        run = run_agent(code, stdin=b"one\ntwo\n")
        self.assertFinished(run, 1)
        self.assertEqual(run.stdout, b"name? one|two\n")
        self.assertEqual(run.error["ename"], "EOFError")

    def test_stdin_read_all(self):
        run = run_agent("import sys\nlen(sys.stdin.read())", stdin=b"x" * 100000)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"], "100000")

    def test_warnings_go_to_stderr_once(self):
        run = run_agent("import warnings\nfor i in range(3):\n    warnings.warn('careful')\n"
                        "import numbers\nprint('done')")
        self.assertClean(run)
        self.assertEqual(run.stderr.decode().count("UserWarning: careful"), 1)
        self.assertIn("<cell>:3: UserWarning: careful", run.stderr.decode())
        self.assertIn("warnings.warn('careful')", run.stderr.decode())

    def test_warning_above_the_module_is_reported_like_python(self):
        run = run_agent("import warnings\nwarnings.warn('up', stacklevel=2)")
        self.assertClean(run)
        self.assertEqual(run.stderr, b"sys:1: UserWarning: up\n")

    def test_threads_are_waited_for_and_atexit_runs(self):
        code = ("import atexit, threading, time\n"
                "atexit.register(lambda: print('atexit'))\n"
                "t = threading.Thread(target=lambda: (time.sleep(0.2), print('thread')))\n"
                "t.start()\nprint('main')")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.streams(), [("stdout", "main\n"), ("stdout", "thread\n"),
                                         ("stdout", "atexit\n")])


# ---------------------------------------------------------------------------------------------

class ExitTest(AgentTestCase):
    def test_system_exit_codes(self):
        for code, status, stderr in [("import sys\nsys.exit()", 0, b""),
                                     ("import sys\nsys.exit(0)", 0, b""),
                                     ("import sys\nsys.exit(3)", 3, b""),
                                     ("raise SystemExit(None)", 0, b""),
                                     ("exit(4)", 4, b""),
                                     ("quit()", 0, b""),
                                     ("import sys\nsys.exit(True)", 1, b""),
                                     ("import sys\nsys.exit(256 + 7)", 7, b""),
                                     ("import sys\nsys.exit('bye')", 1, b"bye\n")]:
            with self.subTest(code=code):
                run = run_agent(code + "\nprint('not reached')")
                self.assertFinished(run, status)
                self.assertEqual(run.of_type("error"), [])
                self.assertEqual(run.stdout, b"")
                self.assertEqual(run.stderr, stderr)

    def test_unclosed_file_is_flushed(self):
        run = run_agent("f = open('out.txt', 'w')\nf.write('data')\n"
                        "import gzip\ng = gzip.open('out.gz', 'wt')\ng.write('zipped')")
        self.assertClean(run)
        self.assertEqual(run.work["out.txt"], b"data")
        import gzip
        self.assertEqual(gzip.decompress(run.work["out.gz"]), b"zipped")

    def test_forked_child_does_not_report(self):
        code = ("import os\npid = os.fork()\nif pid == 0:\n    display('child')\n"
                "    print('from child')\n    raise SystemExit(5)\n"
                "os.waitpid(pid, 0)\ndisplay('parent')")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual([e["data"]["text/plain"] for e in run.of_type("display")], ["'parent'"])
        self.assertIn(b"from child", run.stdout)  # the child's output itself is real

    def test_multiprocessing_with_functions_from_the_cell(self):
        code = ("from multiprocessing import Pool\ndef square(x):\n    return x * x\n"
                "with Pool(2) as pool:\n    result = pool.map(square, range(5))\nresult")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"], "[0, 1, 4, 9, 16]")

    def test_internal_error_for_a_bad_request(self):
        run = run_agent("print(1)", mode="bogus")
        self.assertFinished(run, 70)
        self.assertEqual(run.error["phase"], "internal")
        self.assertEqual(run.stdout, b"")


class EnvironmentTest(AgentTestCase):
    def test_main_module_argv_and_report_fd(self):
        code = ("import sys, os, inspect\n"
                "def f():\n    return 1\n"
                "try:\n    os.fstat(3)\n    fd3 = 'open'\nexcept OSError:\n    fd3 = 'closed'\n"
                "[__name__, sys.argv, fd3, inspect.getsource(f), sys.modules['__main__'].f is f, "
                "'__file__' in globals()]")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"],
                         "['__main__', ['<cell>'], 'closed', 'def f():\\n    return 1\\n', True, False]")

    def test_file_name_is_argv_and_file(self):
        run = run_agent("import sys\n(sys.argv, __file__)", filename="job.py")
        self.assertEqual(run.one("result")["data"]["text/plain"], "(['job.py'], 'job.py')")

    def test_work_dir_modules_import_and_pickle_works(self):
        code = ("with open('helper.py', 'w') as f:\n    f.write('X = 7\\n')\n"
                "import helper, pickle, dataclasses\n"
                "@dataclasses.dataclass\nclass P:\n    x: int\n"
                "(helper.X, pickle.loads(pickle.dumps(P(1))))")
        run = run_agent(code)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"], "(7, P(x=1))")

    def test_compile_warnings_are_findings_and_shown(self):
        run = run_agent("x = 1\nif x is 1:\n    pass")
        self.assertClean(run)
        findings = run.one("findings")["findings"]
        self.assertEqual([(f["rule"], f["severity"], f["line"]) for f in findings],
                         [("SyntaxWarning", "warning", 2)])
        self.assertIn(b"<cell>:2: SyntaxWarning", run.stderr)


# ---------------------------------------------------------------------------------------------

class PolicyTest(AgentTestCase):
    REFUSED = [
        ("__import__('os').system('ls')", "no-subprocess", 1, 1),
        ("import os; os.system('rm -rf /')", "no-subprocess", 1, 12),
        ("import os as o\no.system('ls')", "no-subprocess", 2, 1),
        ("from os import system as s\ns('ls')", "no-subprocess", 1, 1),
        ("from os import *\nexecvp('ls', ['ls'])", "no-subprocess", 2, 1),
        ("import os\nos.fork()", "no-subprocess", 2, 1),
        ("import os\nos.posix_spawnp('ls', ['ls'], {})", "no-subprocess", 2, 1),
        ("import os\nrun = getattr(os, 'popen')", "no-subprocess", 2, 7),
        ("import sys\nsys.modules['os'].spawnl(0, 'ls')", "no-subprocess", 2, 1),
        ("from subprocess import run as r\nr(['ls'])", "no-subprocess", 1, 1),
        ("import subprocess.run", "no-subprocess", 1, 1),
        ("import socket", "no-network", 1, 1),
        ("x = 1\nfrom urllib import request", "no-network", 2, 1),
        ("import ctypes.util", "no-ctypes", 1, 1),
        ("getattr(__builtins__, 'ev'+'al')('1')", "no-builtins-access", 1, 1),
        ("import builtins\nbuiltins.__dict__['exec']", "no-builtins-access", 2, 1),
        ("vars(__builtins__)['eval']", "no-builtins-access", 1, 1),
        ("globals()['__builtins__']", "no-builtins-access", 1, 1),
        ("().__class__.__base__.__subclasses__()", "no-builtins-access", 1, 1),
        ("import importlib\nimportlib.import_module('so'+'cket')", "no-dynamic-import", 2, 1),
        ("import importlib\nimportlib.import_module('socket')", "no-network", 2, 1),
        ("name = 'os'\n__import__(name)", "no-dynamic-import", 2, 1),
        ("imp = __import__\nimp('os')", "no-dynamic-import", 1, 7),
        ("code = 'print(1)'\nexec(code)", "no-dynamic-eval", 2, 1),
        ("e = eval\ne('1')", "no-dynamic-eval", 1, 5),
        ("import builtins\nbuiltins.eval(input())", "no-dynamic-eval", 2, 1),
        ("compile(source, 'x', 'exec')", "no-dynamic-eval", 1, 1),
        ("open('/etc/passwd').read()", "no-absolute-open", 1, 1),
        ("import io\nio.open(file='/root/x', mode='w')", "no-absolute-open", 2, 1),
        ("x = 'é'; open('/etc/shadow')", "no-absolute-open", 1, 10),
    ]
    ALLOWED = [
        "eval('1 + 1')",
        "exec('x = 1')",
        "import json, importlib\nimportlib.import_module('json')",
        "__import__('json').dumps(1)",
        "import re\nre.compile('a+')",
        "def eval(s):\n    return s\neval(input)",
        "open('data.txt', 'w').write('x')",
        "open('/tmp/scratch', 'w').close()",
        # The work dir by its absolute name and by its alias (not run: this is the host).
        "if False:\n    open('/home/user/data.txt', 'w')",
        "if False:\n    open('/work/sub/data.txt')",
        "import os.path\nos.path.join('a', 'b')",
        "import os\nos.listdir('.')",
    ]

    def test_strict_refuses_and_does_not_run(self):
        strict = load_policy("strict")
        for code, rule, line, column in self.REFUSED:
            with self.subTest(code=code):
                run = run_agent(code, policy=strict)
                self.assertFinished(run, 1)
                findings = run.one("findings")["findings"]
                first = [f for f in findings if f["severity"] == "error"][0]
                self.assertEqual((first["rule"], first["line"], first["column"]), (rule, line, column),
                                 findings)
                self.assertTrue(first["message"] and first["suggestion"])
                error = run.error
                self.assertEqual((error["phase"], error["ename"]), ("policy", "PolicyViolation"))
                self.assertIn("strict", error["evalue"])
                self.assertEqual(error["line"], line)
                self.assertIn("PolicyViolation: [%s]" % rule, "\n".join(error["traceback"]))
                self.assertEqual(run.stdout, b"")
                self.assertEqual(run.work, {})
                self.assertIn(b"PolicyViolation", run.stderr)

    def test_refused_code_never_runs(self):
        run = run_agent("open('ran.txt', 'w').write('x')\nprint('ran')\nimport socket",
                        policy=load_policy("strict"))
        self.assertFinished(run, 1)
        self.assertEqual(run.work, {})
        self.assertEqual(run.stdout, b"")

    def test_strict_allows_ordinary_code(self):
        strict = load_policy("strict")
        for code in self.ALLOWED:
            with self.subTest(code=code):
                run = run_agent(code, policy=strict)
                self.assertClean(run)
                self.assertEqual(run.of_type("findings"), [])

    def test_permissive_refuses_nothing(self):
        permissive = load_policy("permissive")
        self.assertEqual(permissive["rules"], [])
        for code, _, _, _ in self.REFUSED[:12]:
            with self.subTest(code=code):
                run = run_agent(code, mode="check", policy=permissive)
                self.assertFinished(run, 0)
                self.assertEqual(run.of_type("findings"), [])
        run = run_agent("import subprocess\nsubprocess.run(['true']).returncode", policy=permissive)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["text/plain"], "0")

    def test_warn_action_reports_and_runs(self):
        profile = {"name": "custom", "rules": [
            {"id": "prefer-pathlib", "action": "warn", "calls": ["os.path.*"],
             "message": "{name} is old style", "suggestion": "use pathlib"}]}
        run = run_agent("import os\nprint(os.path.join('a', 'b'))", policy=profile)
        self.assertClean(run)
        self.assertEqual(run.one("findings")["findings"], [
            {"rule": "prefer-pathlib", "severity": "warning", "line": 2, "column": 7,
             "message": "os.path.join is old style", "suggestion": "use pathlib"}])
        self.assertEqual(run.stdout, b"a/b\n")
        self.assertEqual(run.events[0]["type"], "findings")

    def test_bad_profile_is_an_internal_error(self):
        run = run_agent("1", policy={"name": "x", "rules": [{"id": "r", "calls": ["a"], "typo": 1}]})
        self.assertFinished(run, 70)
        self.assertIn("typo", run.error["evalue"])


class CheckModeTest(AgentTestCase):
    def test_check_never_runs_the_code(self):
        run = run_agent("open('x', 'w').write('1')\nprint('ran')\n1 / 0", mode="check")
        self.assertFinished(run, 0)
        self.assertEqual(run.events, [{"type": "exit", "code": 0}])
        self.assertEqual(run.work, {})
        self.assertEqual((run.stdout, run.stderr), (b"", b""))

    def test_check_with_strict_policy(self):
        run = run_agent("import socket\nsocket.socket()", mode="check", policy=load_policy("strict"))
        self.assertFinished(run, 1)
        self.assertEqual([e["type"] for e in run.events], ["findings", "error", "exit"])
        self.assertEqual(run.error["phase"], "policy")
        self.assertEqual((run.stdout, run.stderr), (b"", b""))

    def test_check_reports_compile_warnings(self):
        run = run_agent("import re\nre.compile('\\d')", mode="check")
        self.assertFinished(run, 0)
        self.assertEqual([(f["rule"], f["line"]) for f in run.one("findings")["findings"]],
                         [("DeprecationWarning", 2)])


# ---------------------------------------------------------------------------------------------
# Warm mode: serve() in a forked child, warm_up() in a zygote.

def load_agent_module():
    """Imports the agent the way the zygote does (worker_main.cc): the package from its parent
    directory, then its warm module, which has serve() and warm_up()."""
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    parent = os.path.dirname(os.path.abspath(AGENT))
    sys.path.insert(0, parent)
    try:
        return importlib.import_module("execbox_agent.warm")
    finally:
        sys.path.remove(parent)


def send_request(sock, body, fds):
    socket.send_fds(sock, [struct.pack("<Q", len(body))], fds)
    sock.sendall(body)


def host_execute(sock, work, code, stdin=b"", filename="<cell>", timeout=30, **extra):
    """The host's side of one execution: fresh pipes, the request, everything read to EOF."""
    request = {"mode": "run", "code": code, "filename": filename, "policy": None,
               "figures": FIGURES, "max_repr_bytes": 1048576, "max_stream_event_bytes": 1048576}
    request.update(extra)
    body = json.dumps(request).encode()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    report_r, report_w = os.pipe()
    try:
        send_request(sock, body, [stdin_r, stdout_w, stderr_w, report_w])
    finally:
        for fd in (stdin_r, stdout_w, stderr_w, report_w):
            os.close(fd)
    os.write(stdin_w, stdin)  # small: fits the pipe
    os.close(stdin_w)
    data = {stdout_r: b"", stderr_r: b"", report_r: b""}
    pending, deadline = set(data), time.monotonic() + timeout
    try:
        while pending:
            ready, _, _ = select.select(list(pending), [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise AssertionError("no EOF on the execution's pipes after %s s: %r" % (timeout, data))
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    data[fd] += chunk
                else:
                    pending.discard(fd)
    finally:
        for fd in data:
            os.close(fd)
    events = [json.loads(line.decode("utf-8")) for line in data[report_r].splitlines()]
    files = {}
    for root, _, names in os.walk(work):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, work)] = f.read()
    return Run(None, data[stdout_r], data[stderr_r], events, files)


class ForkedWorker:
    """A child forked from this process that imports the agent and serves requests, as a
    zygote's child does once the C++ side has locked it down."""

    def __init__(self, session):
        self.work = tempfile.mkdtemp(prefix="execbox-warm-")
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # The child's own fd 2 (where it reports a broken channel), until a request replaces it.
        self._stderr_r, stderr_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                parent_end.close()
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(stderr_w, 2)
                os.chdir(self.work)
                load_agent_module().serve(child_end.detach(), session)
            finally:
                os._exit(99)  # serve() never returns
        child_end.close()
        os.close(stderr_w)
        self.pid, self.sock, self.status = pid, parent_end, None

    def own_stderr(self):
        """What the child wrote on its own fd 2 (read once it has exited)."""
        self.wait()
        chunks = []
        while True:
            chunk = os.read(self._stderr_r, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def execute(self, code, **kwargs):
        return host_execute(self.sock, self.work, code, **kwargs)

    def wait(self, timeout=30):
        """The child's exit status (as returncode: -N for a signal)."""
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                self.status = "killed"
                raise AssertionError("the worker did not exit within %s s" % timeout)
            else:
                time.sleep(0.005)
        return self.status

    def close(self):
        self.sock.close()
        if self.status is None:
            try:
                self.wait(10)
            except AssertionError:
                pass
        os.close(self._stderr_r)
        shutil.rmtree(self.work, ignore_errors=True)


class WarmTestCase(AgentTestCase):
    def worker(self, session):
        worker = ForkedWorker(session)
        self.addCleanup(worker.close)
        return worker

    def assertEnded(self, run, code):
        self.assertEqual(run.events[-1], {"type": "exit", "code": code}, run)
        self.assertEqual(len(run.of_type("exit")), 1, run)


class ServeTest(WarmTestCase):
    def test_one_shot_run(self):
        worker = self.worker(session=False)
        run = worker.execute("import signal, sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                             "name = input()\n"
                             "(name, __name__, sys.argv, signal.getsignal(signal.SIGINT) is "
                             "signal.default_int_handler, signal.getsignal(signal.SIGPIPE) == "
                             "signal.SIG_IGN)", stdin=b"warm\n")
        self.assertEqual(run.stdout, b"out\n")
        self.assertEqual(run.stderr, b"err\n")
        self.assertEqual(run.streams(), [("stdout", "out\n"), ("stderr", "err\n")])
        self.assertEqual(run.one("result")["data"]["text/plain"],
                         "('warm', '__main__', ['<cell>'], True, True)")
        self.assertEnded(run, 0)
        self.assertEqual(worker.wait(), 0)

    def test_one_shot_exit_code_and_error(self):
        worker = self.worker(session=False)
        run = worker.execute("import sys\nsys.exit(3)")
        self.assertEnded(run, 3)
        self.assertEqual(worker.wait(), 3)
        worker = self.worker(session=False)
        run = worker.execute("def f():\n    raise ValueError('v')\nf()", filename="job.py")
        self.assertIn('  File "job.py", line 2, in f', run.error["traceback"])
        self.assertNoAgentFrames(run.error["traceback"])
        self.assertEnded(run, 1)
        self.assertEqual(worker.wait(), 1)

    def test_one_shot_runs_exit_handlers(self):
        worker = self.worker(session=False)
        run = worker.execute("import atexit, threading, time\natexit.register(print, 'atexit')\n"
                             "threading.Thread(target=lambda: (time.sleep(0.1), print('thread')))"
                             ".start()\nprint('main')")
        self.assertEqual(run.stdout, b"main\nthread\natexit\n")
        self.assertEnded(run, 0)

    def test_input_files_are_written_and_read(self):
        worker = self.worker(session=False)
        inputs = [{"name": "data/sub/table.csv", "content_base64": base64.b64encode(b"a,b\n1,2\n").decode()},
                  {"name": "./top.bin", "content_base64": base64.b64encode(b"\x00\xff").decode()}]
        run = worker.execute("import os, stat\n"
                             "(open('data/sub/table.csv').read(), open('top.bin', 'rb').read(), "
                             "oct(stat.S_IMODE(os.stat('top.bin').st_mode)))", inputs=inputs)
        self.assertEqual(run.one("result")["data"]["text/plain"], "('a,b\\n1,2\\n', b'\\x00\\xff', '0o644')")
        self.assertEnded(run, 0)
        self.assertEqual(run.work["data/sub/table.csv"], b"a,b\n1,2\n")

    def test_input_names_outside_the_work_dir_are_refused(self):
        for name in ("../escape.txt", "/tmp/absolute.txt", "a/../../b"):
            with self.subTest(name=name):
                worker = self.worker(session=False)
                run = worker.execute("print('ran')", inputs=[{"name": name, "content_base64": ""}])
                self.assertEqual(run.error["phase"], "internal")
                self.assertIn("not a relative path", run.error["evalue"])
                self.assertEqual(run.stdout, b"")
                self.assertEnded(run, 70)
                self.assertEqual(worker.wait(), 70)
                self.assertFalse(os.path.exists(os.path.join(os.path.dirname(worker.work), "escape.txt")))

    def test_session_keeps_globals_imports_and_sources(self):
        worker = self.worker(session=True)
        first = worker.execute("import json\nx = 41\n\ndef f():\n    return 1 / 0\n"
                               "import atexit\natexit.register(print, 'atexit')\nprint('one')\n"
                               "import sys\nmain = sys.modules['__main__']")
        self.assertEqual(first.stdout, b"one\n")  # no atexit handler at the end of an execution
        self.assertEnded(first, 0)
        second = worker.execute("print('two')\ndisplay('shown')\ndisplay('x' * 500)\n"
                                "(x + 1, json.dumps([1]), sys.modules['__main__'] is main)",
                                max_repr_bytes=200)
        self.assertEqual(second.stdout, b"two\n")  # only this execution's output
        shown = [e["data"]["text/plain"] for e in second.of_type("display")]
        self.assertEqual(shown[0], "'shown'")
        self.assertIn("truncated", shown[1])  # display() works with this execution's limits
        self.assertEqual(second.one("result")["data"]["text/plain"], "(42, '[1]', True)")
        self.assertEnded(second, 0)
        third = worker.execute("y = 2\nf()")
        error = third.error
        self.assertEqual(error["ename"], "ZeroDivisionError")
        # This execution runs as <cell-3>: <cell> is the first one's, whose line shows.
        tb = error["traceback"]
        self.assertEqual(tb[1:3], ['  File "<cell-3>", line 2, in <module>', "    f()"])
        self.assertIn('  File "<cell>", line 5, in f', tb)
        self.assertIn("    return 1 / 0", tb)
        self.assertEqual(error["line"], 2)
        self.assertNoAgentFrames(tb)
        self.assertEnded(third, 1)
        fourth = worker.execute("y", filename="job.py")
        self.assertEqual(fourth.one("result")["data"]["text/plain"], "2")
        worker.sock.close()
        self.assertEqual(worker.wait(), 0)

    def test_session_stdin_is_fresh_for_each_execution(self):
        worker = self.worker(session=True)
        run = worker.execute("input()", stdin=b"a\nb\n")
        self.assertEqual(run.one("result")["data"]["text/plain"], "'a'")
        run = worker.execute("(input(), input())", stdin=b"c\n")
        self.assertEqual(run.error["ename"], "EOFError")  # not 'b' left over from before
        self.assertEnded(run, 1)

    def test_system_exit_does_not_end_a_session(self):
        worker = self.worker(session=True)
        run = worker.execute("y = 5\nimport sys\nsys.exit(4)\nprint('not reached')")
        self.assertEqual(run.of_type("error"), [])
        self.assertEqual(run.stdout, b"")
        self.assertEnded(run, 4)
        run = worker.execute("exit()")  # closes sys.stdin, which the next execution replaces
        self.assertEnded(run, 0)
        run = worker.execute("x = = 1", mode="check")
        self.assertEqual(run.error["phase"], "compile")
        self.assertEnded(run, 1)
        run = worker.execute("y * 2")
        self.assertEqual(run.one("result")["data"]["text/plain"], "10")
        self.assertEnded(run, 0)
        worker.sock.close()
        self.assertEqual(worker.wait(), 0)

    def test_forked_children_get_their_own_random_numbers(self):
        random.seed(1)
        first, second = self.worker(session=False), self.worker(session=False)
        numbers = [w.execute("import random\nrandom.random()").one("result")["data"]["text/plain"]
                   for w in (first, second)]
        self.assertNotEqual(numbers[0], numbers[1])

    def test_eof_on_the_channel_ends_the_child(self):
        worker = self.worker(session=True)
        worker.sock.close()
        self.assertEqual(worker.wait(), 0)
        self.assertEqual(worker.own_stderr(), b"")

    def test_bad_header_ends_the_child(self):
        worker = self.worker(session=True)
        worker.sock.sendall(struct.pack("<Q", 2) + b"{}")  # no fds
        self.assertEqual(worker.wait(), 70)
        self.assertEqual(worker.own_stderr(),
                         b"execbox agent: a request header carries 0 file descriptors, not 4\n")
        worker = self.worker(session=True)
        worker.sock.sendall(b"\x01\x02\x03")  # EOF inside the header
        worker.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(worker.wait(), 70)
        self.assertIn(b"closed inside a request header", worker.own_stderr())
        worker = self.worker(session=False)
        fds = [os.open(os.devnull, os.O_RDWR) for _ in range(5)]
        send_request(worker.sock, b"{}", fds)  # one fd too many
        for fd in fds:
            os.close(fd)
        self.assertEqual(worker.wait(), 70)
        self.assertIn(b"carries 5 file descriptors, not 4", worker.own_stderr())

    def test_bad_json_body_ends_the_child(self):
        worker = self.worker(session=True)
        run = worker.execute("x = 1")
        self.assertEnded(run, 0)
        stderr_r, stderr_w = os.pipe()
        report_r, report_w = os.pipe()
        stdin_r, stdout_w = os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)
        send_request(worker.sock, b"{not json", [stdin_r, stdout_w, stderr_w, report_w])
        for fd in (stdin_r, stdout_w, stderr_w, report_w):
            os.close(fd)
        self.assertEqual(worker.wait(), 70)
        with os.fdopen(stderr_r, "rb") as f:
            self.assertIn(b"not JSON", f.read())
        with os.fdopen(report_r, "rb") as f:
            events = [json.loads(line) for line in f.read().splitlines()]
        self.assertEqual(events[0]["phase"], "internal")
        self.assertEqual(events[-1], {"type": "exit", "code": 70})


# A zygote in a subprocess: imports the agent, warm_up(preload), seeds the PRNGs the same for
# every child, reports, forks one serving child per fd given, and reports their statuses.
ZYGOTE = r"""
import gc, json, os, random, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # as worker_main.cc imports the package
import execbox_agent.warm as agent
del sys.path[0]
preload, session, fds = json.loads(sys.argv[2]), sys.argv[3] == "1", [int(a) for a in sys.argv[4:]]
failures = agent.warm_up(preload)
random.seed(1)
if "numpy" in sys.modules:
    sys.modules["numpy"].random.seed(1)
print(json.dumps({"failures": failures, "freeze_count": gc.get_freeze_count(),
                  "threads": len(os.listdir("/proc/self/task")), "path": sys.path,
                  "modules": sorted(sys.modules)}), flush=True)
children = []
for fd in fds:
    pid = os.fork()
    if pid == 0:
        for other in fds:
            if other != fd:
                os.close(other)
        agent.serve(fd, session)
    children.append(pid)
for fd in fds:
    os.close(fd)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]), flush=True)
"""


class Zygote:
    def __init__(self, preload, children=0, session=False):
        self.work = tempfile.mkdtemp(prefix="execbox-zygote-")
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(children)]
        child_fds = [b.fileno() for _, b in pairs]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "HOME": self.work, "MPLBACKEND": "Agg", "MPLCONFIGDIR": _shared["config"],
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [PYTHON, "-I", "-S", "-B", "-u", "-X", "utf8", "-c", ZYGOTE, AGENT, json.dumps(preload),
             "1" if session else "0"] + [str(fd) for fd in child_fds],
            cwd=self.work, env=env, stdout=subprocess.PIPE, pass_fds=child_fds)
        for _, b in pairs:
            b.close()
        self.socks = [a for a, _ in pairs]
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise AssertionError("the zygote failed")
        self.status = json.loads(line)

    def execute(self, child, code, **kwargs):
        return host_execute(self.socks[child], self.work, code, **kwargs)

    def finish(self, timeout=60):
        """Closes the channels; returns the children's exit statuses."""
        for sock in self.socks:
            sock.close()
        out, _ = self.proc.communicate(timeout=timeout)
        return json.loads(out)

    def close(self):
        for sock in self.socks:
            sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        self.proc.stdout.close()
        shutil.rmtree(self.work, ignore_errors=True)


class WarmUpTest(WarmTestCase):
    def zygote(self, preload, children=0, session=False):
        zygote = Zygote(preload, children, session)
        self.addCleanup(zygote.close)
        return zygote

    def test_failed_import_is_reported_and_skipped(self):
        status = self.zygote(["json", "no_such_module_xyz"]).status
        self.assertEqual(len(status["failures"]), 1, status["failures"])
        self.assertTrue(status["failures"][0].startswith(
            "no_such_module_xyz: ModuleNotFoundError: "), status["failures"])
        self.assertGreater(status["freeze_count"], 0)
        self.assertEqual(status["threads"], 1)
        self.assertIn("/usr/lib/python3/dist-packages", status["path"])
        self.assertNotIn("", status["path"])
        for module in ("json", "warnings", "gc", "atexit", "weakref", "fcntl", "_socket", "ast"):
            self.assertIn(module, status["modules"])
        self.assertNotIn("matplotlib", status["modules"])

    @unittest.skipUnless(HAVE_NUMPY, "python3-numpy is not installed")
    def test_children_reseed_numpy_and_random(self):
        zygote = self.zygote(["numpy"], children=2)
        self.assertEqual(zygote.status["failures"], [])
        code = "import random\nimport numpy as np\n(random.random(), float(np.random.random()))"
        results = [zygote.execute(i, code).one("result")["data"]["text/plain"] for i in (0, 1)]
        self.assertNotEqual(results[0], results[1])
        first, second = (eval(r) for r in results)
        self.assertNotEqual(first[0], second[0])
        self.assertNotEqual(first[1], second[1])
        self.assertEqual(zygote.finish(), [0, 0])

    @unittest.skipUnless(HAVE_MATPLOTLIB, "python3-matplotlib is not installed")
    def test_preloaded_pyplot_in_a_session(self):
        zygote = self.zygote(["numpy", "matplotlib"], children=1, session=True)
        self.assertEqual(zygote.status["failures"], [])
        self.assertIn("matplotlib.pyplot", zygote.status["modules"])
        run = zygote.execute(0, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
                             "plt.figure()\nplt.plot([3, 1])")
        shown = run.of_type("display")
        self.assertEqual(len(shown), 2, run)  # show() and the figure left open
        for event in shown:
            png_size(base64.b64decode(event["data"]["image/png"]))
        self.assertEnded(run, 0)
        run = zygote.execute(0, "plt.plot([2, 2])\nplt.show()\nlen(plt.get_fignums())")
        self.assertEqual(len(run.of_type("display")), 1, run)  # this execution's report
        self.assertEqual(run.one("result")["data"]["text/plain"], "0")
        self.assertEqual(zygote.finish(), [0])


if __name__ == "__main__":
    unittest.main()
