# One cell: compiled for the syntax check with its last expression split off (its value is the
# result), run in a frame that tracebacks never show, and errors reported as Python would print
# them, with only the user's frames and lines.
import _ast  # the node classes, without the cost of importing ast (enum, contextlib, ...)
import builtins
import os
import sys

from .import_hook import AfterImportHook
from .missing import add_missing_module_note
from .text import cap_text, safe_str, split_lines

# traceback (with textwrap and contextlib) is imported where an error is formatted: a run
# without one never needs it, and it costs a cold start ~1 ms.

# This package's directory as its code objects name it (frames to hide), also from .pyc files.
AGENT_DIR = os.path.dirname((lambda: None).__code__.co_filename) + os.sep


# ---------------------------------------------------------------------------------------------
# Syntax check: parse, split off a trailing expression, compile both parts.

class CompileFailure(Exception):
    def __init__(self, syntax_error):
        super().__init__()
        self.syntax_error = syntax_error


def _source_error(source, filename, message, index):
    """A SyntaxError for source text that compile() rejects with something else (ValueError
    for NUL bytes in 3.11, UnicodeEncodeError for lone surrogates). Python 3.12 reports the NUL
    case as SyntaxError too, and either way the code is not valid Python: status syntax_error."""
    start = 0
    for line, text in enumerate(split_lines(source), 1):
        if index < start + len(text):
            break
        start += len(text)
    column = index - start + 1
    return SyntaxError(message, (filename, line, column, text.rstrip("\r\n"), line, column + 1))


def _ends_with_semicolon(lines, node):
    """Jupyter's convention: a trailing ';' after the last expression hides its value. After
    that expression only blanks, comments and ';' can follow."""
    rest = lines[node.end_lineno - 1].encode("utf-8", "surrogatepass")[node.end_col_offset:]
    rest = [rest.decode("utf-8", "replace")] + lines[node.end_lineno:]
    code = "".join(line.split("#", 1)[0] for line in rest)
    return code.strip().startswith(";")


