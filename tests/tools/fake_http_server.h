// A tiny HTTP/1.1 server on 127.0.0.1 for tests: one thread accepts
// connections one at a time, reads each request (headers and a
// Content-Length body) and answers what the handler returns, then closes the
// connection. It stands in for servers that are not ClickHouse (a web server
// answering 200 with a page) and for a ClickHouse that misbehaves.
//
//   FakeHttpServer server([](const FakeHttpServer::Request& request) {
//     return FakeHttpServer::Response{.status = 200, .body = "<html></html>"};
//   });
//   ASSERT_TRUE(server.Start());
//   Push(server.url());
//
// Thread safety: Start, url and the destructor on the test thread; the
// handler runs on the server's thread; requests() on any thread.

#ifndef MATRIX_TESTS_TOOLS_FAKE_HTTP_SERVER_H_
#define MATRIX_TESTS_TOOLS_FAKE_HTTP_SERVER_H_

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace matrix::report::test_util {

class FakeHttpServer {
 public:
  struct Request {
    std::string method;
    std::string target;  // "/?query=INSERT%20INTO..."
    std::string body;
  };
  struct Response {
    int status = 200;
    // Extra header lines, "Name: value" each.
    std::vector<std::string> headers;
    std::string body;
  };
  using Handler = std::function<Response(const Request&)>;

  explicit FakeHttpServer(Handler handler) : handler_(std::move(handler)) {}
  ~FakeHttpServer() {
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    if (stop_fd_[1] >= 0) (void)!::write(stop_fd_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
    for (int fd : {listen_fd_, stop_fd_[0], stop_fd_[1]}) {
      if (fd >= 0) ::close(fd);
    }
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  // Listens on 127.0.0.1 on a port of the kernel's choice. False on failure.
  bool Start() {
    if (::pipe(stop_fd_) != 0) return false;
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return false;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
    return true;
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

  // The requests answered so far.
  std::vector<Request> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

  // Waits until `predicate` holds for the requests answered so far, or
  // `timeout` passes. True when it holds.
  bool AwaitRequests(const std::function<bool(const std::vector<Request>&)>& predicate,
                     absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return predicate(requests_); };
    return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
  }

 private:
  void Serve() {
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 || fds[1].revents != 0) return;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      Request request;
      if (Read(fd, request)) {
        const Response response = handler_(request);
        std::string text = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                        response.status == 200 ? "OK" : "Error", "\r\n");
        for (const std::string& header : response.headers) absl::StrAppend(&text, header, "\r\n");
        absl::StrAppend(&text, "Content-Length: ", response.body.size(),
                        "\r\nConnection: close\r\n\r\n", response.body);
        for (size_t sent = 0; sent < text.size();) {
          const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
        absl::MutexLock lock(&mu_);
        requests_.push_back(std::move(request));
      }
      ::close(fd);
    }
  }

  // Reads one request: the request line, headers, and Content-Length bytes.
  static bool Read(int fd, Request& request) {
    std::string data;
    char buffer[65536];
    size_t header_end = std::string::npos;
    int64_t length = 0;
    while (true) {
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          const std::string head = absl::AsciiStrToLower(data.substr(0, header_end));
          const size_t at = head.find("\r\ncontent-length:");
          if (at != std::string::npos) {
            const size_t end = head.find("\r\n", at + 2);
            (void)absl::SimpleAtoi(
                absl::StripAsciiWhitespace(absl::string_view(head).substr(
                    at + 17, end == std::string::npos ? std::string::npos : end - at - 17)),
                &length);
          }
        }
      }
      if (header_end != std::string::npos &&
          data.size() >= header_end + 4 + static_cast<size_t>(length)) {
        break;
      }
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<size_t>(n));
    }
    const size_t first_space = data.find(' ');
    const size_t second_space = data.find(' ', first_space + 1);
    if (first_space == std::string::npos || second_space == std::string::npos) return false;
    request.method = data.substr(0, first_space);
    request.target = data.substr(first_space + 1, second_space - first_space - 1);
    request.body = data.substr(header_end + 4, static_cast<size_t>(length));
    return true;
  }

  const Handler handler_;
  int listen_fd_ = -1;
  int stop_fd_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace matrix::report::test_util

#endif  // MATRIX_TESTS_TOOLS_FAKE_HTTP_SERVER_H_
