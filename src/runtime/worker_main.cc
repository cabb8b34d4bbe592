// execbox-worker: the zygote. Runs inside a jail started with Policy::zygote (see worker.h):
// embeds CPython, imports the agent and preloads the scientific stack once, then forks an
// isolated child per command (jail/zygote_loop.h). Every per-child isolation step is C++; the
// Python side only ever runs in a child that is already locked down.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "jail/landlock.h"
#include "jail/seccomp_filter.h"
#include "jail/zygote_loop.h"

namespace {

constexpr int kCommandFd = 3;
PyObject* g_agent = nullptr;

void BeforeFork() { PyOS_BeforeFork(); }
void AfterForkParent() { PyOS_AfterFork_Parent(); }
void AfterForkChild() { PyOS_AfterFork_Child(); }

// In the locked-down child: the agent serves the channel and ends the process itself.
void RunCode(int channel, bool session, int layer, int egress_port, bool prewarm) {
  PyObject* r = PyObject_CallMethod(g_agent, "serve", "iOiiO", channel, session ? Py_True : Py_False, layer,
                                    egress_port, prewarm ? Py_True : Py_False);
  if (r == nullptr) PyErr_Print();
  std::fflush(stderr);
  _exit(70);
}

[[noreturn]] void Refuse(const std::string& why) {
  execbox::jail::ZygoteReady ready{};
  ready.ok = 0;
  std::snprintf(ready.message, sizeof ready.message, "%s", why.c_str());
  (void)::send(kCommandFd, &ready, sizeof ready, MSG_NOSIGNAL);
  std::fprintf(stderr, "execbox-worker: %s\n", why.c_str());
  _exit(1);
}

bool InitPython() {
  // UTF-8 mode, as the cold agent runs (python3 -X utf8): an embedded interpreter keeps the C
  // locale, whose ASCII file system encoding cannot open "données.csv".
  PyPreConfig preconfig;
  PyPreConfig_InitIsolatedConfig(&preconfig);
  preconfig.utf8_mode = 1;
  if (PyStatus_Exception(Py_PreInitialize(&preconfig))) return false;
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
  config.site_import = 0;  // as `python3 -I -S`: the agent sets sys.path itself
  config.install_signal_handlers = 0;
  config.write_bytecode = 0;
  config.buffered_stdio = 0;
  config.parse_argv = 0;
  PyStatus st = PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
  if (!PyStatus_Exception(st)) st = PyConfig_SetString(&config, &config.executable, L"/usr/bin/python3");
  if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  return !PyStatus_Exception(st);
}

// Imports the agent package (its directory holds .pyc or .py files) as execbox_agent and warms
// it up; returns preload failures.
std::string LoadAgent(const std::string& package_dir, const std::vector<std::string>& preload, bool plot,
                      bool freeze) {
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* path_obj = PyUnicode_FromString(package_dir.c_str());
  PyDict_SetItemString(globals, "AGENT_DIR", path_obj);
  PyObject* list = PyList_New(0);
  for (const auto& m : preload) {
    PyObject* s = PyUnicode_FromString(m.c_str());
    PyList_Append(list, s);
    Py_DECREF(s);
  }
  PyDict_SetItemString(globals, "PRELOAD", list);
  PyDict_SetItemString(globals, "PLOT", plot ? Py_True : Py_False);
  PyDict_SetItemString(globals, "FREEZE", freeze ? Py_True : Py_False);
  // The package's parent is on sys.path for this import only: the user's code gets the path
  // the agent builds.
  const char* bootstrap =
      "import sys\n"
      "sys.path.insert(0, AGENT_DIR.rpartition('/')[0])\n"
      "import execbox_agent.warm as agent\n"
      "del sys.path[0]\n"
      "FAILURES = '\\n'.join(agent.warm_up(PRELOAD, PLOT, FREEZE))\n";
  PyObject* r = PyRun_String(bootstrap, Py_file_input, globals, globals);
  if (r == nullptr) {
    PyErr_Print();
    Refuse("the agent could not be loaded or warmed up (see the worker's stderr)");
  }
  Py_DECREF(r);
  g_agent = PyDict_GetItemString(globals, "agent");
  Py_XINCREF(g_agent);
  const char* failures = PyUnicode_AsUTF8(PyDict_GetItemString(globals, "FAILURES"));
  std::string out = failures != nullptr ? failures : "";
  Py_DECREF(path_obj);
  Py_DECREF(list);
  return out;
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer build (make test-sanitize) only. ASan keeps freed memory in a quarantine (256 MB
// by default) that the zygote fills while it preloads; a child that frees anything recycles the
// zygote's quarantined chunks and so copies their pages, charging its own memory limit with the
// zygote's garbage (a 300 MB bytearray peaked at 566 MB). A small quarantine keeps a child's
// memory what the real build's is, so the memory-limit tests mean the same under ASan.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=8"; }
#endif

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: execbox-worker CONFIG.json (started by execbox, inside a jail)\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  auto config = nlohmann::json::parse(text.str(), nullptr, false);
  if (config.is_discarded() || !config.contains("agent")) Refuse("unreadable worker config");
  auto seccomp = execbox::jail::CompileSeccompProgram();
  if (!seccomp) Refuse("seccomp: " + seccomp.error().message);
  auto seccomp_loopback = execbox::jail::CompileSeccompProgram(true);
  if (!seccomp_loopback) Refuse("seccomp: " + seccomp_loopback.error().message);
  if (!InitPython()) Refuse("the interpreter could not be initialised");
  std::string failures =
      LoadAgent(config["agent"].get<std::string>(), config.value("preload", std::vector<std::string>{}),
                config.value("warm_plot", true), config.value("gc_freeze", true));

  // After the warm-up and its final collection: the memory every child will share.
  if (config.value("huge_pages", true)) execbox::jail::CollapseIntoHugePages();
  static execbox::jail::ZygoteSetup setup;
  setup.seccomp = &*seccomp;
  setup.seccomp_loopback = &*seccomp_loopback;
  // The work dir alias (/work) is a link to the home: writes through it land under the home.
  setup.landlock = execbox::jail::MakeLandlockPlan({setup.work_dir, "/tmp", "/dev/shm"},
                                                   {"/dev/null", "/dev/zero", "/dev/full",
                                                    // a session's ptys (its own devpts)
                                                    "/dev/pts"});
  setup.session_landlock = execbox::jail::MakeLandlockPlan({"/"}, {});
  setup.before_fork = BeforeFork;
  setup.after_fork_parent = AfterForkParent;
  setup.after_fork_child = AfterForkChild;
  setup.run_code = RunCode;
  execbox::jail::ZygoteReady ready{};
  ready.ok = 1;
  std::snprintf(ready.message, sizeof ready.message, "%s", failures.c_str());
  execbox::jail::ServeZygote(kCommandFd, ready, setup);
}
