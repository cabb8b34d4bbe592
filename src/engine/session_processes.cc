#include "engine/session_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "base/io.h"
#include "engine/session_process_record.h"
#include "jail/session_init.h"

namespace execbox::engine {
namespace {

// The init answers a start at once; only a wedged sandbox makes a start wait this long.
constexpr auto kStartTimeout = std::chrono::seconds(15);
// What a process's end drains of its pipes at once (the rest is read as it comes).
constexpr size_t kDrainAtEnd = 1 << 20;

}  // namespace

SessionProcesses::~SessionProcesses() {
  std::vector<ProcessPoller::Token> drop;
  {
    Lock lock(mu_);
    for (auto& [pid, r] : records_) drop.insert(drop.end(), r->watches.begin(), r->watches.end());
    if (link_token_ != 0) drop.push_back(link_token_);
  }
  Unwatch(drop);
}

void SessionProcesses::Unwatch(const std::vector<ProcessPoller::Token>& tokens) {
  if (poller_ == nullptr) return;
  for (auto token : tokens) poller_->Unwatch(token);
}

void SessionProcesses::Bind(std::shared_ptr<jail::InitLink> link, ProcessPoller* poller) {
  std::vector<ProcessPoller::Token> drop;
  ProcessPoller* old_poller = nullptr;
  {
    Lock lock(mu_);
    old_poller = poller_;
    if (link.get() == link_.get() && (poller == nullptr || poller == poller_)) return;
    EndAllLocked(drop);
    // The old sandbox is gone: nothing of it is read any more (and no watch outlives the
    // poller, which the session's owner destroys after its sessions).
    for (auto& [pid, r] : records_) {
      drop.insert(drop.end(), r->watches.begin(), r->watches.end());
      r->watches.clear();
    }
    if (link_token_ != 0) drop.push_back(link_token_);
    link_token_ = 0;
    link_ = link;
    if (poller != nullptr) poller_ = poller;
    if (link && poller_ != nullptr) {
      std::weak_ptr<SessionProcesses> weak = weak_from_this();
      auto token = poller_->WatchReadable(link->fd(), [weak, link] {
        bool open = link->Receive();
        auto events = link->TakeEvents();
        if (auto self = weak.lock()) self->Dispatch(link.get(), std::move(events), !open);
        return open;
      });
      if (token) link_token_ = *token;
    }
    changed_.notify_all();
  }
  if (old_poller != nullptr)
    for (auto token : drop) old_poller->Unwatch(token);
}

bool SessionProcesses::ready() {
  Lock lock(mu_);
  return link_ && !link_->closed();
}

ProcessExpected<ProcessInfo> SessionProcesses::Start(const ProcessSpec& spec,
                                                     std::unique_ptr<Follower>* follower) {
  if (spec.command.empty() == spec.argv.empty())
    return ProcessFailed(ProcessError::kInvalid, "give a command or argv (one of them)");
  jail::ProcessStart start;
  start.argv =
      spec.command.empty() ? spec.argv : std::vector<std::string>{"/bin/bash", "-l", "-c", spec.command};
  if (start.argv[0].empty()) return ProcessFailed(ProcessError::kInvalid, "the program's name is empty");
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find_first_of(std::string("=\0", 2)) != std::string::npos)
      return ProcessFailed(ProcessError::kInvalid,
                           "an environment name must be non-empty, without '=' or NUL");
    start.env.push_back(name + "=" + value);
  }
  start.cwd = spec.cwd;
  start.pty = spec.pty;
  if (spec.pty && (spec.rows < 1 || spec.rows > 1000 || spec.cols < 1 || spec.cols > 1000))
    return ProcessFailed(ProcessError::kInvalid, "a pty's rows and cols are 1 to 1000");
  start.rows = spec.rows;
  start.cols = spec.cols;
  size_t bytes = start.cwd.size() + 1;
  for (const auto* list : {&start.argv, &start.env})
    for (const auto& s : *list) bytes += s.size() + 1;
  if (bytes > jail::init_wire::kMaxPayload ||
      start.argv.size() + start.env.size() > jail::init_wire::kMaxStrings) {
    return ProcessFailed(ProcessError::kInvalid,
                         "the command, its environment and working directory take " + std::to_string(bytes) +
                             " bytes in " + std::to_string(start.argv.size() + start.env.size()) +
                             " strings; at most " + std::to_string(jail::init_wire::kMaxPayload) +
                             " bytes and " + std::to_string(jail::init_wire::kMaxStrings) + " strings");
  }
  auto pending = std::make_shared<Pending>();
  pending->spec = spec;
  pending->argv = start.argv;
  pending->follow = follower != nullptr;
  std::vector<UniqueFd> child_ends;  // the sandbox's ends: closed here once sent
  if (!spec.pty) {
    for (int i = 0; i < (spec.stdin ? 3 : 2); ++i) {
      auto pipe = MakePipe();
      if (!pipe) return ProcessFailed(ProcessError::kInternal, pipe.error().message);
      bool input = i == 2;
      auto host = std::make_shared<UniqueFd>(std::move(input ? pipe->second : pipe->first));
      child_ends.push_back(std::move(input ? pipe->first : pipe->second));
      (i == 0 ? pending->out : i == 1 ? pending->err : pending->in) = host;
    }
    start.stdout_write = child_ends[0].Get();
    start.stderr_write = child_ends[1].Get();
    if (spec.stdin) {
      start.stdin_read = child_ends[2].Get();
      ::fcntl(pending->in->Get(), F_SETFL, O_NONBLOCK);
    }
  }
  Lock lock(mu_);
  if (!link_ || link_->closed())
    return ProcessFailed(ProcessError::kSessionEnded,
                         "the session's sandbox has ended; run an execution to restart it");
  size_t running = pending_.size();
  for (const auto& [pid, r] : records_) running += r->running ? 1 : 0;
  if (running >= limits_.max_running) {
    return ProcessFailed(ProcessError::kFull, "the session runs " + std::to_string(running) +
                                                  " processes, its most (" +
                                                  std::to_string(limits_.max_running) +
                                                  "); end one (signal it) or wait for one to exit");
  }
  const uint32_t id = ++next_id_;
  pending_[id] = pending;
  std::shared_ptr<jail::InitLink> link = link_;
  lock.unlock();
  auto sent = link->Start(id, start);
  child_ends.clear();
  lock.lock();
  if (!sent) {
    pending_.erase(id);
    return ProcessFailed(ProcessError::kSessionEnded,
                         "the session's sandbox did not take the start: " + sent.error().message);
  }
  if (!changed_.wait_for(lock, kStartTimeout, [&] { return pending->answered; })) {
    pending_.erase(id);
    return ProcessFailed(ProcessError::kInternal, "the session's init did not answer a start in time");
  }
  if (!pending->info) return std::unexpected(pending->failure);
  if (follower != nullptr) *follower = std::move(pending->follower);
  return *pending->info;
}

