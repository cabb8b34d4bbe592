"""A session's contexts, per-execution env and cwd, and the modes besides Python (command, listdir,
drop_context; execbox_agent/sandbox_ops.py), without the jail: a forked child serves requests
as in test_agent.py's ServeTest and the test plays the host."""
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from test_agent import AGENT, AgentTestCase, WarmTestCase, run_agent

sys.path.insert(0, os.path.dirname(os.path.abspath(AGENT)))
from execbox_agent import sandbox_ops  # noqa: E402
from execbox_agent.errors import RequestError  # noqa: E402
from execbox_agent.request import parse_request  # noqa: E402

del sys.path[0]


def result_json(run):
    return run.one("result")["data"]["application/json"]


def result_text(run):
    return run.one("result")["data"]["text/plain"]


class ContextTest(WarmTestCase):
    def test_contexts_keep_separate_globals_and_share_the_work_dir(self):
        worker = self.worker(session=True)
        self.assertEnded(worker.execute("x = 'default'"), 0)
        self.assertEnded(worker.execute("x = 'a'\nopen('shared.txt', 'w').write('from a')", context="a"), 0)
        run = worker.execute("import pickle\nclass C:\n    pass\n"
                             "(x, type(pickle.loads(pickle.dumps(C()))).__name__, __name__)", context="a")
        self.assertEqual(result_text(run), "('a', 'C', '__main__')")
        run = worker.execute("'x' in globals(), open('shared.txt').read()", context="b")
        self.assertEqual(result_text(run), "(False, 'from a')")
        self.assertEqual(result_text(worker.execute("x")), "'default'")

    def test_drop_context_empties_that_context_only(self):
        worker = self.worker(session=True)
        worker.execute("y = 1")
        worker.execute("y = 2", context="a")
        run = worker.execute("", mode="drop_context", context="a")
        self.assertEqual(result_text(run), "dropped")
        self.assertEqual(result_json(run), {"context": "a", "dropped": True})
        self.assertEnded(run, 0)
        self.assertEqual(result_text(worker.execute("'y' in globals()", context="a")), "False")
        self.assertEqual(result_text(worker.execute("y")), "1")
        run = worker.execute("", mode="drop_context", context="never")
        self.assertEqual(result_json(run), {"context": "never", "dropped": False})
        worker.execute("", mode="drop_context")  # the default one too
        self.assertEqual(result_text(worker.execute("'y' in globals()")), "False")

    def test_snapshot_copies_the_default_context(self):
        worker = self.worker(session=True)
        worker.execute("kept = 1")
        worker.execute("other = 2", context="a")
        run = worker.execute("", mode="snapshot")
        self.assertEnded(run, 0)
        self.assertEqual(result_json(run)["names"], ["kept"])


class EnvAndCwdTest(WarmTestCase):
    def test_env_holds_for_one_execution(self):
        worker = self.worker(session=True)
        home = os.environ.get("HOME")
        run = worker.execute("import os\nos.environ['EXECBOX_NEW'], os.environ['HOME']",
                             env={"EXECBOX_NEW": "1", "HOME": "/elsewhere"})
        self.assertEqual(result_text(run), "('1', '/elsewhere')")
        run = worker.execute("os.environ.get('EXECBOX_NEW'), os.environ.get('HOME')")
        self.assertEqual(result_text(run), repr((None, home)))

    def test_cwd_holds_for_one_execution_and_a_missing_one_is_an_error(self):
        worker = self.worker(session=True)
        os.makedirs(os.path.join(worker.work, "sub", "deeper"))
        work = os.path.realpath(worker.work)
        run = worker.execute("import os\nos.getcwd()", cwd="sub/deeper")
        self.assertEqual(result_text(run), repr(os.path.join(work, "sub", "deeper")))
        self.assertEqual(result_text(worker.execute("os.getcwd()")), repr(work))
        # The code's own chdir lasts, as in a notebook; a given cwd is relative to the work dir.
        worker.execute("os.chdir('sub')")
        self.assertEqual(result_text(worker.execute("os.getcwd()", cwd="sub")), repr(os.path.join(work, "sub")))
        self.assertEqual(result_text(worker.execute("os.getcwd()")), repr(os.path.join(work, "sub")))
        run = worker.execute("print('ran')", cwd="missing")
        self.assertEqual(run.error["ename"], "FileNotFoundError")
        self.assertIn("missing", run.error["evalue"])
        self.assertEqual(run.stdout, b"")
        self.assertEnded(run, 1)
        self.assertEqual(result_text(worker.execute("os.getcwd()")), repr(os.path.join(work, "sub")))


