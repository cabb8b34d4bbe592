"""The agent's modules as a graph: no two import each other, even through an import made inside
a function (the lazy imports that keep start-up cheap), every module imports alone in a fresh
interpreter, the leaf modules pull in nothing of the agent's, and none is too long to read in
one sitting."""
import ast
import os
import subprocess
import unittest

from test_agent import AGENT, PYTHON, AgentTestCase, run_agent

PACKAGE = "execbox_agent"
LEAVES = ("text", "errors", "wire_json", "import_hook")  # what every other module may use: they import nothing of ours
MAX_LINES = 420


def _modules():
    return sorted(name[:-3] for name in os.listdir(AGENT) if name.endswith(".py"))


def _imports(module):
    """The agent's modules that module imports anywhere in its source (top level or inside a
    function): `from .x import y`, `from . import x`, `from execbox_agent.x import y`,
    `import execbox_agent.x`."""
    with open(os.path.join(AGENT, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read(), module)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.split(".")[0] == PACKAGE:
                parts = node.module.split(".")
                found.update([parts[1]] if len(parts) > 1 else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1:
                    found.add(parts[1])
    return found


def find_cycle(graph):
    """One cycle of graph ({node: set of nodes}) as a list [a, b, ..., a], or None."""
    colour = {node: 0 for node in graph}  # 0 unseen, 1 on the current path, 2 done
    path = []

    def visit(node):
        colour[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if colour.get(target) == 1:
                return path[path.index(target):] + [target]
            if colour.get(target) == 0:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if colour[node] == 0:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


class ImportGraphTest(unittest.TestCase):
    def test_the_cycle_finder_finds_cycles(self):
        # The check below is only as good as this: a cycle through three modules, and none.
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}))

    def test_no_module_imports_itself_through_others(self):
        modules = _modules()
        graph = {module: _imports(module) & set(modules) for module in modules}
        self.assertIn("report", graph["streams"])  # the parser sees relative imports at all
        self.assertIn("text", graph["sandbox_ops"])  # and those inside a function
        self.assertIsNone(find_cycle(graph), "the agent's modules import each other in a circle")

    def test_the_leaves_import_nothing_of_the_agent(self):
        for leaf in LEAVES:
            self.assertEqual(_imports(leaf), set(), leaf)

    def test_every_module_imports_alone(self):
        parent = os.path.dirname(os.path.abspath(AGENT))
        for module in _modules():
            if module == "__main__":
                continue  # a script: the cold-agent tests run it
            with self.subTest(module=module):
                # -I -S as the sandbox runs it: nothing of the caller's environment helps.
                probe = ("import sys; sys.path.insert(0, %r); import %s.%s; "
                         "print(sorted(m.split('.')[1] for m in sys.modules if m.startswith('%s.')))"
                         % (parent, PACKAGE, module, PACKAGE))
                done = subprocess.run([PYTHON, "-I", "-S", "-B", "-c", probe], capture_output=True,
                                      text=True, timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)
                if module in LEAVES:
                    self.assertEqual(done.stdout.strip(), repr([module]))

    def test_no_module_is_too_long_to_read_in_one_sitting(self):
        for module in _modules():
            with open(os.path.join(AGENT, module + ".py"), encoding="utf-8") as f:
                lines = sum(1 for _ in f)
            self.assertLessEqual(lines, MAX_LINES, module)


class ColdStartTest(AgentTestCase):
    """What the cold agent imports before the user's code runs is part of every cold run's time:
    re (with enum, functools, collections) and json alone are ~12 ms, linecache (tokenize) ~4."""

    def test_the_cold_agent_leaves_re_json_and_linecache_to_the_code(self):
        run = run_agent("import sys\nprint(sorted(m for m in ('re', 'json', 'linecache', 'tokenize', "
                        "'datetime', 'enum', 'functools') if m in sys.modules))")
        self.assertEqual(run.exit_code, 0, run)
        self.assertEqual(run.stream_text("stdout"), "[]\n")

    def test_a_traceback_after_linecache_is_imported_late_shows_the_line(self):
        # The source waits for linecache's import (cell.register_source); the code imports it
        # itself first, then fails: the traceback still quotes the line.
        run = run_agent("import linecache\nassert '<cell>' in linecache.cache\n1 / 0  # here\n")
        self.assertIn("1 / 0  # here", run.stream_text("stderr"), run)
        self.assertEqual(run.error["ename"], "ZeroDivisionError")


if __name__ == "__main__":
    unittest.main()
