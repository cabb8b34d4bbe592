# execbox agent: runs one piece of user code inside the jail and reports what happened.
# Stdlib only, Python 3.11. The build compiles every module with the sandbox's own interpreter
# (embed_agent.py) and the jail gets them as /opt/execbox/execbox_agent/*.pyc, imported
# sourcelessly (or as *.py when the interpreter's bytecode magic differs).
#
#   text       leaf: safe_str, cap_text, split_lines
#   errors     leaf: RequestError
#   report     the report channel (JSON Lines on fd 3)
#   request    the request, checked, with its defaults
#   inputs     a warm request's input files
#   channel    the warm channel's framing (8-byte header, 4 fds, body)
#   streams    stdout/stderr capture, stdin, files left open for writing
#   display    MIME bundles (IPython's _repr_*_ protocol) and display()
#   figures    matplotlib figures as image/png displays
#   lint       the AST policy check (a courtesy, never the security boundary)
#   cell       compile, the last expression's value, tracebacks of the user's frames only
#   execution  one execution: prepare the interpreter, check, run, report, end
#   missing    the hint added to a ModuleNotFoundError
#   wheelhouse installs from the operator's wheelhouse (pip, a request's packages, package sets)
#   sandbox_ops  a session's shell commands and directory listings
#   snapshot   a session's state copied as data (pickled globals and its files)
#   child      a forked child's loop: one request, or a session's one after another
#   warm       warm_up() in the zygote, serve() in each forked child
#   __main__   the cold agent, run as a script
#
# Start-up time matters (every cold run pays for every import): this file imports nothing,
# the modules avoid ast, enum, contextlib and the like, and what is needed only sometimes is
# imported where it is used.