class CommandTest(WarmTestCase):
    def setUp(self):
        super().setUp()
        # Commands run as `bash -l`: without a jail they would read this host's login files
        # (a pyenv init there can wait a minute on its lock while another shell runs one). In
        # the sandbox HOME is the work dir; here an empty directory, for the worker started next.
        home = tempfile.mkdtemp(prefix="execbox-home-")
        self.addCleanup(shutil.rmtree, home, True)
        patch = mock.patch.dict(os.environ, {"HOME": home})
        patch.start()
        self.addCleanup(patch.stop)

    def test_output_streams_and_exit_code(self):
        worker = self.worker(session=True)
        run = worker.execute("echo out; echo err >&2; exit 3", mode="command")
        self.assertEqual(run.stdout, b"out\n")
        self.assertEqual(run.stderr, b"err\n")
        self.assertEqual(result_json(run), {"exit_code": 3})
        self.assertEqual(result_text(run), "exit 3")
        self.assertEnded(run, 0)

    def test_env_cwd_stdin_process_group_and_signals(self):
        worker = self.worker(session=True)
        os.mkdir(os.path.join(worker.work, "d"))
        run = worker.execute("pwd; echo \"$GREETING\"; cat; ps -o pgid= -p $$ | tr -d ' '; echo $$",
                             mode="command", env={"GREETING": "hi there"}, cwd="d", stdin=b"read by cat\n")
        lines = run.stdout.decode().splitlines()
        self.assertEqual(lines[:3],
                         [os.path.join(os.path.realpath(worker.work), "d"), "hi there", "read by cat"])
        self.assertEqual(lines[3], lines[4], run)  # the shell leads its own process group
        self.assertEqual(result_json(run), {"exit_code": 0})
        run = worker.execute("kill -TERM $$", mode="command")
        self.assertEqual(result_json(run), {"exit_code": 128 + 15})
        run = worker.execute("yes | head -c 300000 | wc -c; echo piped", mode="command")
        self.assertEqual(run.stdout, b"300000\npiped\n")
        self.assertEqual(run.stderr, b"")  # yes died of SIGPIPE: not ignored, as the agent has it
        self.assertEqual(result_text(worker.execute("import os\nos.environ.get('GREETING'), os.getcwd()")),
                         repr((None, os.path.realpath(worker.work))))

    def test_an_interrupt_kills_the_command_and_the_session_goes_on(self):
        worker = self.worker(session=True)
        timer = threading.Timer(0.5, os.kill, (worker.pid, signal.SIGINT))
        timer.start()
        self.addCleanup(timer.cancel)
        started = time.monotonic()
        run = worker.execute("sleep 20 & wait; echo not reached", mode="command")
        self.assertLess(time.monotonic() - started, 10)  # the background sleep went too (pipes closed)
        self.assertEqual(run.error["ename"], "KeyboardInterrupt")
        self.assertEqual(run.stdout, b"")
        self.assertEnded(run, 130)
        self.assertEqual(result_text(worker.execute("1 + 1")), "2")

    def test_one_shot_children_and_the_cold_agent_refuse(self):
        worker = self.worker(session=False)
        run = worker.execute("echo no", mode="command")
        self.assertEqual(run.error["phase"], "internal")
        self.assertIn("for a session only", run.error["evalue"])
        self.assertEqual(run.stdout, b"")
        self.assertEnded(run, 70)
        for mode in ("command", "listdir", "drop_context"):
            run = run_agent("echo no", mode=mode)
            self.assertEqual(run.returncode, 70, run)
            self.assertIn("for a session only", run.error["evalue"])