def _future_flags(tree):
    import __future__
    flags = 0
    for node in tree.body:
        if isinstance(node, _ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def compile_cell(source, filename):
    """Returns (tree, body_code, last_code, show_last, warnings). The last statement, if it is
    an expression, is compiled separately in 'eval' mode so its value can become the result.
    Raises CompileFailure with a SyntaxError (or subclass) when the code is not valid."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tree = compile(source, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
            last = None
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                last = tree.body.pop()
            body_code = compile(tree, filename, "exec", dont_inherit=True)
            last_code = None
            if last is not None:
                last_code = compile(_ast.Expression(last.value), filename, "eval",
                                    _future_flags(tree), dont_inherit=True)
                tree.body.append(last)
        except (SyntaxError, RecursionError, MemoryError) as exc:  # also IndentationError, TabError
            # RecursionError: nested too deeply, as Python reports it for a file.
            raise CompileFailure(exc) from None
        except UnicodeEncodeError as exc:  # before ValueError, its base class
            message = "source code cannot contain lone surrogates (U+%04X)" % ord(source[exc.start])
            raise CompileFailure(_source_error(source, filename, message, exc.start)) from None
        except ValueError as exc:
            if "\0" not in source:
                raise
            raise CompileFailure(_source_error(source, filename, str(exc), source.index("\0"))) from None
    show_last = last is not None and not _ends_with_semicolon(split_lines(source), last)
    return tree, body_code, last_code, show_last, caught


def _add_missing_caret(lines, exc):
    """CPython prints no caret for some errors (TabError, unexpected indent); a model reads
    the position more easily with one, so add it under the reported column."""
    if exc.text is None or any(line.strip().startswith("^") for line in lines):
        return
    text = exc.text.rstrip("\r\n")
    stripped = text.lstrip()
    shown = "    " + stripped
    if shown not in lines:
        return
    indent = len(text) - len(stripped)
    column = max((exc.offset or 1) - 1 - indent, 0)
    column = min(column, max(len(stripped) - 1, 0))
    lines.insert(lines.index(shown) + 1, "    " + " " * column + "^")


def syntax_error_event(exc, filename, source_lines):
    """The error event for a SyntaxError, with the traceback lines Python would print."""
    if not isinstance(exc, SyntaxError):
        return {"type": "error", "phase": "compile", "ename": type(exc).__name__,
                "evalue": safe_str(exc),
                "traceback": ["%s: %s" % (type(exc).__name__, safe_str(exc))]}
    if exc.text is None and exc.lineno and 0 < exc.lineno <= len(source_lines):
        # Errors found by the compiler (not the parser), e.g. 'return' outside function,
        # come without the line; Python would read it from the file.
        exc.text = source_lines[exc.lineno - 1]
    exc.filename = filename
    import traceback
    lines = "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n").split("\n")
    _add_missing_caret(lines, exc)
    event = {"type": "error", "phase": "compile", "ename": type(exc).__name__,
             "evalue": safe_str(exc.msg), "traceback": lines}
    if exc.lineno:
        event["line"] = exc.lineno
    if exc.offset:
        event["column"] = exc.offset
    if exc.text is not None:
        event["text"] = exc.text.rstrip("\r\n")
    return event


def new_main_module(filename):
    """A fresh __main__ for the user's globals, in sys.modules so that pickle, dataclasses and
    typing find the user's classes."""
    module = type(sys)("__main__")
    module.__builtins__ = builtins
    if not (filename.startswith("<") and filename.endswith(">")):
        module.__file__ = filename  # a real file, as `python3 file.py` would have it
    sys.modules["__main__"] = module
    return module


def register_source(filename, source):
    """Tracebacks, warnings and inspect.getsource() read the user's lines from linecache;
    mtime None keeps checkcache() from dropping the entry. linecache imports tokenize and so
    re, ~6 ms of a cold run whose code may never fail: until something imports it, the entry
    waits in _LinecacheHook, which puts it in the cache as linecache is imported."""
    entry = (len(source), None, split_lines(source), filename)
    linecache = sys.modules.get("linecache")
    if linecache is not None:
        linecache.cache[filename] = entry
        return
    hook = next((f for f in sys.meta_path if isinstance(f, _LinecacheHook)), None)
    if hook is None:
        hook = _LinecacheHook()
        sys.meta_path.insert(0, hook)
    hook.sources[filename] = entry


class _LinecacheHook(AfterImportHook):
    """linecache's import, followed: the sources registered before it go in its cache."""

    def __init__(self):
        self.sources = {}
        super().__init__("linecache", lambda module: module.cache.update(self.sources))


# The frame that runs the user's module code. A warning with a stacklevel that reaches above
# the module (warnings.warn(..., stacklevel=2) at top level) lands here; Python reports such a
# warning as "sys:1: ..." and so does this frame: file "sys", line 1, module "sys".
_EXECUTE_SOURCE = "lambda body, last, ns: (exec(body, ns), None if last is None else eval(last, ns))[1]"
execute = eval(compile(_EXECUTE_SOURCE, "sys", "eval"), {"__name__": "sys", "__builtins__": builtins})


# ---------------------------------------------------------------------------------------------
# Tracebacks that show only the user's frames.

def _exception_chain(exc):
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend((e.__cause__, e.__context__))
        todo.extend(getattr(e, "exceptions", ()) if isinstance(e, BaseExceptionGroup) else ())


def strip_agent_frames(exc):
    """Removes this package's frames from the traceback of exc and of every exception chained to
    it. Library frames stay: an error inside numpy shows numpy's frames under the user's."""
    for e in _exception_chain(exc):
        kept, tb = [], e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if not code.co_filename.startswith(AGENT_DIR) and code is not execute.__code__:
                kept.append(tb)
            tb = tb.tb_next
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        if kept:
            kept[-1].tb_next = None
        e.__traceback__ = kept[0] if kept else None


def format_exception(exc):
    import traceback
    strip_agent_frames(exc)
    return traceback.format_exception(type(exc), exc, exc.__traceback__)


def run_error_event(exc, filename, limit):
    add_missing_module_note(exc)  # a module the sandbox lacks: say so, and what it has instead
    lines = format_exception(exc)
    text, _ = cap_text("".join(lines).rstrip("\n"), limit)
    event = {"type": "error", "phase": "run", "ename": type(exc).__name__,
             "evalue": cap_text(safe_str(exc), limit)[0], "traceback": text.split("\n")}
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is not None:
        event["line"] = line
    return event, "".join(lines)


def internal_error_event(exc):
    import traceback
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {"type": "error", "phase": "internal", "ename": type(exc).__name__,
            "evalue": safe_str(exc), "traceback": "".join(lines).rstrip("\n").split("\n")}
