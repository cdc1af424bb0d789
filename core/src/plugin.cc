#include "matrix/core/plugin.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
                                absl::Status (Plugin::*hook)(),
                                void (PluginListener::*notify)(Plugin&)) {
  absl::MutexLock lock(&lifecycle_mu_);
  const State current = state();
  bool allowed = false;
  for (State s : from) allowed |= (s == current);
  if (!allowed) {
    absl::Status error = absl::FailedPreconditionError(
        absl::StrCat("plugin '", tag_, "': cannot ", action, " a ", StateName(current),
                     " plugin"));
    Logger()->error("{}", std::string(error.message()));
    return error;
  }
  if (absl::Status status = (this->*hook)(); !status.ok()) {
    Logger()->error("plugin '{}': {} failed: {}", tag_, action, status.ToString());
    return status;
  }
  state_.store(to, std::memory_order_release);
  for (const auto& listener : context_.listeners) ((*listener).*notify)(*this);
  return absl::OkStatus();
}

absl::Status Plugin::Init(PluginContext context) {
  {
    absl::MutexLock lock(&lifecycle_mu_);
    if (state() == State::kCreated) {
      context_ = std::move(context);
      if (context_.worker_looper != nullptr) {
        delivery_handler_ =
            std::make_unique<Handler>(context_.worker_looper, "matrix::Plugin$Delivery");
      }
    }
  }
  return Transition("init", State::kInited, {State::kCreated}, &Plugin::OnInit,
                    &PluginListener::OnInit);
}

absl::Status Plugin::Start() {
  if (!IsSupported()) return absl::UnimplementedError("plugin '" + tag_ + "' is unsupported");
  return Transition("start", State::kStarted, {State::kInited, State::kStopped},
                    &Plugin::OnStart, &PluginListener::OnStart);
}

absl::Status Plugin::Stop() {
  return Transition("stop", State::kStopped, {State::kStarted}, &Plugin::OnStop,
                    &PluginListener::OnStop);
}

absl::Status Plugin::Destroy() {
  if (state() == State::kStarted) {
    if (absl::Status status = Stop(); !status.ok()) return status;
  }
  return Transition("destroy", State::kDestroyed,
                    {State::kCreated, State::kInited, State::kStopped}, &Plugin::OnDestroy,
                    &PluginListener::OnDestroy);
}

namespace {

const std::string& ProcessName() {
  static const std::string* const name = new std::string(program_invocation_short_name);
  return *name;
}

}  // namespace

void Plugin::FlushMatrixThreads() {
  if (context_.watchdog_looper != nullptr) context_.watchdog_looper->Flush();
  if (context_.worker_looper != nullptr) context_.worker_looper->Flush();
}

void Plugin::OnDetectIssue(Issue issue) {
  issue.set_plugin(this);
  proto::Issue& proto = *issue.mutable_proto();
  if (proto.tag().empty()) proto.set_tag(tag_);
  proto.set_plugin(tag_);
  proto.set_process(ProcessName());
  proto.set_pid(static_cast<int32_t>(getpid()));
  proto.set_time_ms(absl::ToUnixMillis(absl::Now()));
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
  for (const auto& listener : context_.listeners) listener->OnReportIssue(issue);
}

}  // namespace matrix
