"""The guard's audit hooks (execbox_agent/guard.py) in an interpreter of their own (a hook lasts
as long as its process): each event the policy forbids raises PermissionError naming it and is
listed once; what it allows (writing in the writable directories, reading anywhere, a unix
socket, a library already loaded) is untouched; and nothing the code can reach turns it off.
These run on the host, with no jail behind the guard: what they try to change is only ever a
directory of the test's own beside the writable one (OUTSIDE, holding the file `victim`)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT_PARENT = os.path.join(ROOT, "src", "runtime")

PRELUDE = """
import json, os, sys
sys.path.insert(0, %(parent)r)
from execbox_agent import guard
guard.install({"writable": [%(work)r], "libraries": [], "network": %(network)s, "programs": %(programs)s})
OUTSIDE = %(outside)r
del sys.path[0]
outcomes = {}
def attempt(name, action):
    try:
        action()
        outcomes[name] = "allowed"
    except PermissionError as exc:
        outcomes[name] = "refused: " + str(exc)
    except Exception as exc:
        outcomes[name] = "failed: %%s: %%s" %% (type(exc).__name__, exc)
"""

EPILOGUE = """
print(json.dumps({"outcomes": outcomes, "event": guard.take_event()}))
"""


def run_guarded(body, network=False, programs=False):
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as outside:
        with open(os.path.join(outside, "victim"), "w") as f:
            f.write("intact")
        script = PRELUDE % {"parent": AGENT_PARENT, "work": work, "outside": outside, "network": network,
                            "programs": programs}
        script += textwrap.dedent(body) + EPILOGUE
        done = subprocess.run([sys.executable, "-I", "-c", script], cwd=work, capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise AssertionError("the guarded script failed:\n" + done.stderr)
        with open(os.path.join(outside, "victim")) as f:
            intact = f.read() == "intact" and os.listdir(outside) == ["victim"]
        if not intact:
            raise AssertionError("the guarded script changed the directory beside the writable one")
        return json.loads(done.stdout.splitlines()[-1]), sorted(os.listdir(work))


class GuardTest(unittest.TestCase):
    def assertRefused(self, outcomes, name, event):
        self.assertTrue(outcomes[name].startswith("refused: execbox guard: %s refused" % event), (name, outcomes[name]))

    def test_each_forbidden_event_is_refused_and_listed(self):
        result, left = run_guarded("""
            import socket, subprocess, ctypes, gc
            open("in.txt", "w").close()
            attempt("write_outside", lambda: open(OUTSIDE + "/new", "w"))
            attempt("append_outside", lambda: os.open(OUTSIDE + "/victim", os.O_WRONLY | os.O_APPEND))
            attempt("remove_outside", lambda: os.remove(OUTSIDE + "/victim"))
            attempt("rename_into_outside", lambda: os.rename("in.txt", OUTSIDE + "/in.txt"))
            attempt("escape_by_link", lambda: (os.symlink(OUTSIDE, "out-link"), open("out-link/x", "w")))
            attempt("socket_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            attempt("lookup", lambda: socket.getaddrinfo("example.com", 443))
            attempt("popen", lambda: subprocess.run(["/bin/true"]))
            attempt("system", lambda: os.system("true"))
            attempt("exec", lambda: os.execv("/bin/true", ["true"]))
            attempt("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
            attempt("dlopen_new", lambda: ctypes.CDLL("/nonexistent/libevil.so"))
            attempt("extension_outside", lambda: __import__("importlib.machinery").machinery.ExtensionFileLoader(
                "evil", os.path.abspath("evil.so")).create_module(
                __import__("importlib.util").util.spec_from_file_location("evil", os.path.abspath("evil.so"))))
            called = []
            sys.addaudithook(lambda *a: called.append(a))  # CPython drops it quietly
            open(os.devnull).close()
            outcomes["add_hook"] = "called" if called else "never called"
            libc = ctypes.CDLL(None)
            attempt("libc_system", lambda: libc.system)
            attempt("libc_open", lambda: getattr(libc, "open"))
            attempt("libc_syscall", lambda: libc.syscall)
            attempt("libc_socket", lambda: libc.socket)
            attempt("raw_dlsym", lambda: __import__("_ctypes").dlsym(libc._handle, "execve"))
            attempt("clear_hooks", lambda: ctypes.pythonapi._PySys_ClearAuditHooks)
            attempt("gc_objects", lambda: gc.get_objects())
            # A thread with no Python frame of its own is refused and listed all the same.
            import _thread, time
            _thread.start_new_thread(os.system, ("true",))
            time.sleep(0.5)
            attempt("gc_referrers", lambda: gc.get_referrers(guard))
        """)
        outcomes = result["outcomes"]
        for name, event in (("write_outside", "open"), ("append_outside", "open"), ("remove_outside", "os.remove"),
                            ("rename_into_outside", "os.rename"), ("escape_by_link", "open"),
                            ("socket_inet", "socket.__new__"), ("lookup", "socket.getaddrinfo"),
                            ("popen", "subprocess.Popen"), ("system", "os.system"), ("exec", "os.exec"),
                            ("spawn", "os.posix_spawn"), ("dlopen_new", "ctypes.dlopen"),
                            ("extension_outside", "import"), ("libc_system", "ctypes.dlsym"),
                            ("libc_open", "ctypes.dlsym"), ("libc_syscall", "ctypes.dlsym"),
                            ("libc_socket", "ctypes.dlsym"), ("raw_dlsym", "ctypes.dlsym/handle"),
                            ("clear_hooks", "ctypes.dlsym"),
                            ("gc_objects", "gc.get_objects"), ("gc_referrers", "gc.get_referrers")):
            self.assertRefused(outcomes, name, event)
        self.assertEqual(outcomes["add_hook"], "never called")
        self.assertEqual(left, ["in.txt", "out-link"])
        event = result["event"]
        self.assertEqual(event["mode"], "audit")
        listed = {e["event"] for e in event["refused"]}
        self.assertTrue({"open", "os.remove", "subprocess.Popen", "os.system", "socket.__new__", "ctypes.dlopen",
                         "import", "sys.addaudithook", "gc.get_objects"} <= listed, event)
        self.assertIn("/new: only ", json.dumps(event))
        # Each says where: the script's line, the import machinery's caller, a bare thread.
        where = {e["event"]: [] for e in event["refused"]}
        for e in event["refused"]:
            where[e["event"]].append(e["detail"].rsplit(", by ", 1)[1].split(" line ")[0])
        self.assertEqual(sorted(where["os.system"]), ["<string>", "a thread with no Python frames"], event)
        self.assertEqual(where["import"], ["<string>"], event)

    def test_what_the_policy_allows_is_untouched(self):
        result, _ = run_guarded("""
            import socket, ctypes, tempfile
            def files():
                with open("out.txt", "w") as f:
                    f.write("x")
                os.mkdir("d")
                os.rename("out.txt", "d/out.txt")
                os.remove("d/out.txt")
                os.rmdir("d")
                open("/dev/null", "w").close()
            attempt("files", files)
            attempt("read_anywhere", lambda: open(OUTSIDE + "/victim").read())
            attempt("unix_socket", lambda: [s.close() for s in socket.socketpair()])
            attempt("loaded_library", lambda: ctypes.CDLL("libc.so.6").getpid())
            attempt("harmless_symbol", lambda: ctypes.CDLL(None).strlen(b"abc"))
            attempt("interpreter", lambda: ctypes.CDLL(None))
            attempt("stdlib_extension", lambda: __import__("_bz2"))
        """)
        self.assertEqual(set(result["outcomes"].values()), {"allowed"}, result)
        self.assertEqual(result["event"]["refused"], [])

    def test_network_and_programs_when_the_policy_allows_them(self):
        result, _ = run_guarded("""
            import socket, subprocess
            attempt("socket_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
            attempt("popen", lambda: subprocess.run(["/bin/true"], check=True))
            import ctypes
            attempt("libc_system", lambda: ctypes.CDLL(None).system)
            attempt("libc_socket", lambda: ctypes.CDLL(None).socket)
        """, network=True, programs=True)
        self.assertEqual(set(result["outcomes"].values()), {"allowed"}, result)

    def test_the_code_cannot_turn_it_off(self):
        result, _ = run_guarded("""
            guard._mode[0] = None
            guard.install({"writable": ["/"], "libraries": [], "network": True, "programs": True})
            # What the hook's helpers would look up at call time, were they not bound before.
            import builtins, posixpath
            os.path.realpath = posixpath.realpath = lambda path, **kw: os.getcwd() + "/x"
            os.lstat = lambda *a, **kw: os.stat(os.getcwd())
            guard._PATH_EVENTS.clear()
            guard._DOOR_SYMBOLS = guard._PROGRAM_SYMBOLS = frozenset()
            guard.isinstance = guard.str = guard.len = guard.set = guard.type = None
            builtins.len = lambda x: 0
            attempt("write_outside", lambda: open(OUTSIDE + "/new", "w"))
            attempt("remove_outside", lambda: os.remove(OUTSIDE + "/victim"))
            attempt("libc_system", lambda: __import__("ctypes").CDLL(None).system)
            attempt("system", lambda: os.system("true"))
            guard._mode[0] = "audit"
        """)
        self.assertRefused(result["outcomes"], "remove_outside", "os.remove")
        self.assertRefused(result["outcomes"], "libc_system", "ctypes.dlsym")
        # The second hook, one that would allow more, is never added (and would not have helped:
        # every hook sees every event, and the first still refuses).
        self.assertIn("sys.addaudithook", {e["event"] for e in result["event"]["refused"]})
        self.assertRefused(result["outcomes"], "write_outside", "open")
        self.assertRefused(result["outcomes"], "system", "os.system")


if __name__ == "__main__":
    unittest.main()
