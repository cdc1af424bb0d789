#include "matrix/core/plugin.h"

#include <cxxabi.h>
#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "matrix/core/app_identity.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"

namespace matrix {

const char* Plugin::StateName(State state) {
  switch (state) {
    case State::kCreated: return "created";
    case State::kInited: return "inited";
    case State::kStarted: return "started";
    case State::kStopped: return "stopped";
    case State::kDestroyed: return "destroyed";
  }
  return "unknown";
}

Plugin::Plugin(std::string tag) : tag_(std::move(tag)) {}

Plugin::~Plugin() = default;  // delivery_handler_ drops pending deliveries.

absl::Status Plugin::Transition(const char* action, State to, std::initializer_list<State> from,
                                absl::Status (Plugin::*hook)(), const char* callback,
                                void (PluginListener::*notify)(Plugin&)) {
  absl::MutexLock lock(&lifecycle_mu_);
  const State current = state();
  bool allowed = false;
  for (State s : from) allowed |= (s == current);
  if (!allowed) {
    absl::Status error = absl::FailedPreconditionError(absl::StrCat(
        "plugin '", tag_, "': cannot ", action, " a ", StateName(current), " plugin",
        failed_init_.ok() ? ""
                          : absl::StrCat(" (Matrix::Init failed: ", failed_init_.ToString(),
                                         ")")));
    Logger()->error("{}", std::string(error.message()));
    return error;
  }
  if (absl::Status status = (this->*hook)(); !status.ok()) {
    Logger()->error("plugin '{}': {} failed: {}", tag_, action, status.ToString());
    return status;
  }
  state_.store(to, std::memory_order_release);
  for (size_t i = 0; i < context_.listeners.size(); ++i) {
    NotifyListener(i, callback, [&](PluginListener& listener) { (listener.*notify)(*this); });
  }
  return absl::OkStatus();
}

absl::Status Plugin::Init(PluginContext context) {
  {
    absl::MutexLock lock(&lifecycle_mu_);
    if (state() == State::kCreated) {
      context_ = std::move(context);
      listener_failure_logged_ =
          std::make_unique<std::atomic<bool>[]>(context_.listeners.size());
      if (context_.worker_looper != nullptr) {
        delivery_handler_ =
            std::make_unique<Handler>(context_.worker_looper, "matrix::Plugin$Delivery");
      }
      if (context_.main_looper != nullptr) {
        main_handler_ = std::make_unique<Handler>(context_.main_looper, "matrix::Plugin$Main");
      }
    }
  }
  return Transition("init", State::kInited, {State::kCreated}, &Plugin::OnInit, "OnInit",
                    &PluginListener::OnInit);
}

absl::Status Plugin::Start() {
  if (!IsSupported()) return absl::UnimplementedError("plugin '" + tag_ + "' is unsupported");
  return Transition("start", State::kStarted, {State::kInited, State::kStopped},
                    &Plugin::OnStart, "OnStart",
                    &PluginListener::OnStart);
}

absl::Status Plugin::Stop() {
  return Transition("stop", State::kStopped, {State::kStarted}, &Plugin::OnStop, "OnStop",
                    &PluginListener::OnStop);
}

void Plugin::DestroyAfterFailedInit(const absl::Status& why) {
  if (state() != State::kDestroyed) Destroy().IgnoreError();
  absl::MutexLock lock(&lifecycle_mu_);
  failed_init_ = why;
}

absl::Status Plugin::Destroy() {
  if (state() == State::kStarted) {
    if (absl::Status status = Stop(); !status.ok()) return status;
  }
  return Transition("destroy", State::kDestroyed,
                    {State::kCreated, State::kInited, State::kStopped}, &Plugin::OnDestroy,
                    "OnDestroy", &PluginListener::OnDestroy);
}

namespace {

const std::string& ProcessName() {
  static const std::string* const name = new std::string(program_invocation_short_name);
  return *name;
}

}  // namespace

void Plugin::RunOnMainLooper(absl::AnyInvocable<void()> fn, bool wait) {
  Looper* looper = context_.main_looper;
  if (looper == nullptr || main_handler_ == nullptr || looper->IsCurrentThread()) {
    fn();
    return;
  }
  if (!wait) {
    main_handler_->Post(std::move(fn));
    return;
  }
  if (!looper->is_looping()) {
    fn();  // Nobody runs the looper: no thread to race with.
    return;
  }
  absl::Notification done;
  main_handler_->Post([&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
}

void Plugin::FlushMatrixThreads() { FlushMatrixThreadsFor(absl::InfiniteDuration()); }

bool Plugin::FlushMatrixThreadsFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // The watchdog first: what it detects, it hands to the worker.
  if (context_.watchdog_looper != nullptr &&
      !context_.watchdog_looper->FlushFor(deadline - absl::Now())) {
    return false;
  }
  return context_.worker_looper == nullptr ||
         context_.worker_looper->FlushFor(deadline - absl::Now());
}

void Plugin::OnDetectIssue(Issue issue) {
  issue.set_plugin(this);
  proto::Issue& proto = *issue.mutable_proto();
  if (proto.tag().empty()) proto.set_tag(tag_);
  proto.set_plugin(tag_);
  proto.set_process(ProcessName());
  proto.set_pid(static_cast<int32_t>(getpid()));
  proto.set_time_ms(absl::ToUnixMillis(absl::Now()));
  *proto.mutable_app() = CurrentAppIdentity();
  DecorateIssue(issue);

  if (delivery_handler_ == nullptr) {
    Deliver(issue);
    return;
  }
  // Listeners always hear issues on the worker thread, in report order.
  delivery_handler_->Post([this, issue = std::move(issue)] { Deliver(issue); });
}

void Plugin::Deliver(const Issue& issue) {
  if (context_.listeners.empty()) {
    Logger()->info("{}", issue.ToString());
    return;
  }
  for (size_t i = 0; i < context_.listeners.size(); ++i) {
    NotifyListener(i, "OnReportIssue",
                   [&](PluginListener& listener) { listener.OnReportIssue(issue); });
  }
}

namespace {

std::string TypeName(const PluginListener& listener) {
  const char* mangled = typeid(listener).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled != nullptr) ? demangled : mangled;
  std::free(demangled);
  return name;
}

}  // namespace

void Plugin::NotifyListener(size_t index, const char* callback,
                            absl::FunctionRef<void(PluginListener&)> notify) {
  PluginListener& listener = *context_.listeners[index];
  std::string what;
  try {
    notify(listener);
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception (not a std::exception)";
  }
  // A monitor never takes its host down for a listener's bug.
  listener_failures_.fetch_add(1, std::memory_order_relaxed);
  if (listener_failure_logged_[index].exchange(true, std::memory_order_relaxed)) return;
  Logger()->error(
      "plugin '{}': PluginListener #{} ({}) threw from {}: {}; delivery goes on, and its "
      "further failures are only counted (Plugin::listener_failures())",
      tag_, index, TypeName(listener), callback, what);
}

}  // namespace matrix
