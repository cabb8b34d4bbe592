"""Installs from a host wheelhouse (docs/packages.md "Packages"), end to end: wheels built here with
`pip wheel`, offline, from small packages this file writes; `execbox serve --wheelhouse` (and
`[packages] wheelhouse` in a config file); a request's `packages`, a session's, and `pip install`
inside a session. Refused with a clear error, the server serving on: a package the wheelhouse
lacks, one that does not import, one bigger than the work dir, a name that is a path, URL or
option, a wheel whose hash the wheelhouse's requirements.txt does not pin, and packages on a
server without a wheelhouse."""
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import textwrap
import unittest

from harness import ApiTestCase, McpClient, Server, tool_text

PIP = "/usr/bin/python3"  # Debian's, with python3-pip, -setuptools and -wheel (scripts/install-deps.sh)


def build_wheel(into, name, modules, depends=(), data_bytes=0):
    """A pure-Python wheel of distribution `name` 1.0 into `into`: modules {name: source}, and
    a data file of `data_bytes` zeros (it compresses to almost nothing)."""
    src = tempfile.mkdtemp(prefix="execbox-wheel-src-")
    try:
        deps = ", ".join('"%s"' % d for d in depends)
        with open(os.path.join(src, "pyproject.toml"), "w") as f:
            f.write(textwrap.dedent(f"""\
                [build-system]
                requires = ["setuptools"]
                build-backend = "setuptools.build_meta"
                [project]
                name = "{name}"
                version = "1.0"
                dependencies = [{deps}]
                [tool.setuptools]
                py-modules = [{", ".join('"%s"' % m for m in modules)}]
                """))
        for module, source in modules.items():
            with open(os.path.join(src, module + ".py"), "w") as f:
                f.write(source)
        if data_bytes:
            # Package data of a py-modules project: declared through MANIFEST + data-files.
            with open(os.path.join(src, "pyproject.toml"), "a") as f:
                f.write('data-files = {"share/bulk" = ["bulk.bin"]}\n')
            with open(os.path.join(src, "bulk.bin"), "wb") as f:
                f.truncate(data_bytes)
        done = subprocess.run([PIP, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                               "--no-cache-dir", "-q", "-w", into, src], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip wheel {name}: {done.stderr}")
    finally:
        shutil.rmtree(src, True)
    wheel = [w for w in os.listdir(into) if w.startswith(name.replace("-", "_") + "-1.0-")]
    return os.path.join(into, wheel[0])


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class WheelhouseTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        # Not under /tmp: the jail builds its root on a tmpfs there (the server refuses it).
        cls.root = tempfile.mkdtemp(prefix="execbox-wheelhouse-", dir="/var/tmp")
        os.chmod(cls.root, 0o755)
        cls.house = os.path.join(cls.root, "plain")
        os.mkdir(cls.house)
        build_wheel(cls.house, "execbox-demo-dep", {"execbox_demo_dep": "ANSWER = 42\n"})
        build_wheel(cls.house, "execbox-demo", {"execbox_demo": "from execbox_demo_dep import ANSWER\n"
                                                                "def greet():\n    return 'hello %d' % ANSWER\n"},
                    depends=["execbox-demo-dep"])
        build_wheel(cls.house, "execbox-broken", {"execbox_broken": "raise RuntimeError('broken on purpose')\n"})
        # 96 MB unpacked, more than the 64 MB work dir; a few hundred KB as a wheel.
        build_wheel(cls.house, "execbox-huge", {"execbox_huge": "X = 1\n"}, data_bytes=96 << 20)

        # A second wheelhouse whose requirements.txt pins hashes: the demo pair pinned right,
        # execbox-tampered pinned with another hash, execbox-unpinned not at all.
        cls.pinned = os.path.join(cls.root, "pinned")
        os.mkdir(cls.pinned)
        for w in os.listdir(cls.house):
            if w.startswith("execbox_demo"):
                shutil.copy(os.path.join(cls.house, w), cls.pinned)
        build_wheel(cls.pinned, "execbox-tampered", {"execbox_tampered": "T = 1\n"})
        build_wheel(cls.pinned, "execbox-unpinned", {"execbox_unpinned": "U = 1\n"})
        lines = []
        for w in sorted(os.listdir(cls.pinned)):
            name = w.split("-")[0].replace("_", "-")
            digest = sha256_file(os.path.join(cls.pinned, w))
            if name == "execbox-unpinned":
                continue
            if name == "execbox-tampered":
                digest = hashlib.sha256(b"another build").hexdigest()
            lines.append(f"{name}==1.0 \\\n    --hash=sha256:{digest}")
        with open(os.path.join(cls.pinned, "requirements.txt"), "w") as f:
            f.write("# pinned by the test\n" + "\n".join(lines) + "\n")

        # A source distribution only: it would have to be built, which the sandbox never does.
        sdist = os.path.join(cls.root, "execbox_sdist-1.0")
        os.mkdir(sdist)
        with open(os.path.join(sdist, "setup.py"), "w") as f:
            f.write("raise SystemExit('a build ran')\n")
        with tarfile.open(os.path.join(cls.house, "execbox_sdist-1.0.tar.gz"), "w:gz") as tar:
            tar.add(sdist, arcname="execbox_sdist-1.0")
        # A wheel's name on a link that leads out of the wheelhouse.
        outside = [w for w in os.listdir(cls.pinned) if w.startswith("execbox_unpinned")][0]
        os.symlink(os.path.join("..", "pinned", outside), os.path.join(cls.house, "execbox_escape-1.0-py3-none-any.whl"))

        cls.server = Server(name="wheelhouse", flags=["--wheelhouse", cls.house]).start()
        cls.pinned_server = Server(name="wheelhouse-pinned",
                                   config=f'[packages]\nwheelhouse = "{cls.pinned}"\n').start()

    @classmethod
    def tearDownClass(cls):
        for s in (cls.server, cls.pinned_server):
            s.stop()
        shutil.rmtree(cls.root, True)

    def run_code(self, code, server=None, status=None, path="/v1/execute", **fields):
        r = (server or self.server).execute(code, path=path, **fields)
        return self.assertResult(r, status, server)

    def create_session(self, server=None, **body):
        r = (server or self.server).request("POST", "/v1/sessions", body)
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["id"]
        self.addCleanup((server or self.server).request, "DELETE", f"/v1/sessions/{sid}")
        return r.json()

    def assertServes(self, server=None):
        self.assertEqual(self.run_code("1 + 1", server, "ok")["result"]["data"]["text/plain"], "2")

    def test_a_requests_packages_install_with_their_dependencies_and_import(self):
        r = self.run_code("import execbox_demo\nexecbox_demo.greet()", status="ok", packages=["execbox-demo"])
        self.assertEqual(r["result"]["data"]["text/plain"], "'hello 42'")
        installed = {p["name"]: p for p in r["installed"]}
        self.assertEqual(set(installed), {"execbox-demo", "execbox-demo-dep"}, r["installed"])
        self.assertEqual(installed["execbox-demo"]["modules"], ["execbox_demo"])
        self.assertEqual(installed["execbox-demo"]["version"], "1.0")
        # Installed into the work dir, and never returned as the code's files.
        self.assertEqual(r["files"], [])
        self.assertEqual(r["skipped_files"], [])
        # One execution's install is its own: the next one-shot starts without it.
        r = self.run_code("import execbox_demo", status="error")
        self.assertEqual(r["error"]["ename"], "ModuleNotFoundError")

    def test_a_sessions_packages_stay_for_its_executions(self):
        info = self.create_session(packages=["execbox-demo==1.0"])
        sid = info["id"]
        self.assertEqual({p["name"] for p in info["installed"]}, {"execbox-demo", "execbox-demo-dep"})
        self.assertEqual(info["executions"], 1)
        path = f"/v1/sessions/{sid}/execute"
        r = self.run_code("import execbox_demo\nexecbox_demo.greet()", status="ok", path=path)
        self.assertEqual(r["result"]["data"]["text/plain"], "'hello 42'")
        # The packages are the session's, not the code's files.
        r = self.run_code("import os\nsorted(os.listdir('.'))", status="ok", path=path)
        self.assertEqual(r["result"]["data"]["text/plain"], "['.execbox-packages']")
        self.assertEqual(r["files"], [])

    def test_pip_install_inside_a_session(self):
        sid = self.create_session()["id"]
        path = f"/v1/sessions/{sid}/execute"
        # pip in the sandbox's shell: from the wheelhouse, into the session, then importable by
        # the session's next execution.
        r = self.run_code("import subprocess\n"
                          "p = subprocess.run(['pip', 'install', 'execbox-demo'], capture_output=True, text=True)\n"
                          "print(p.returncode, p.stdout, p.stderr)", status="ok", path=path)
        self.assertEqual(r["stdout"].split(),
                         ["0", "Successfully", "installed", "execbox-demo-1.0", "execbox-demo-dep-1.0"], r["stdout"])
        r = self.run_code("import execbox_demo\nexecbox_demo.greet()", status="ok", path=path)
        self.assertEqual(r["result"]["data"]["text/plain"], "'hello 42'")
        self.assertEqual(r["files"], [])
        r = self.run_code("import subprocess\n"
                          "p = subprocess.run(['pip', 'install', 'execbox-huge'], capture_output=True, text=True)\n"
                          "print(p.returncode, p.stderr)\n"
                          "q = subprocess.run(['pip', 'install', 'execbox-demo'], capture_output=True, text=True)\n"
                          "print(q.returncode, q.stdout)", status="ok", path=path)
        first, second = r["stdout"].split("\n", 1)
        self.assertTrue(first.startswith("1 ERROR: refused: the wheels unpack to"), r["stdout"])
        self.assertIn("0 Requirement already satisfied", second)
        r = self.run_code("import subprocess\n"
                          "for args in (['pip', 'install', '../../etc/passwd'],\n"
                          "             ['pip', 'install', '--index-url', 'http://pypi.org/simple', 'six'],\n"
                          "             ['pip', 'install', 'execbox-nothere']):\n"
                          "    p = subprocess.run(args, capture_output=True, text=True)\n"
                          "    print(p.returncode, p.stderr.strip())", status="ok", path=path)
        lines = r["stdout"].splitlines()
        self.assertTrue(lines[0].startswith("1 ERROR: '../../etc/passwd' is not a package name"), lines)
        self.assertTrue(lines[1].startswith("1 ERROR: option --index-url is not supported here"), lines)
        self.assertIn("the wheelhouse has no wheel for execbox-nothere", lines[2])
        # pip's other commands are pip's own.
        r = self.run_code("import subprocess\n"
                          "print(subprocess.run('pip list 2>/dev/null | grep execbox-demo', shell=True,\n"
                          "                     capture_output=True, text=True).stdout)", status="ok", path=path)
        self.assertEqual(r["stdout"].split(), ["execbox-demo", "1.0", "execbox-demo-dep", "1.0"], r["stdout"])

    def test_a_package_that_does_not_import_is_refused_and_removed(self):
        sid = self.create_session()["id"]
        path = f"/v1/sessions/{sid}/execute"
        r = self.run_code("print('never runs')", status="error", path=path, packages=["execbox-broken"])
        self.assertEqual(r["error"]["ename"], "PackageInstallError")
        self.assertIn("installed execbox-broken 1.0, but it does not import: RuntimeError: broken on purpose",
                      r["error"]["evalue"])
        self.assertEqual(r["stdout"], "")
        self.assertNotIn("installed", r)
        r = self.run_code("import importlib.util\nimportlib.util.find_spec('execbox_broken') is None",
                          status="ok", path=path)
        self.assertEqual(r["result"]["data"]["text/plain"], "True")
        self.assertServes()

    def test_a_missing_or_oversized_package_is_a_clear_error(self):
        r = self.run_code("1", status="error", packages=["execbox-nothere"])
        self.assertEqual(r["error"]["ename"], "PackageInstallError")
        self.assertIn("the wheelhouse has no wheel for execbox-nothere", r["error"]["evalue"])
        # Only wheels install: a package the wheelhouse has as source only would need a build.
        r = self.run_code("1", status="error", packages=["execbox-sdist"])
        self.assertIn("the wheelhouse has no wheel for execbox-sdist", r["error"]["evalue"])
        r = self.run_code("1", status="error", packages=["execbox-huge"])
        self.assertRegex(r["error"]["evalue"], r"refused: the wheels unpack to 100\.\d MB, more than the [\d.]+ MB free")
        # With a bigger disk the same wheel fits.
        r = self.run_code("import execbox_huge\nexecbox_huge.X", status="ok", packages=["execbox-huge"],
                          limits={"disk_mb": 160})
        self.assertEqual([p["name"] for p in r["installed"]], ["execbox-huge"])
        self.assertServes()

    def test_mcp_offers_packages_where_there_is_a_wheelhouse(self):
        client = McpClient(self.server)
        client.initialize()
        self.addCleanup(client.delete)
        tool = client.tools()["execute_python"]
        self.assertIn("packages", tool["inputSchema"]["properties"])
        self.assertIn("The wheelhouse has: execbox-broken, execbox-demo, execbox-demo-dep,", tool["description"])
        result = client.call("execute_python", {"code": "import execbox_demo\nexecbox_demo.greet()",
                                                "packages": ["execbox-demo"]})
        self.assertFalse(result.get("isError"), result)
        self.assertIn("'hello 42'", tool_text(result))
        self.assertEqual({p["name"] for p in result["structuredContent"]["installed"]},
                         {"execbox-demo", "execbox-demo-dep"})
        result = client.call("execute_python", {"code": "1", "packages": ["../x"]})
        self.assertTrue(result.get("isError"), result)
        self.assertIn("invalid-packages", tool_text(result))

    def test_mcp_creates_a_session_with_its_packages_or_none(self):
        client = McpClient(self.server)
        client.initialize()
        self.addCleanup(client.delete)
        self.assertIn("packages", client.tools()["create_session"]["inputSchema"]["properties"])
        before = self.sessions()
        created = client.call("create_session", {"packages": ["execbox-demo"], "disk_mb": 64})
        self.assertFalse(created.get("isError"), created)
        sid = created["structuredContent"]["session_id"]
        self.assertEqual({p["name"] for p in created["structuredContent"]["installed"]},
                         {"execbox-demo", "execbox-demo-dep"})
        result = client.call("execute_python", {"code": "import execbox_demo\nexecbox_demo.greet()",
                                                "session_id": sid})
        self.assertIn("'hello 42'", tool_text(result))
        self.assertEqual(self.sessions(), before | {sid})
        # A failed install, a bad name or a bad argument: refused, and no session is left.
        for packages, said in ((["execbox-nothere"], "package-install-failed"), (["../x"], "invalid-packages"),
                               (["a"] * 33, "invalid-packages"), ("execbox-demo", "invalid-arguments")):
            refused = client.call("create_session", {"packages": packages})
            self.assertTrue(refused.get("isError"), refused)
            self.assertIn(said, tool_text(refused))
        self.assertEqual(self.sessions(), before | {sid})
        self.assertServes()

    def sessions(self):
        return {s["id"] for s in self.server.request("GET", "/v1/sessions").json()["sessions"]}

    def test_the_package_listing_names_the_wheelhouses_wheels(self):
        listed = self.server.request("GET", "/v1/packages").json()
        self.assertValid("Packages", listed)
        wheels = {(w["name"], w["version"]) for w in listed["wheelhouse"]}
        for name in ("execbox-demo", "execbox-demo-dep", "execbox-broken", "execbox-huge", "execbox-escape"):
            self.assertIn((name, "1.0"), wheels)
        self.assertNotIn("execbox-sdist", {n for n, _ in wheels})

    def test_a_link_out_of_the_wheelhouse_installs_nothing(self):
        r = self.run_code("1", status="error", packages=["execbox-escape"])
        self.assertEqual(r["error"]["ename"], "PackageInstallError")
        self.assertIn("No such file or directory", r["error"]["evalue"])  # the link's target is not in the sandbox
        self.assertNotIn("installed", r)
        self.assertServes()

    def test_a_session_whose_packages_fail_is_not_created(self):
        before = self.sessions()
        r = self.server.request("POST", "/v1/sessions", {"packages": ["execbox-nothere"]})
        body = self.assertProblem(r, 422, "package-install-failed")
        self.assertIn("the wheelhouse has no wheel for execbox-nothere", body["detail"])
        self.assertEqual(self.sessions() - before, set())  # none made (below: why not ==)

    def test_names_that_are_paths_urls_or_options_are_refused_before_running(self):
        for name in ("../../etc/passwd", "/var/tmp/x.whl", "--index-url=http://x", "x @ file:///etc/passwd",
                     "a b", "", "tqdm; os.system('id')", "x" * 200, "é"):
            r = self.server.execute("1", packages=[name])
            body = self.assertProblem(r, 400, "invalid-packages")
            self.assertIn("is not a package name", body["detail"])
        self.assertProblem(self.server.execute("1", packages="tqdm"), 400, "wrong-type")
        self.assertProblem(self.server.execute("1", packages=[1]), 400, "wrong-type")
        self.assertProblem(self.server.execute("1", packages=["a"] * 33), 400, "invalid-packages")
        before = self.sessions()
        for packages in (["../x"], ["a"] * 33):
            self.assertProblem(self.server.request("POST", "/v1/sessions", {"packages": packages}), 400,
                               "invalid-packages")
        # Refused before a session was made. Not `== before`: a session an earlier test made
        # through MCP ends in the background once its MCP session is deleted, and may be gone now.
        self.assertEqual(self.sessions() - before, set())
        self.assertServes()

    def test_a_pinned_wheelhouse_installs_only_what_its_hashes_match(self):
        s = self.pinned_server
        r = self.run_code("import execbox_demo\nexecbox_demo.greet()", s, "ok", packages=["execbox-demo"])
        self.assertEqual(r["result"]["data"]["text/plain"], "'hello 42'")
        r = self.run_code("1", s, "error", packages=["execbox-tampered"])
        self.assertIn("refused execbox-tampered 1.0: its wheel's sha256 matches none of the hashes pinned",
                      r["error"]["evalue"])
        r = self.run_code("1", s, "error", packages=["execbox-unpinned"])
        self.assertIn("refused execbox-unpinned 1.0: the wheelhouse's requirements.txt pins no hash",
                      r["error"]["evalue"])
        # pip itself (python3 -m pip, around the checks) does not see a pinned wheelhouse.
        r = self.run_code("import subprocess, sys\n"
                          "p = subprocess.run(['/usr/bin/python3', '-m', 'pip', 'install', 'execbox-unpinned'],\n"
                          "                   capture_output=True, text=True)\n"
                          "p.returncode", s, "ok")
        self.assertEqual(r["result"]["data"]["text/plain"], "1")
        self.assertServes(s)


class PackageSetTest(ApiTestCase):
    """A one-shot execution's packages are installed once, by a run with no code of the
    request's, and later executions with the same packages take them read-only from that
    package set (engine/package_sets.h): not from their own work dir, not changeable by any
    execution's code, and a different set once the wheelhouse changes."""

    @classmethod
    def setUpClass(cls):
        cls.house = tempfile.mkdtemp(prefix="execbox-wheelhouse-sets-", dir="/var/tmp")
        os.chmod(cls.house, 0o755)
        build_wheel(cls.house, "execbox-demo-dep", {"execbox_demo_dep": "ANSWER = 42\n"})
        build_wheel(cls.house, "execbox-demo", {"execbox_demo": "from execbox_demo_dep import ANSWER\n"
                                                                "def greet():\n    return 'hello %d' % ANSWER\n"},
                    depends=["execbox-demo-dep"])
        build_wheel(cls.house, "execbox-broken", {"execbox_broken": "raise RuntimeError('broken on purpose')\n"})
        cls.server = Server(name="package-sets", flags=["--wheelhouse", cls.house]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.house, True)

    def run_code(self, code, status="ok", **fields):
        return self.assertResult(self.server.execute(code, **fields), status)

    PROBE = ("import execbox_demo, os\n"
             "print(execbox_demo.greet(), os.path.dirname(execbox_demo.__file__))\n"
             "try:\n"
             "    open(execbox_demo.__file__, 'a').write('ANSWER = 0\\n')\n"
             "    print('changed')\n"
             "except OSError as e:\n"
             "    print('unchanged', type(e).__name__)\n")

    def probe(self, packages):
        r = self.run_code(self.PROBE, packages=packages)
        self.assertEqual({p["name"] for p in r["installed"]}, {"execbox-demo", "execbox-demo-dep"}, r)
        greeting, where, tried = r["stdout"].split("\n", 1)[0].rsplit(" ", 1)[0], *r["stdout"].split()[2:4]
        return r, greeting, where, tried

    def test_a_second_execution_takes_its_packages_from_the_set_the_first_built(self):
        r, greeting, first, tried = self.probe(["execbox-demo"])
        self.assertEqual(greeting, "hello 42")
        self.assertTrue(first.startswith("/opt/execbox/package-sets/"), r["stdout"])
        self.assertEqual(tried, "unchanged", r["stdout"])  # read-only, so the next one is as built
        self.assertEqual(r["files"], [])
        for _ in range(2):
            r, greeting, again, tried = self.probe(["execbox-demo"])
            self.assertEqual((greeting, again, tried), ("hello 42", first, "unchanged"), r["stdout"])
        # The same names in another order are the same set; another list is another set.
        _, _, both, _ = self.probe(["execbox-demo-dep", "execbox-demo"])
        _, _, same, _ = self.probe(["execbox-demo", "execbox-demo-dep"])
        self.assertEqual(same, both)
        _, _, other, _ = self.probe(["execbox-demo==1.0"])
        self.assertNotIn(other, (first, both))
        # Nothing of a set leaks into an execution that did not ask for it.
        r = self.run_code("import execbox_demo", status="error")
        self.assertEqual(r["error"]["ename"], "ModuleNotFoundError")

    def test_a_changed_wheelhouse_makes_a_new_set(self):
        _, _, before, _ = self.probe(["execbox-demo-dep", "execbox-demo"])
        build_wheel(self.house, "execbox-later", {"execbox_later": "L = 1\n"})
        _, greeting, after, _ = self.probe(["execbox-demo-dep", "execbox-demo"])
        self.assertEqual(greeting, "hello 42")
        self.assertNotEqual(before, after)
        self.assertTrue(after.startswith("/opt/execbox/package-sets/"), after)

    def test_a_failed_install_is_reported_each_time_and_the_server_serves(self):
        for _ in range(2):
            r = self.run_code("print('never runs')", status="error", packages=["execbox-broken"])
            self.assertEqual(r["error"]["ename"], "PackageInstallError")
            self.assertIn("does not import: RuntimeError: broken on purpose", r["error"]["evalue"])
            self.assertEqual(r["stdout"], "")
        # The code reaches a set by its name only: as root it cannot list them (it is nobody on
        # the host); a user's server maps the code to itself, and then only digests are there.
        r = self.run_code("import os\n"
                          "try:\n"
                          "    print(sorted(os.listdir('/opt/execbox/package-sets')))\n"
                          "except OSError as e:\n"
                          "    print(type(e).__name__)")
        if os.geteuid() == 0:
            self.assertEqual(r["stdout"], "PermissionError\n")
        else:
            listed = eval(r["stdout"])  # noqa: S307 - a list of names
            self.assertTrue(all(n == ".lock" or (len(n) == 64 and set(n) <= set("0123456789abcdef"))
                                for n in listed), listed)
        self.assertEqual(self.run_code("1 + 1")["result"]["data"]["text/plain"], "2")


class NoWheelhouseTest(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="no-wheelhouse").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_mcp_offers_no_packages_without_a_wheelhouse(self):
        client = McpClient(self.server)
        client.initialize()
        self.addCleanup(client.delete)
        tool = client.tools()["execute_python"]
        self.assertNotIn("packages", tool["inputSchema"]["properties"])
        self.assertNotIn("packages", client.tools()["create_session"]["inputSchema"]["properties"])
        self.assertIn("Nothing else can be installed: no network", tool["description"])
        refused = client.call("create_session", {"packages": ["tqdm"]})
        self.assertTrue(refused.get("isError"), refused)
        self.assertIn("no-wheelhouse", tool_text(refused))

    def test_packages_without_a_wheelhouse_are_refused(self):
        body = self.assertProblem(self.server.execute("1", packages=["tqdm"]), 409, "no-wheelhouse")
        self.assertIn("has no wheelhouse", body["detail"])
        # pip in the sandbox says so too, at once (no network, no index).
        r = self.server.execute("import subprocess\n"
                                "p = subprocess.run(['pip', 'install', 'tqdm'], capture_output=True, text=True)\n"
                                "print(p.returncode, p.stderr)")
        result = self.assertResult(r, "ok")
        self.assertTrue(result["stdout"].startswith("1 ERROR: this server has no wheelhouse"), result["stdout"])
        # A session asked for with packages is refused before it is made.
        before = self.server.request("GET", "/v1/sessions").json()["sessions"]
        self.assertProblem(self.server.request("POST", "/v1/sessions", {"packages": ["tqdm"]}), 409, "no-wheelhouse")
        self.assertEqual(self.server.request("GET", "/v1/sessions").json()["sessions"], before)

    def test_a_wheelhouse_under_tmp_or_missing_stops_the_start(self):
        with tempfile.TemporaryDirectory() as under_tmp:
            for where, said in ((under_tmp, "is under /tmp"), ("/nonexistent/wheels", "No such file"),
                                ("relative/wheels", "absolute path")):
                s = Server(name="bad-wheelhouse", flags=["--wheelhouse", where])
                s.spawn()
                self.assertEqual(s.wait_exit(), 64, s.stderr_text())
                self.assertIn(said, s.stderr_text())


if __name__ == "__main__":
    unittest.main()


HERE = os.path.dirname(os.path.abspath(__file__))

# Imports models write most in analysis code, with the Debian 12 package that has each (None:
# Debian has none). The probe: 16 of 36 imported before the standard set.
PROBE = {
    "numpy": "python3-numpy", "pandas": "python3-pandas", "matplotlib": "python3-matplotlib",
    "scipy": "python3-scipy", "sklearn": "python3-sklearn", "seaborn": "python3-seaborn",
    "statsmodels": "python3-statsmodels", "sympy": "python3-sympy", "networkx": "python3-networkx",
    "PIL": "python3-pil", "bs4": "python3-bs4", "openpyxl": "python3-openpyxl", "yaml": "python3-yaml",
    "lxml": "python3-lxml", "dateutil": "python3-dateutil", "joblib": "python3-joblib", "tqdm": "python3-tqdm",
    "plotly": "python3-plotly", "bokeh": None, "cv2": "python3-opencv", "nltk": "python3-nltk",
    "xlrd": "python3-xlrd", "tabulate": "python3-tabulate", "requests": "python3-requests", "pyarrow": None,
    "polars": None, "numba": "python3-numba", "sqlalchemy": "python3-sqlalchemy", "xgboost": "python3-xgboost",
    "lightgbm": None, "torch": "python3-torch", "jinja2": "python3-jinja2", "docx": "python3-docx",
    "pptx": None, "pypdf": "python3-pypdf", "reportlab": "python3-reportlab",
}


def package_list(name):
    with open(os.path.join(HERE, "..", "..", "scripts", name)) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def host_has(package):
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return done.returncode == 0 and "install ok installed" in done.stdout


class ImportProbeTest(ApiTestCase):
    """Every module of the probe whose Debian package is in the standard set imports in the
    sandbox, in one execution; one of the full set imports when this host has its package; one
    Debian lacks is a ModuleNotFoundError that says it is not installed."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(name="import-probe").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_the_probe_imports_what_the_package_sets_hold(self):
        standard, full = package_list("python-packages.txt"), package_list("python-packages-full.txt")
        code = ("import importlib, json\n"
                "out = {}\n"
                "for m in %r:\n"
                "    try:\n"
                "        importlib.import_module(m)\n"
                "        out[m] = 'ok'\n"
                "    except Exception as e:\n"
                "        out[m] = '%%s: %%s %%s' %% (type(e).__name__, e, ' '.join(getattr(e, '__notes__', [])))\n"
                "print(json.dumps(out))" % sorted(PROBE))
        # torch and opencv (the full set) take more than the default 256 MB between them.
        r = self.assertResult(self.server.execute(code, limits={"memory_mb": 2048, "timeout_seconds": 240,
                                                                "cpu_seconds": 240}), "ok")
        seen = json.loads(r["stdout"].strip().splitlines()[-1])
        imported = sorted(m for m, v in seen.items() if v == "ok")
        for module, package in PROBE.items():
            if package in standard:
                self.assertEqual(seen[module], "ok", module)
            elif package in full:
                self.assertEqual(seen[module] == "ok", host_has(package), f"{module}: {seen[module]}")
            else:
                self.assertIsNone(package, f"{module}'s {package} is in neither set")
                self.assertTrue(seen[module].startswith("ModuleNotFoundError"), seen[module])
        in_standard = [m for m, p in PROBE.items() if p in standard]
        self.assertGreaterEqual(len(in_standard), 29, in_standard)
        print(f"\n    import probe: {len(imported)} of {len(PROBE)} import", end=" ")
        # Uncaught, the error says what is there instead.
        r = self.assertResult(self.server.execute("import polars as pl"), "error")
        self.assertIn("execbox: no module named 'polars' is installed in this sandbox", r["stderr"])
        self.assertIn("installed instead: pandas", r["stderr"])
        # The same modules are in the catalog the API states.
        listed = self.server.request("GET", "/v1/packages").json()
        self.assertNotIn("wheelhouse", listed)  # this server has none
        modules = {m for p in listed["packages"] for m in p["modules"]}
        for module in in_standard:
            self.assertIn(module, modules)
