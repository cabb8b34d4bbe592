"""Sessions that outlive the server (--session-state-dir) and move as sealed snapshots: a
graceful stop keeps each session's state after its last execution, a kill -9 keeps a
checkpointing session's last checkpoint, ownership survives, and a file or an upload the server
did not seal is refused without being used."""
import os
import shutil
import signal
import stat
import tempfile

from harness import KEY_A, KEY_B, ApiTestCase, Server


class DurableSessionsTest(ApiTestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="execbox-state-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def start(self, name):
        server = Server(name=name, flags=["--session-state-dir", self.state]).start()
        self.addCleanup(server.kill)
        self.server = server
        return server

    def create(self, token=KEY_A, **body):
        r = self.server.request("POST", "/v1/sessions", body, token=token)
        self.assertEqual(r.status, 201, repr(r))
        return r.json()["id"]

    def run_in(self, sid, code, token=KEY_A, status="ok"):
        r = self.server.request("POST", f"/v1/sessions/{sid}/execute", {"code": code}, token=token)
        return self.assertResult(r, status)

    def value(self, sid, code, token=KEY_A):
        return self.run_in(sid, code, token)["result"]["data"]["text/plain"]

    def session_file(self, sid):
        return os.path.join(self.state, sid + ".session")

    def test_sigterm_keeps_each_sessions_state_and_owner(self):
        self.start("durable-term-1")
        sid = self.create()
        # The session's root is its own (docs/sessions.md): what it wrote there is kept too.
        self.run_in(sid, "import numpy as np, os\na = np.arange(5)\ndef total(): return int(a.sum())\n"
                         "open('kept.txt', 'w').write('kept')\ng = (i for i in [1])\n"
                         "os.makedirs('/opt/app', exist_ok=True)\nopen('/opt/app/conf', 'w').write('root')")
        theirs = self.create(token=KEY_B)
        self.run_in(theirs, "secret = 'bravo'", token=KEY_B)
        mode = os.stat(self.state).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(self.session_file(sid)).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.state, "snapshot.key")).st_mode), 0o600)
        self.assertEqual(self.server.stop(), 0)
        self.assertIn("2 sessions saved", self.server.stderr_text())

        self.start("durable-term-2")
        listing = self.server.request("GET", "/v1/sessions", token=KEY_A).json()
        self.assertEqual([s["id"] for s in listing["sessions"]], [sid])
        r = self.run_in(sid, "total(), open('kept.txt').read(), open('/opt/app/conf').read()")
        self.assertEqual(r["result"]["data"]["text/plain"], "(10, 'kept', 'root')")
        self.assertEqual(r["session"]["state"], "restored", r["session"])
        self.assertIn("restarted", r["session"]["reason"])
        self.assertEqual([e["name"] for e in r["session"]["not_restored"]], ["g"])
        self.assertEqual(self.run_in(sid, "1")["session"]["state"], "preserved")
        # Still the owner's only.
        self.assertProblem(self.server.request("POST", f"/v1/sessions/{theirs}/execute", {"code": "secret"},
                                               token=KEY_A), 404, "session-not-found")
        self.assertEqual(self.value(theirs, "secret", token=KEY_B), "'bravo'")
        # Deleted is gone, file and all.
        self.assertEqual(self.server.request("DELETE", f"/v1/sessions/{sid}").status, 204)
        self.assertFalse(os.path.exists(self.session_file(sid)))

    def test_kill_9_keeps_the_last_checkpoint_and_says_what_was_lost(self):
        self.start("durable-kill-1")
        sid = self.create(checkpoint=True)
        self.run_in(sid, "v = 1")
        self.run_in(sid, "v = 2")
        plain = self.create()
        self.run_in(plain, "w = 1")
        self.server.track()
        self.server.proc.send_signal(signal.SIGKILL)
        self.server.proc.wait(timeout=30)

        self.start("durable-kill-2")
        r = self.run_in(sid, "v")
        self.assertEqual(r["result"]["data"]["text/plain"], "1")
        self.assertEqual(r["session"]["state"], "restored", r["session"])
        self.assertIn("execution 1 of 2", r["session"]["reason"])
        r = self.run_in(plain, "'w' in globals()")
        self.assertEqual(r["result"]["data"]["text/plain"], "False")
        self.assertEqual(r["session"]["state"], "lost")
        self.assertEqual(r["session"]["reason"], "server_restarted")

    def test_a_paused_session_stays_paused_across_a_kill_9_and_resumes_with_its_state(self):
        self.start("durable-pause-1")
        sid = self.create()
        self.run_in(sid, "v = 3\nopen('p.txt', 'w').write('p')\nimport os\n"
                         "os.makedirs('/opt/app', exist_ok=True)\nopen('/opt/app/conf', 'w').write('root')")
        self.assertProblem(self.server.request("POST", f"/v1/sessions/{sid}/pause", token=KEY_B),
                           404, "session-not-found")
        r = self.server.request("POST", f"/v1/sessions/{sid}/pause")
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual((r.json()["paused"], r.json()["changed"]), (True, True))
        self.assertEqual(r.json()["memory"]["pss_bytes"], 0)  # no process
        again = self.server.request("POST", f"/v1/sessions/{sid}/pause").json()
        self.assertEqual((again["paused"], again["changed"]), (True, False))
        self.assertEqual(self.server.request("GET", f"/v1/sessions/{sid}/pause").status, 405)
        self.server.track()
        self.server.proc.send_signal(signal.SIGKILL)
        self.server.proc.wait(timeout=30)

        self.start("durable-pause-2")
        self.assertTrue(self.server.request("GET", f"/v1/sessions/{sid}").json()["paused"])
        r = self.server.request("POST", f"/v1/sessions/{sid}/resume")
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual((r.json()["paused"], r.json()["changed"]), (False, True))
        self.assertFalse(self.server.request("POST", f"/v1/sessions/{sid}/resume").json()["changed"])
        r = self.run_in(sid, "v, open('p.txt').read(), open('/opt/app/conf').read()")
        self.assertEqual(r["result"]["data"]["text/plain"], "(3, 'p', 'root')")
        self.assertEqual(r["session"]["state"], "restored", r["session"])
        self.assertIn("paused", r["session"]["reason"])

    def test_a_corrupt_e2b_record_is_dropped_and_the_server_serves(self):
        self.start("durable-record-1")
        r = self.server.request("POST", "/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["sandboxID"]
        record = os.path.join(self.state, "e2b", sid + ".json")
        self.assertEqual(stat.S_IMODE(os.stat(record).st_mode), 0o600)
        self.assertEqual(self.server.stop(), 0)
        with open(record, "w") as f:
            f.write('{"id": "%s", "token": 3' % sid)  # cut short, and a token not a string
        self.start("durable-record-2")
        self.assertFalse(os.path.exists(record))
        # The session came back, but not as an E2B sandbox: without its record it has no token.
        self.assertEqual(self.server.request("GET", f"/sandboxes/{sid}").status, 404)
        self.assertEqual(self.server.request("GET", f"/v1/sessions/{sid}").status, 200)
        self.assertEqual(self.server.request("POST", "/sandboxes", {"templateID": "base"}).status, 201)
        self.assertIn("cannot be read", self.server.stderr_text())

    def test_an_e2b_snapshot_outlives_its_sandbox_and_the_server_and_is_only_its_keys(self):
        self.start("durable-snapshot-1")
        r = self.server.request("POST", "/sandboxes", {"templateID": "base"})
        self.assertEqual(r.status, 201, repr(r))
        sid = r.json()["sandboxID"]
        self.run_in(sid, "snap = 'kept'\nopen('s.txt', 'w').write('file')")
        r = self.server.request("POST", f"/sandboxes/{sid}/snapshots", {"name": "durable"})
        self.assertEqual(r.status, 201, repr(r))
        snap = r.json()["snapshotID"]
        self.assertEqual(r.json()["names"], ["durable"])
        self.assertEqual(self.server.request("POST", f"/sandboxes/{sid}/snapshots", {"name": "has space"}).status, 400)
        self.assertEqual(self.server.request("POST", f"/sandboxes/{sid}/snapshots", {"name": "n" * 129}).status, 400)
        self.run_in(sid, "snap = 'later'")  # the snapshot holds the state of its moment
        # Another key neither lists it, nor makes a sandbox of it, nor deletes it.
        self.assertEqual(self.server.request("GET", "/snapshots", token=KEY_B).json(), [])
        self.assertEqual(self.server.request("POST", "/sandboxes", {"templateID": snap}, token=KEY_B).status, 400)
        self.assertEqual(self.server.request("DELETE", f"/templates/{snap}", token=KEY_B).status, 404)
        self.assertEqual(self.server.request("DELETE", f"/sandboxes/{sid}").status, 204)
        files = sorted(os.listdir(os.path.join(self.state, "snapshots")))
        self.assertEqual(files, [snap + ".meta", snap + ".snapshot"])
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.state, "snapshots", snap + ".snapshot")).st_mode),
                         0o600)
        self.assertEqual(self.server.stop(), 0)

        self.start("durable-snapshot-2")
        r = self.server.request("GET", f"/snapshots?sandboxID={sid}")
        self.assertEqual(r.json(), [{"snapshotID": snap, "names": ["durable"]}])
        self.assertEqual(self.server.request("GET", "/snapshots?name=other").json(), [])
        r = self.server.request("POST", "/sandboxes", {"templateID": "durable"})  # by its name
        self.assertEqual(r.status, 201, repr(r))
        made = r.json()["sandboxID"]
        self.assertEqual(r.json()["templateID"], "durable")
        self.assertEqual(self.value(made, "snap, open('s.txt').read()"), "('kept', 'file')")
        self.assertEqual(self.server.request("DELETE", "/templates/base").status, 400)
        self.assertEqual(self.server.request("DELETE", f"/templates/{snap}").status, 204)
        self.assertEqual(self.server.request("DELETE", f"/templates/{snap}").status, 404)
        self.assertEqual(self.server.request("POST", "/sandboxes", {"templateID": snap}).status, 400)
        self.assertEqual(self.server.request("GET", "/snapshots").json(), [])
        self.assertEqual(os.listdir(os.path.join(self.state, "snapshots")), [])
        # What is not offered says so, in E2B's shape.
        r = self.server.request("POST", "/v3/templates", {"name": "x"})
        self.assertEqual(r.status, 501)
        self.assertIn("template builds are not offered", r.json()["message"])
        self.assertEqual(self.server.request("GET", "/volumes").status, 501)
        self.assertEqual(self.server.request("GET", "/snapshots", auth=False).status, 401)

    def test_a_tampered_or_foreign_file_is_refused_and_the_server_serves(self):
        self.start("durable-tamper-1")
        sid = self.create()
        self.run_in(sid, "x = 41")
        self.assertEqual(self.server.stop(), 0)
        path = self.session_file(sid)
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0x01
        open(path, "wb").write(bytes(data))
        junk = "s_" + "0" * 32
        with open(self.session_file(junk), "wb") as f:
            f.write(b"EXBSEAL1" + os.urandom(200))

        self.start("durable-tamper-2")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}"), 404, "session-not-found")
        log = self.server.stderr_text()
        self.assertIn(f"session file {sid}.session refused", log)
        self.assertIn(f"session file {junk}.session refused", log)
        self.assertTrue(os.path.exists(path + ".refused"))
        self.assertResult(self.server.execute("1 + 1"), "ok")

    def test_a_state_dir_that_cannot_be_used_stops_the_start(self):
        not_a_dir = os.path.join(self.state, "file")
        open(not_a_dir, "w").close()
        server = Server(name="durable-bad-dir", flags=["--session-state-dir", not_a_dir])
        server.spawn()
        self.addCleanup(server.kill)
        self.assertEqual(server.proc.wait(timeout=60), 70)
        server.wait_exit()
        self.assertIn("is not a directory", server.stderr_text())

    def test_export_and_import_are_the_owners_only(self):
        self.start("durable-export")
        sid = self.create()
        self.run_in(sid, "rows = [1, 2]\nfh = open('f.txt', 'w')\nopen('/etc/exported.conf', 'w').write('e')")
        r = self.server.request("GET", f"/v1/sessions/{sid}/snapshot")
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(r.header("content-type"), "application/octet-stream")
        self.assertIn('"name":"fh"', r.header("execbox-not-copied"))
        sealed = r.body
        headers = {"Content-Type": "application/octet-stream"}
        imported = self.server.request("POST", "/v1/sessions/import", sealed, headers=headers)
        self.assertEqual(imported.status, 201, repr(imported))
        body = imported.json()
        self.assertValid("UndoneSession", body)
        new = body["id"]
        self.addCleanup(self.server.request, "DELETE", f"/v1/sessions/{new}")
        self.assertNotEqual(new, sid)
        self.assertEqual([e["name"] for e in body["not_restored"]], ["fh"])
        self.assertEqual(self.value(new, "rows.append(3)\nrows"), "[1, 2, 3]")
        self.assertEqual(self.value(new, "open('/etc/exported.conf').read()"), "'e'")
        self.assertEqual(self.value(sid, "rows"), "[1, 2]")
        # Another key's export, a changed byte, and junk are refused; nothing is made of them.
        self.assertProblem(self.server.request("POST", "/v1/sessions/import", sealed, headers=headers, token=KEY_B),
                           400, "snapshot-not-yours")
        changed = bytearray(sealed)
        changed[-100] ^= 0x40
        self.assertProblem(self.server.request("POST", "/v1/sessions/import", bytes(changed), headers=headers),
                           400, "invalid-snapshot")
        self.assertProblem(self.server.request("POST", "/v1/sessions/import", b"junk", headers=headers),
                           400, "invalid-snapshot")
        self.assertProblem(self.server.request("GET", f"/v1/sessions/{sid}/snapshot", token=KEY_B),
                           404, "session-not-found")
        listing = self.server.request("GET", "/v1/sessions", token=KEY_B).json()
        self.assertEqual(listing["sessions"], [])