class ListDirTest(WarmTestCase):
    def test_entries_types_and_depth(self):
        worker = self.worker(session=True)
        work = os.path.realpath(worker.work)
        os.makedirs(os.path.join(work, "sub", "inner"))
        with open(os.path.join(work, "a.txt"), "w") as f:
            f.write("hello")
        with open(os.path.join(work, "sub", "b.bin"), "wb") as f:
            f.write(b"\0" * 10)
        os.chmod(os.path.join(work, "a.txt"), 0o640)
        os.symlink("sub", os.path.join(work, "link"))
        run = worker.execute(".", mode="listdir")
        self.assertEnded(run, 0)
        listing = result_json(run)
        self.assertEqual(listing["path"], work)
        self.assertFalse(listing["truncated"])
        entries = {e["name"]: e for e in listing["entries"]}
        self.assertEqual(sorted(entries), ["a.txt", "link", "sub"])
        a = entries["a.txt"]
        self.assertEqual((a["type"], a["size"], a["mode"], a["permissions"], a["path"]),
                         ("file", 5, 0o640, "-rw-r-----", os.path.join(work, "a.txt")))
        self.assertIsInstance(a["modified"], float)
        self.assertEqual(a["owner"], __import__("pwd").getpwuid(os.getuid()).pw_name)
        self.assertNotIn("symlink_target", a)
        self.assertEqual((entries["link"]["type"], entries["link"]["symlink_target"]), ("symlink", "sub"))
        self.assertEqual(entries["sub"]["type"], "dir")
        self.assertEqual(result_text(run), "3 entries")
        # Deeper: breadth first, never through the link.
        run = worker.execute("", mode="listdir", depth=3)
        paths = [os.path.relpath(e["path"], work) for e in result_json(run)["entries"]]
        self.assertEqual(paths, ["a.txt", "link", "sub", "sub/b.bin", "sub/inner"])
        # Relative to the cwd; an absolute path as it is.
        run = worker.execute("inner", mode="listdir", cwd="sub")
        self.assertEqual(result_json(run), {"path": os.path.join(work, "sub", "inner"), "entries": [],
                                            "truncated": False})
        run = worker.execute(os.path.join(work, "sub"), mode="listdir")
        self.assertEqual([e["name"] for e in result_json(run)["entries"]], ["b.bin", "inner"])

    def test_missing_and_not_a_directory_are_errors(self):
        worker = self.worker(session=True)
        open(os.path.join(worker.work, "file"), "w").close()
        run = worker.execute("nope", mode="listdir")
        self.assertEqual(run.error["ename"], "FileNotFoundError")
        self.assertIn("nope", run.error["evalue"])
        self.assertEqual(run.of_type("result"), [])
        self.assertEnded(run, 1)
        run = worker.execute("file", mode="listdir")
        self.assertEqual(run.error["ename"], "NotADirectoryError")
        self.assertEnded(run, 1)
        self.assertEqual(result_text(worker.execute("1 + 1")), "2")  # the session goes on

    def test_the_listing_is_capped(self):
        base = self.enterContext(__import__("tempfile").TemporaryDirectory())
        for i in range(5):
            os.mkdir(os.path.join(base, "d%d" % i))
        top, entries, truncated = sandbox_ops.list_dir(base, 1, limit=3)
        self.assertEqual((top, [e["name"] for e in entries], truncated), (base, ["d0", "d1", "d2"], True))
        _, entries, truncated = sandbox_ops.list_dir(base, 1, limit=5)
        self.assertEqual((len(entries), truncated), (5, False))


class RequestTest(AgentTestCase):
    BASE = {"mode": "run", "code": "", "policy": None}

    def parse(self, **fields):
        return parse_request(dict(self.BASE, **fields))

    def test_defaults_and_new_fields(self):
        request = self.parse()
        self.assertEqual((request["context"], request["env"], request["cwd"], request["depth"]), ("", {}, "", 1))
        request = self.parse(mode="listdir", context="c", env={"A": "1"}, cwd="x", depth=3)
        self.assertEqual((request["mode"], request["context"], request["env"], request["cwd"], request["depth"]),
                         ("listdir", "c", {"A": "1"}, "x", 3))
        for mode in ("command", "drop_context"):
            self.assertEqual(self.parse(mode=mode)["mode"], mode)

    def test_bad_fields_are_refused(self):
        cases = [({"mode": "shell"}, "mode must be one of"), ({"env": ["A=1"]}, "env must be an object"),
                 ({"env": {"A": 1}}, "must be a string"), ({"env": {"A=B": "1"}}, "not a valid"),
                 ({"env": {"": "1"}}, "not a valid"), ({"env": {"A": "\0"}}, "NUL"),
                 ({"cwd": 3}, "cwd must be a string"), ({"cwd": "a\0b"}, "NUL"),
                 ({"context": 1}, "context must be a string"), ({"depth": 0}, "positive integer"),
                 ({"depth": True}, "positive integer")]
        for fields, message in cases:
            with self.subTest(fields=fields):
                with self.assertRaises(RequestError) as caught:
                    self.parse(**fields)
                self.assertIn(message, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
