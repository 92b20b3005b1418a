// Helpers of demo/purchase_demo.cpp: child processes, HTTP/1.1 over a Unix socket (one request
// per connection, the way a webhook sender talks to an endpoint), log lines that stay whole when
// several processes print at once, report lines between processes, and the PASS/FAIL table.
#pragma once

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <csignal>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results_table.hpp" // demo::Row, demo::print_table

namespace demo {

// One whole line on stdout with a single write(2): lines of several processes never mix.
inline void say(const char *fmt, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(b, sizeof b - 1, fmt, ap);
    va_end(ap);
    n = std::min<int>(std::max(n, 0), int(sizeof b) - 2);
    b[n++] = '\n';
    if (write(1, b, size_t(n)) < 0) {
    }
}

inline std::vector<pid_t> children; // running child processes

// Runs body(report_fd) in a child process; the parent reads the child's report lines from
// *report. A child never returns into the parent's code and never runs its destructors (the
// parent's connections stay the parent's).
template <class F> pid_t spawn(const char *name, int *report, F body) {
    int fds[2];
    if (pipe(fds) != 0)
        throw std::runtime_error("pipe failed");
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        close(fds[0]);
        int rc = 0;
        try {
            body(fds[1]);
        } catch (const std::exception &e) {
            say("    [%s pid %d] error: %s", name, int(getpid()), e.what());
            rc = 1;
        }
        _exit(rc);
    }
    close(fds[1]);
    *report = fds[0];
    children.push_back(pid);
    return pid;
}

// Ends a child with sig and reaps it; its wait status.
inline int stop(pid_t pid, int sig = SIGTERM) {
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    children.erase(std::remove(children.begin(), children.end(), pid), children.end());
    return st;
}

inline sockaddr_un unix_address(const std::string &path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path)
        throw std::runtime_error("socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
}

// A listening socket at path, made before the server process is forked (no start-up race).
inline int listen_unix(const std::string &path) {
    unlink(path.c_str());
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a = unix_address(path);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(fd, 16) != 0)
        throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(errno));
    return fd;
}

// Milliseconds until deadline (negative once past).
inline long ms_left(std::chrono::steady_clock::time_point deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
}

// An HTTP request or response.
struct Message {
    std::string start;                          // "POST /webhooks HTTP/1.1" or "HTTP/1.1 200 OK"
    std::map<std::string, std::string> headers; // names in lower case
    std::string body;
    std::string header(const char *name) const {
        auto it = headers.find(name);
        return it == headers.end() ? "" : it->second;
    }
};

// Reads from fd until the HTTP head (up to the blank line) and its content-length body are in;
// false on EOF or when the deadline passes first.
inline bool read_message(int fd, Message *m, int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string in;
    size_t head_end = std::string::npos, need = 0;
    for (;;) {
        if (head_end == std::string::npos &&
            (head_end = in.find("\r\n\r\n")) != std::string::npos) {
            size_t pos = in.find("\r\n");
            m->start = in.substr(0, pos);
            while (pos < head_end) {
                size_t eol = in.find("\r\n", pos + 2), colon = in.find(':', pos + 2);
                if (colon < eol) {
                    std::string name = in.substr(pos + 2, colon - pos - 2);
                    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
                    size_t v = std::min(in.find_first_not_of(' ', colon + 1), eol);
                    m->headers[name] = in.substr(v, eol - v);
                }
                pos = eol;
            }
            need = head_end + 4 + std::strtoul(m->headers["content-length"].c_str(), nullptr, 10);
        }
        if (head_end != std::string::npos && in.size() >= need) {
            m->body = in.substr(head_end + 4, need - head_end - 4);
            return true;
        }
        long left = ms_left(deadline);
        pollfd p{fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, int(left)) <= 0)
            return false;
        char b[4096];
        ssize_t n = read(fd, b, sizeof b);
        if (n <= 0)
            return false;
        in.append(b, size_t(n));
    }
}

inline void send_all(int fd, const std::string &s) {
    for (size_t off = 0; off < s.size();) {
        ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0)
            return; // the client has gone (it gave up waiting): nothing to do
        off += size_t(n);
    }
}

inline void respond(int fd, int status, const std::string &body) {
    send_all(fd, "HTTP/1.1 " + std::to_string(status) + (status < 300 ? " OK" : " Error") +
                     "\r\ncontent-type: text/plain\r\ncontent-length: " +
                     std::to_string(body.size()) + "\r\nconnection: close\r\n\r\n" + body);
}

// An HTTP server's loop: one request per connection, handle(fd, request) answers it (500 when
// it throws).
template <class H> void serve(int listen_fd, H handle) {
    for (;;) {
        int fd = accept(listen_fd, nullptr, nullptr);
        if (fd < 0)
            continue;
        Message m;
        if (read_message(fd, &m, 5000)) {
            try {
                handle(fd, m);
            } catch (const std::exception &e) {
                respond(fd, 500, e.what());
            }
        }
        close(fd);
    }
}

// POST body with headers to the server at path; the answer's status (0: no answer within
// timeout_ms, the connection is then closed as an HTTP client's timeout does) and body.
inline int post(const std::string &path, const std::vector<std::pair<std::string, std::string>> &h,
                const std::string &body, int timeout_ms, std::string *answer) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a = unix_address(path);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    std::string req = "POST /webhooks HTTP/1.1\r\nhost: localhost\r\ncontent-type: "
                      "application/json\r\ncontent-length: " +
                      std::to_string(body.size()) + "\r\n";
    for (const auto &[name, value] : h)
        req += name + ": " + value + "\r\n";
    send_all(fd, req + "\r\n" + body);
    Message m;
    bool ok = read_message(fd, &m, timeout_ms);
    close(fd);
    if (!ok || m.start.size() < 12)
        return 0;
    *answer = m.body;
    return std::atoi(m.start.c_str() + 9);
}

// "k1=v1 k2=v2": a report line between processes, and its fields.
inline std::string field(const std::string &line, const std::string &k) {
    size_t p = (" " + line).find(" " + k + "=");
    if (p == std::string::npos)
        return "";
    size_t e = line.find(' ', p + k.size() + 1);
    return line.substr(p + k.size() + 1, e == std::string::npos ? e : e - p - k.size() - 1);
}

// One line from fd (a child's report pipe), waiting at most timeout_ms; "" on timeout or EOF.
inline std::string read_line(int fd, int timeout_ms) {
    std::string s;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        long left = ms_left(deadline);
        pollfd p{fd, POLLIN, 0};
        char ch;
        if (left <= 0 || poll(&p, 1, int(left)) <= 0 || read(fd, &ch, 1) != 1 || ch == '\n')
            return s;
        s += ch;
    }
}

} // namespace demo