void SessionProcesses::Dispatch(const jail::InitLink* link, std::vector<jail::InitEvent> events,
                                bool closed) {
  std::vector<ProcessPoller::Token> drop;
  {
    Lock lock(mu_);
    if (link != link_.get()) return;  // an earlier sandbox's: its processes ended at Bind
    for (auto& e : events) {
      using K = jail::InitEvent::Kind;
      if (e.kind == K::kStarted) {
        Started(link, e, drop);
      } else if (e.kind == K::kStartFailed) {
        if (auto it = pending_.find(e.id); it != pending_.end()) {
          it->second->failure = {ProcessError::kStartFailed, "could not start " + it->second->argv[0] + ": " +
                                                                 e.step + ": " + std::strerror(e.value)};
          it->second->answered = true;
          pending_.erase(it);
        }
      } else if (e.kind == K::kExited) {
        auto it = records_.find(e.pid);
        if (it != records_.end() && it->second->running && it->second->link == link)
          Ended(*it->second, e.value);
      }
      // kKernelEnded: the session's own (its child reports the kernel's end to the execution).
    }
    if (closed) EndAllLocked(drop);  // the init has gone: nothing of it runs any more
    Forget(drop);
    changed_.notify_all();
  }
  Unwatch(drop);
}

void SessionProcesses::Started(const jail::InitLink* link, jail::InitEvent& e,
                               std::vector<ProcessPoller::Token>& drop) {
  auto it = pending_.find(e.id);
  if (it == pending_.end()) return;  // not asked for (or given up): a pty's master closes with `e`
  std::shared_ptr<Pending> p = it->second;
  pending_.erase(it);
  p->answered = true;
  if (p->spec.pty != e.pty_master.Valid()) {
    (void)link_->Signal(e.pid, SIGKILL);
    p->failure = {ProcessError::kInternal, "the session's init answered a start wrongly"};
    return;
  }
  auto r = std::make_shared<Record>(limits_.stream_bytes);
  r->pid = e.pid;
  r->link = link;
  r->argv = p->argv;
  r->command = p->spec.command;
  r->tag = p->spec.tag;
  r->pty = p->spec.pty;
  r->rows = p->spec.pty ? p->spec.rows : 0;
  r->cols = p->spec.pty ? p->spec.cols : 0;
  r->started = std::chrono::system_clock::now();
  if (r->pty) {
    r->pty_master = r->input = std::make_shared<UniqueFd>(std::move(e.pty_master));
    r->outputs.emplace_back(r->pty_master, OutputStream::kPty);
  } else {
    r->input = p->in;
    r->outputs.emplace_back(p->out, OutputStream::kStdout);
    r->outputs.emplace_back(p->err, OutputStream::kStderr);
  }
  std::weak_ptr<SessionProcesses> weak = weak_from_this();
  for (auto& [fd, stream] : r->outputs) {
    auto token = poller_->Watch(
        fd,
        [weak, r, stream = stream](std::string_view data) {
          if (auto self = weak.lock()) self->Appended(*r, stream, data);
        },
        nullptr);
    if (token) r->watches.push_back(*token);
  }
  if (auto old = records_.find(r->pid);
      old != records_.end()) {  // a pid used again: the old one is forgotten
    buffered_ -= old->second->log.buffered();
    drop.insert(drop.end(), old->second->watches.begin(), old->second->watches.end());
  }
  records_[r->pid] = r;
  p->info = InfoOf(*r);
  if (p->follow) {
    const uint64_t id = ++next_follower_;
    r->followers[id] = 0;
    p->follower.reset(new Follower(weak_from_this(), r, id));
  }
}

