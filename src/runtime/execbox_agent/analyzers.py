# The seed's linters on the code's text: pyflakes, flake8 and bandit (Debian's python3-pyflakes,
# python3-flake8 and python3-bandit), each run by the sandbox's interpreter in a process of its
# own inside the sandbox (the agent's interpreter never imports them: a session's modules stay
# the code's), all at once, each bounded in time. They read the source on stdin and never run
# it. Their findings join the agent's own (lint.py) in the findings event, each
#     {"rule": code, "tool": "pyflakes" | "flake8" | "bandit", "code": "F821" | "E501" | "B602" ...,
#      "severity": "warning" (or "error" when blocked), "line", "column" (1-based), "message",
#      "suggestion": ""}
# (bandit's own severity and confidence are said in the message).
# pyflakes is flake8's F checks (flake8 --select=F, which gives them their F codes); flake8 run
# beside it leaves them out. A finding whose code starts with an entry of the request's "block"
# list is an error: a refusal, as the policy's are (execution.check_and_compile). An analyzer
# that is missing, fails or runs out of time is one finding of its own, code "unavailable",
# saying why: the check is not silently thinner than asked; when the block list needs that
# analyzer, the finding is an error too (a block that cannot be checked refuses).
import os
import sys

from .text import safe_str

ANALYZERS = ("pyflakes", "flake8", "bandit")
TIMEOUT_SECONDS = 8
_MAX_FINDINGS = 500  # per analyzer
_FLAKE8_FORMAT = "%(row)d\t%(col)d\t%(code)s\t%(text)s"


def _argv(tool, names):
    python = [sys.executable or "/usr/bin/python3", "-I", "-m"]
    if tool == "bandit":
        return python + ["bandit", "-f", "json", "-q", "-"]
    flake8 = python + ["flake8", "--isolated", "--format=" + _FLAKE8_FORMAT, "--stdin-display-name=cell",
                       "--max-line-length=120"]
    if tool == "pyflakes":
        return flake8 + ["--select=F", "-"]
    return flake8 + (["--extend-ignore=F"] if "pyflakes" in names else []) + ["-"]


def _finding(tool, code, line, column, message):
    return {"rule": code, "tool": tool, "code": code, "severity": "warning", "line": max(int(line), 1),
            "column": max(int(column), 1), "message": message, "suggestion": "", "_end_column": None}


def _parse(tool, out):
    found = []
    if tool == "bandit":
        import json  # here: the agent leaves json to the code (test_imports.py)
        for r in json.loads(out or "{}").get("results", [])[:_MAX_FINDINGS]:
            message = "%s (severity %s, confidence %s)" % (r.get("issue_text", ""), r.get("issue_severity", "?"),
                                                           r.get("issue_confidence", "?"))
            found.append(_finding(tool, str(r.get("test_id", "B")), r.get("line_number", 1),
                                  (r.get("col_offset") or 0) + 1, message))
        return found
    for line in out.splitlines()[:_MAX_FINDINGS]:
        row, col, code, text = (line.split("\t", 3) + ["", "", "", ""])[:4]
        if row.isdigit() and col.isdigit():
            found.append(_finding(tool, code, row, col, text))
    return found


def analyzers_for(names, block):
    """The analyzers to run: those named, and those whose codes `block` names (F: pyflakes, B:
    bandit, any other: flake8's pycodestyle and mccabe)."""
    wanted = set(names)
    for code in block:
        wanted.add("pyflakes" if code[0] in "Ff" else "bandit" if code[0] in "Bb" else "flake8")
    return [n for n in ANALYZERS if n in wanted]


def analyze(source, names, block):
    """The findings of each analyzer in `names` on `source`; those whose code starts with an
    entry of `block` are errors."""
    import subprocess
    data = source.encode("utf-8", "surrogatepass")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
    running = {}
    findings = []
    for tool in [n for n in ANALYZERS if n in names]:
        try:
            # The source as a file of its own: bandit reads its stdin twice (seek(0)).
            text_fd = os.memfd_create("execbox-source", os.MFD_CLOEXEC)
            try:
                os.write(text_fd, data)
                os.lseek(text_fd, 0, os.SEEK_SET)
                running[tool] = subprocess.Popen(_argv(tool, names), stdin=text_fd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, env=env, cwd="/", close_fds=True)
            finally:
                os.close(text_fd)
        except OSError as exc:
            findings.append(_finding(tool, "unavailable", 1, 1,
                                     "%s could not start: %s" % (tool, safe_str(exc.strerror or exc))))
    for tool, proc in running.items():
        try:
            out, err = proc.communicate(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            findings.append(_finding(tool, "unavailable", 1, 1,
                                     "%s did not finish in %d s" % (tool, TIMEOUT_SECONDS)))
            continue
        text = out.decode("utf-8", "replace")
        # flake8 and bandit exit 1 when they found something; "No module named": not installed.
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and not text.strip()):
            why = err.decode("utf-8", "replace").strip().splitlines()
            findings.append(_finding(tool, "unavailable", 1, 1, "%s failed: %s" % (
                tool, why[-1][:300] if why else "exit status %d" % proc.returncode)))
            continue
        try:
            findings.extend(_parse(tool, text))
        except (ValueError, AttributeError, TypeError) as exc:
            findings.append(_finding(tool, "unavailable", 1, 1,
                                     "%s's output was not readable: %s" % (tool, safe_str(exc))))
    needed = analyzers_for((), block)
    for f in findings:
        if f["code"] == "unavailable":
            if f["tool"] in needed:  # a block that cannot be checked refuses: it never fails open
                f["severity"] = "error"
                f["message"] += " (lint.block needs it: the code was not checked)"
        elif any(f["code"].upper().startswith(b.upper()) for b in block):
            f["severity"] = "error"
            f["message"] += " (blocked: lint.block)"
    return findings
