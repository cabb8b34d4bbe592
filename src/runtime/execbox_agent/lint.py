# Policy lint. A courtesy to the model -- fast, precise feedback with a suggestion of what to
# do instead -- and NEVER the security boundary: Python is far too dynamic for a static check
# to stop hostile code, and the jail (namespaces, seccomp, Landlock, cgroups) is what does.
#
# A profile is data: {"name": str, "description": str, "rules": [rule, ...]}. A rule:
#   "id": str, "action": "refuse" | "warn", "message": str, "suggestion": str,
#   "description": str (ignored), and one or more matchers:
#   "imports": [module pattern]   import x / from x import y / __import__('x') /
#                                 importlib.import_module('x'); a pattern also matches the
#                                 module's submodules
#   "calls": [qualified pattern]  any use -- call or mere reference -- of a qualified name,
#                                 resolved through import aliases, `x = os`, getattr(os, 'y'),
#                                 sys.modules['x'], __import__('x').y, and `from x import *`
#   "dynamic_calls": [name]       calls whose first argument is not a string literal, and any
#                                 use of the name other than a direct call (f = eval; f(s))
#   "path_calls": [name], "allowed_paths": [dir]
#                                 calls with a literal path argument outside the allowed dirs
#                                 (the work dir -- the current directory -- is always allowed;
#                                 relative paths are resolved against it)
#   "builtins_access": true       getattr/setattr/delattr/hasattr/vars on the builtins module
#                                 (`__builtins__` or `import builtins`), its __dict__, and
#                                 subscripts of it or with a '__builtins__' key
#   "attributes": [pattern]       attribute names, also via getattr(x, 'name')
# Patterns are fnmatch patterns. "{name}" in message and suggestion becomes what matched.
# Qualified names of builtins are bare: builtins.eval is "eval".
import _ast  # the node classes, without the cost of importing ast (enum, contextlib, ...)
import os
import sys

from .errors import RequestError
from .text import split_lines

RULE_KEYS = {"id", "action", "message", "suggestion", "description", "imports", "calls",
             "dynamic_calls", "path_calls", "allowed_paths", "builtins_access", "attributes"}
IMPORT_FUNCTIONS = {"__import__", "importlib.__import__", "importlib.import_module"}
BUILTINS_PROBES = {"getattr", "setattr", "delattr", "hasattr", "vars"}


def compile_policy(profile):
    if not isinstance(profile, dict):
        raise RequestError("policy must be an object")
    rules = profile.get("rules", [])
    if not isinstance(rules, list):
        raise RequestError("policy.rules must be a list")
    compiled = []
    for rule in rules:
        if not isinstance(rule, dict) or not isinstance(rule.get("id"), str):
            raise RequestError("each policy rule must be an object with a string id")
        unknown = set(rule) - RULE_KEYS
        if unknown:
            raise RequestError("policy rule %s: unknown keys %s" % (rule["id"], sorted(unknown)))
        if rule.get("action", "refuse") not in ("refuse", "warn"):
            raise RequestError("policy rule %s: action must be refuse or warn" % rule["id"])
        for key in ("imports", "calls", "dynamic_calls", "path_calls", "allowed_paths", "attributes"):
            value = rule.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RequestError("policy rule %s: %s must be a list of strings" % (rule["id"], key))
        compiled.append(dict(rule, action=rule.get("action", "refuse"),
                             _imports=_pattern_matcher(rule.get("imports")),
                             _calls=_pattern_matcher(rule.get("calls")),
                             _attributes=_pattern_matcher(rule.get("attributes"))))
    return compiled


def _pattern_matcher(patterns):
    """One regular expression for a list of fnmatch patterns (the lint checks every name)."""
    if not patterns:
        return lambda name: False
    import fnmatch
    import re
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)).match


def _children(node):
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, _ast.AST):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, _ast.AST))


def _walk(tree):
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(_children(node))


def _norm(name):
    return name[len("builtins."):] if name.startswith("builtins.") else name


def _literal_str(node):
    return node.value if isinstance(node, _ast.Constant) and isinstance(node.value, str) else None


def _first_arg(call, keywords=()):
    if call.args and not isinstance(call.args[0], _ast.Starred):
        return call.args[0]
    for kw in call.keywords:
        if kw.arg in keywords:
            return kw.value
    return None