void SessionProcesses::Ended(Record& r, std::optional<int> status) {
  r.running = false;
  r.ended = std::chrono::system_clock::now();
  r.status = status;
  r.input.reset();
  if (r.held && poller_ != nullptr) {
    r.held = false;  // what is left in its pipes is read to their end
    for (auto token : r.watches) poller_->Hold(token, false);
  }
  if (!status) return;
  // What it wrote before it ended is in its pipes now: taken before a follower hears the end.
  char buf[65536];
  for (auto& [fd, stream] : r.outputs) {
    for (size_t taken = 0; taken < kDrainAtEnd;) {
      struct pollfd p = {.fd = fd->Get(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 0) <= 0 || (p.revents & POLLIN) == 0) break;
      ssize_t n = ::read(fd->Get(), buf, sizeof buf);
      if (n <= 0) break;
      const size_t before = r.log.buffered();
      r.log.Append(stream, std::string_view(buf, static_cast<size_t>(n)), r.keep_from());
      buffered_ = buffered_ - before + r.log.buffered();
      taken += static_cast<size_t>(n);
    }
  }
}

void SessionProcesses::EndAllLocked(std::vector<ProcessPoller::Token>& drop) {
  for (auto& [pid, r] : records_) {
    if (r->running) {
      Ended(*r, std::nullopt);
      drop.insert(drop.end(), r->watches.begin(), r->watches.end());
      r->watches.clear();
    }
  }
  for (auto& [id, p] : pending_) {
    p->failure = {ProcessError::kSessionEnded, "the session's sandbox ended before the process started"};
    p->answered = true;
  }
  pending_.clear();
}

