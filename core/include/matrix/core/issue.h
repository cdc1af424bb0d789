// File: matrix/core/issue.h
//
// Issue is one report from a plugin: a tag (Trace_FPS, Trace_EvilMethod,
// Trace_StartUp, BlockCanary), a de-duplication key, the reporting plugin,
// time, process, device context and the typed report, held as the protobuf
// message matrix::proto::Issue. PluginListeners receive it.
//
//   void OnReportIssue(const matrix::Issue& issue) override {
//     if (issue.tag() == matrix::kTagEvilMethod && issue.proto().has_anr()) {
//       const auto& anr = issue.proto().anr();
//       Upload(issue.key(), anr.thread_stack());
//     }
//     std::cout << issue.ToJson() << "\n";
//   }
//
// Thread safety: a value type; thread-compatible.

#ifndef MATRIX_CORE_ISSUE_H_
#define MATRIX_CORE_ISSUE_H_

#include <string>

#include "matrix/proto/issue.pb.h"

namespace matrix {

class Plugin;

// Matrix's tags.
inline constexpr char kTagFps[] = "Trace_FPS";
inline constexpr char kTagEvilMethod[] = "Trace_EvilMethod";
inline constexpr char kTagStartup[] = "Trace_StartUp";
inline constexpr char kTagBlockCanary[] = "BlockCanary";

class Issue {
 public:
  Issue() = default;
  explicit Issue(proto::Issue proto) : proto_(std::move(proto)) {}

  const std::string& tag() const { return proto_.tag(); }
  const std::string& key() const { return proto_.key(); }
  int type() const { return proto_.type(); }
  // The reporting plugin, or null when the issue was not reported by one.
  Plugin* plugin() const { return plugin_; }
  void set_plugin(Plugin* plugin) { plugin_ = plugin; }

  const proto::Issue& proto() const { return proto_; }
  proto::Issue* mutable_proto() { return &proto_; }

  // One line of JSON, as protobuf's printer writes it with the proto field
  // names and default primitives printed (matrix/core/proto_json.h).
  std::string ToJson() const;
  // Matrix's form: "tag[...]type[...];key[...];content[<json>]".
  std::string ToString() const;

 private:
  proto::Issue proto_;
  Plugin* plugin_ = nullptr;
};

}  // namespace matrix

#endif  // MATRIX_CORE_ISSUE_H_