class Linter:
    def __init__(self, rules, source):
        self._rules = rules
        self._lines = split_lines(source)
        self._aliases = {}  # local name -> [qualified names]
        self._stars = []  # modules imported with *
        self._bound = set()  # names bound by the code itself (they shadow builtins)
        self._called = set()  # id() of nodes that are the function of a call
        self._findings = {}

    def run(self, tree):
        self._collect_names(tree)
        self.visit(tree)
        return sorted(self._findings.values(), key=lambda f: (f["line"], f["column"], f["rule"]))

    # Name resolution -------------------------------------------------------------------------

    def _collect_names(self, tree):
        assignments = []
        for node in _walk(tree):
            if isinstance(node, _ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._aliases[alias.asname] = [alias.name]
                    else:
                        top = alias.name.split(".")[0]
                        self._aliases[top] = [top]
            elif isinstance(node, _ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        self._stars.append(node.module)
                    else:
                        self._aliases[alias.asname or alias.name] = [node.module + "." + alias.name]
            elif isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
                self._bound.add(node.name)
            elif isinstance(node, _ast.arg):
                self._bound.add(node.arg)
            elif isinstance(node, _ast.Name) and not isinstance(node.ctx, _ast.Load):
                self._bound.add(node.id)
            elif isinstance(node, _ast.ExceptHandler) and node.name:
                self._bound.add(node.name)
            if isinstance(node, _ast.Assign) and len(node.targets) == 1:
                assignments.append((node.targets[0], node.value))
            elif isinstance(node, _ast.NamedExpr):
                assignments.append((node.target, node.value))
        # `o = os`, `imp = __import__`, `s = getattr(os, 'system')`: twice, for chains.
        for _ in range(2):
            for target, value in assignments:
                if isinstance(target, _ast.Name):
                    names = self._qualified(value)
                    if names:
                        self._aliases[target.id] = names

    def _qualified(self, node):
        """The qualified names an expression may stand for ([] if unknown)."""
        if isinstance(node, _ast.Name):
            if node.id in self._aliases:
                return self._aliases[node.id]
            if node.id == "__builtins__":
                return ["builtins"]
            if node.id in self._bound:
                return []
            return [node.id] + [star + "." + node.id for star in self._stars]
        if isinstance(node, _ast.Attribute):
            return [base + "." + node.attr for base in self._qualified(node.value)]
        if isinstance(node, _ast.Subscript):
            key = _literal_str(node.slice)
            if key is not None and "sys.modules" in self._qualified(node.value):
                return [key]
            return []
        if isinstance(node, _ast.Call):
            functions = {_norm(n) for n in self._qualified(node.func)}
            if "getattr" in functions and len(node.args) >= 2:
                attr = _literal_str(node.args[1])
                return [base + "." + attr for base in self._qualified(node.args[0])] if attr else []
            arg = _first_arg(node, ("name",))
            module = _literal_str(arg) if arg is not None else None
            if module is None or module.startswith("."):
                return []
            if functions & {"__import__", "importlib.__import__"}:
                fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
                return [module if fromlist else module.split(".")[0]]
            if "importlib.import_module" in functions:
                return [module]
        return []

    # Findings --------------------------------------------------------------------------------

    def _column(self, lineno, col_offset):
        if not 0 < lineno <= len(self._lines):
            return col_offset + 1
        prefix = self._lines[lineno - 1].encode("utf-8", "surrogatepass")[:col_offset]
        return len(prefix.decode("utf-8", "replace")) + 1

    def _add(self, rule, node, name):
        line = getattr(node, "lineno", 1)
        column = self._column(line, getattr(node, "col_offset", 0))
        key = (rule["id"], line, column)
        if key in self._findings:
            return
        end_line = getattr(node, "end_lineno", None) or line
        end_column = self._column(end_line, node.end_col_offset) if end_line == line and \
            getattr(node, "end_col_offset", None) is not None else None
        name = name if len(name) <= 80 else name[:77] + "..."
        self._findings[key] = {
            "rule": rule["id"],
            "severity": "error" if rule["action"] == "refuse" else "warning",
            "line": line,
            "column": column,
            "message": rule.get("message", "refused by rule %s: {name}" % rule["id"]).replace("{name}", name),
            "suggestion": rule.get("suggestion", "").replace("{name}", name),
            "_end_column": end_column,
        }

    def _segment(self, node):
        """The node's source text (its first line if it spans more)."""
        line = self._lines[node.lineno - 1].encode("utf-8", "surrogatepass")
        end = node.end_col_offset if node.end_lineno == node.lineno else len(line)
        return line[node.col_offset:end].decode("utf-8", "replace").rstrip("\r\n")

    def _check_import(self, module, node):
        prefixes = []
        for part in module.split("."):
            prefixes.append(prefixes[-1] + "." + part if prefixes else part)
        for rule in self._rules:
            if any(rule["_imports"](p) for p in prefixes):
                self._add(rule, node, module)

    def _check_reference(self, names, node):
        called = id(node) in self._called
        for name in map(_norm, names):
            for rule in self._rules:
                if rule["_calls"](name):
                    self._add(rule, node, name)
                if not called and name in rule.get("dynamic_calls", ()):
                    self._add(rule, node, name)

    def _check_attribute_name(self, attr, node):
        for rule in self._rules:
            if rule["_attributes"](attr):
                self._add(rule, node, attr)

    def _check_path(self, rule, node, path):
        allowed = [os.getcwd()] + rule.get("allowed_paths", [])
        full = os.path.normpath(os.path.join(os.getcwd(), path))
        if not any(full == a.rstrip("/") or full.startswith(a.rstrip("/") + "/") for a in allowed):
            self._add(rule, node, path)

    def _is_builtins(self, node):
        return "builtins" in self._qualified(node)

    # Visitors (ast.NodeVisitor's protocol) ---------------------------------------------------

    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node):
        for child in _children(node):
            self.visit(child)

    def visit_Import(self, node):
        for alias in node.names:
            self._check_import(alias.name, node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            self._check_import(node.module, node)
            for alias in node.names:
                if alias.name != "*":
                    # `from os import system` uses os.system; `from urllib import request`
                    # imports urllib.request.
                    self._check_import(node.module + "." + alias.name, node)
                    self._check_reference([node.module + "." + alias.name], node)
        self.generic_visit(node)

    def visit_Call(self, node):
        self._called.add(id(node.func))
        functions = [_norm(n) for n in self._qualified(node.func)]
        arg = _first_arg(node, ("source", "name", "file", "path", "filename", "expression",
                                "object"))
        literal = _literal_str(arg) if arg is not None else None
        for rule in self._rules:
            for function in functions:
                if function in rule.get("dynamic_calls", ()) and not (
                        isinstance(arg, _ast.Constant) and isinstance(arg.value, (str, bytes))):
                    self._add(rule, node, function)
                if function in rule.get("path_calls", ()) and literal is not None:
                    self._check_path(rule, node, literal)
                if rule.get("builtins_access") and function in BUILTINS_PROBES and \
                        node.args and self._is_builtins(node.args[0]):
                    self._add(rule, node, self._segment(node))
        for function in functions:
            if function in IMPORT_FUNCTIONS and literal is not None and not literal.startswith("."):
                self._check_import(literal, node)
            if function == "getattr" and len(node.args) >= 2:
                attr = _literal_str(node.args[1])
                if attr is not None:
                    self._check_attribute_name(attr, node)
                    self._check_reference(self._qualified(node), node)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        self._check_reference(self._qualified(node), node)
        self._check_attribute_name(node.attr, node)
        if node.attr == "__dict__" and self._is_builtins(node.value):
            self._builtins_access(node)
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, _ast.Load):
            self._check_reference(self._qualified(node), node)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self._is_builtins(node.value) or _literal_str(node.slice) == "__builtins__":
            self._builtins_access(node)
        self.generic_visit(node)

    def _builtins_access(self, node):
        for rule in self._rules:
            if rule.get("builtins_access"):
                self._add(rule, node, self._segment(node))


def lint(rules, source, tree):
    if not rules:
        return []
    # The visitor recurses once per level of nesting; what compile() accepted fits in this
    # (Python-to-Python calls use no C stack in 3.11).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        return Linter(rules, source).run(tree)
    except RecursionError:
        return [{"rule": "policy-check", "severity": "error", "line": 1, "column": 1,
                 "message": "the code is nested too deeply for the policy check",
                 "suggestion": "split deeply nested expressions into smaller statements",
                 "_end_column": None}]
    finally:
        sys.setrecursionlimit(limit)


def policy_error_event(policy_name, refusals, filename, source_lines):
    """A PolicyViolation shaped like a Python error: one block per refusal, with a caret."""
    lines = []
    for f in refusals:
        lines.append('  File "%s", line %d' % (filename, f["line"]))
        if 0 < f["line"] <= len(source_lines):
            text = source_lines[f["line"] - 1].rstrip("\r\n")
            stripped = text.lstrip(" \t\f")
            indent = len(text) - len(stripped)
            start = max(f["column"] - 1 - indent, 0)
            end = (f["_end_column"] or len(text) + 1) - 1 - indent
            lines.append("    " + stripped)
            lines.append("    " + " " * start + "^" * max(end - start, 1))
        message = "PolicyViolation: [%s] %s" % (f["rule"], f["message"])
        lines.append(message + (" Instead: " + f["suggestion"] if f["suggestion"] else ""))
    first = refusals[0]
    evalue = "the %s policy refused this code: line %d: %s" % (policy_name, first["line"], first["message"])
    if len(refusals) > 1:
        evalue += " (and %d more)" % (len(refusals) - 1)
    return {"type": "error", "phase": "policy", "ename": "PolicyViolation", "evalue": evalue,
            "traceback": lines, "line": first["line"], "column": first["column"]}


def public_finding(finding):
    return {k: v for k, v in finding.items() if not k.startswith("_")}