// Ended processes beyond max_kept are forgotten, the longest ended first.
void SessionProcesses::Forget(std::vector<ProcessPoller::Token>& drop) {
  for (;;) {
    size_t ended = 0;
    auto oldest = records_.end();
    for (auto it = records_.begin(); it != records_.end(); ++it) {
      if (it->second->running) continue;
      ++ended;
      if (oldest == records_.end() || it->second->ended < oldest->second->ended) oldest = it;
    }
    if (ended <= limits_.max_kept) return;
    buffered_ -= oldest->second->log.buffered();
    drop.insert(drop.end(), oldest->second->watches.begin(), oldest->second->watches.end());
    records_.erase(oldest);
  }
}

void SessionProcesses::Appended(Record& r, OutputStream stream, std::string_view data) {
  Lock lock(mu_);
  auto it = records_.find(r.pid);
  if (it == records_.end() || it->second.get() != &r) return;  // forgotten
  const size_t before = r.log.buffered();
  r.log.Append(stream, data, r.keep_from());
  buffered_ = buffered_ - before + r.log.buffered();
  if (!r.held && r.running && r.log.over_cap() && poller_ != nullptr) {
    r.held = true;  // a follower lags: the process waits for it, as on a pipe
    for (auto token : r.watches) poller_->Hold(token, true);
  }
  if (buffered_ > limits_.session_bytes) {
    // Over the session's budget: ended processes' output goes first, the longest ended first.
    std::vector<Record*> ended;
    for (auto& [pid, other] : records_) {
      if (!other->running && other->log.buffered() > 0) ended.push_back(other.get());
    }
    std::sort(ended.begin(), ended.end(), [](Record* a, Record* b) { return a->ended < b->ended; });
    for (Record* other : ended) {
      if (buffered_ <= limits_.session_bytes) break;
      buffered_ -= other->log.DropOldest(buffered_ - limits_.session_bytes);
    }
    if (buffered_ > limits_.session_bytes) buffered_ -= r.log.DropOldest(buffered_ - limits_.session_bytes);
  }
  changed_.notify_all();
}

void SessionProcesses::Advance(Record& r) {
  const size_t before = r.log.buffered();
  r.log.Trim(r.keep_from());
  buffered_ = buffered_ - before + r.log.buffered();
  if (r.held && !r.log.over_cap() && poller_ != nullptr) {
    r.held = false;
    for (auto token : r.watches) poller_->Hold(token, false);
  }
}

ProcessInfo SessionProcesses::InfoOf(const Record& r) const {
  ProcessInfo info{.pid = r.pid,
                   .argv = r.argv,
                   .command = r.command,
                   .tag = r.tag,
                   .pty = r.pty,
                   .stdin_open = r.running && r.input != nullptr,
                   .started = r.started,
                   .running = r.running,
                   .ended = r.ended,
                   .output_bytes = r.log.end(),
                   .rows = r.rows,
                   .cols = r.cols};
  if (!r.running) {
    if (r.status && WIFEXITED(*r.status)) {
      info.exit_code = WEXITSTATUS(*r.status);
      info.ended_by = "exit";
    } else if (r.status && WIFSIGNALED(*r.status)) {
      info.signal = WTERMSIG(*r.status);
      info.ended_by = "signal";
    } else {
      info.ended_by = "session_end";
    }
  }
  return info;
}

std::shared_ptr<SessionProcesses::Record> SessionProcesses::Find(int32_t pid) {
  auto it = records_.find(pid);
  return it == records_.end() ? nullptr : it->second;
}

}  // namespace execbox::engine
