// A fault-injecting TCP proxy on loopback for the client programs (header-only): clients
// connect to 127.0.0.1:port(), each connection is forwarded to the server at 127.0.0.1:upstream
// by its own poll() thread, with added latency, and a chosen share of connections is cut:
//   AfterCommit     the server's CommandComplete "COMMIT" has reached the proxy (so the server
//                   has committed) and is dropped instead of forwarded: the client's commit is
//                   in doubt (the incident this suite is about)
//   AfterStatement  same, on the k-th CommandComplete of any statement (k = 1..4)
//   ServerByte      after a random number of server->client bytes
//   ClientByte      after a random number of client->server bytes (the server may not have
//                   seen the request)
//   LostResponse    the server's whole answer has reached the proxy (the server closed its side)
//                   and is dropped instead of forwarded (needs buffer_response)
// The server->client stream is parsed as protocol-3 messages (type byte + int32 length), so
// clients must connect with sslmode=disable gssencmode=disable (see tcp_conninfo). With
// pg_protocol = false (HTTP, test/http/fault_proxy.cpp) there is no parsing and the two
// PostgreSQL kinds are never chosen; with buffer_response (a server that closes the connection
// after one answer: HTTP with Connection: close), a ServerByte or LostResponse connection reads
// the server's whole answer before forwarding any of it, so a ServerByte cut falls strictly
// inside the answer (at least one byte sent, at least one missing).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace idemtest {

struct ProxyConfig {
    int upstream_port = 5432; // server on 127.0.0.1
    int latency_min_ms = 0;   // added per forwarded chunk, uniform in [min, max]
    int latency_max_ms = 0;
    double cut_probability = 0; // share of connections that are cut
    // Shares of the cut kinds (normalized): after COMMIT, after the k-th statement, random
    // server->client byte, random client->server byte.
    double w_after_commit = 0.4, w_after_statement = 0.2, w_server_byte = 0.2, w_client_byte = 0.2;
    double w_lost_response = 0; // LostResponse: only with buffer_response
    bool pg_protocol = true;    // false: no protocol parsing, no AfterCommit / AfterStatement
    bool buffer_response = false;
    int client_cut_max = 400; // a ClientByte cut falls in client->server bytes [1, max]
    int listen_port = 0;      // 0: an ephemeral port
    unsigned long seed = 0;   // 0: random
};

class Proxy {
  public:
    enum Kind { None, AfterCommit, AfterStatement, ServerByte, ClientByte, LostResponse, NKinds };

    explicit Proxy(ProxyConfig cfg) : cfg_(cfg) {
        if (cfg_.seed != 0)
            rng_.seed(cfg_.seed);
    }
    ~Proxy() { stop(); }

    // Listens on 127.0.0.1 (listen_port, or an ephemeral port) and starts accepting.
    void start() {
        lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(cfg_.listen_port));
        if (::bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
            ::listen(lfd_, 512) != 0)
            throw std::runtime_error(std::string("proxy: bind/listen: ") + std::strerror(errno));
        socklen_t len = sizeof a;
        ::getsockname(lfd_, reinterpret_cast<sockaddr *>(&a), &len);
        port_ = ntohs(a.sin_port);
        running_ = true;
        acceptor_ = std::thread([this] { accept_loop(); });
    }

    // Stops accepting, cuts every open connection and waits for the connection threads.
    void stop() {
        if (!running_.exchange(false))
            return;
        if (acceptor_.joinable())
            acceptor_.join();
        ::close(lfd_);
        while (active_.load() > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    int port() const { return port_; }
    void set_cut_probability(double p) { cut_p_.store(p); }

    // Counters: connections accepted, cuts per kind (only cuts that actually happened).
    std::atomic<long> accepted{0};
    std::atomic<long> cuts[NKinds] = {};
    long total_cuts() const {
        long n = 0;
        for (int k = 1; k < NKinds; k++)
            n += cuts[k].load();
        return n;
    }

  private:
    ProxyConfig cfg_;
    std::atomic<double> cut_p_{-1};
    int lfd_ = -1;
    int port_ = 0;
    std::atomic<bool> running_{false};
    std::atomic<int> active_{0};
    std::thread acceptor_;
    std::mutex rng_m_;
    std::mt19937_64 rng_{std::random_device{}()};

    double rand01() {
        std::lock_guard<std::mutex> g(rng_m_);
        return std::uniform_real_distribution<double>(0, 1)(rng_);
    }
    int rand_int(int lo, int hi) {
        std::lock_guard<std::mutex> g(rng_m_);
        return std::uniform_int_distribution<int>(lo, hi)(rng_);
    }

    void accept_loop() {
        while (running_) {
            pollfd p{lfd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0)
                continue;
            int cfd = ::accept(lfd_, nullptr, nullptr);
            if (cfd < 0)
                continue;
            accepted++;
            active_++;
            std::thread([this, cfd] {
                serve(cfd);
                active_--;
            }).detach();
        }
    }

    Kind choose_kind() {
        double p = cut_p_.load() >= 0 ? cut_p_.load() : cfg_.cut_probability;
        if (rand01() >= p)
            return None;
        bool pg = cfg_.pg_protocol;
        double w[NKinds] = {0,
                            pg ? cfg_.w_after_commit : 0,
                            pg ? cfg_.w_after_statement : 0,
                            cfg_.w_server_byte,
                            cfg_.w_client_byte,
                            cfg_.buffer_response ? cfg_.w_lost_response : 0};
        double sum = 0;
        for (double x : w)
            sum += x;
        double r = rand01() * sum;
        for (int k = 1; k < NKinds; k++) {
            if (r < w[k])
                return static_cast<Kind>(k);
            r -= w[k];
        }
        return ClientByte;
    }

    static bool write_all(int fd, const char *b, size_t n) {
        while (n > 0) {
            ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return false;
            b += w;
            n -= static_cast<size_t>(w);
        }
        return true;
    }

    // Incremental parser of server->client protocol messages: counts CommandComplete messages
    // and notices a "COMMIT" tag inside the chunk being forwarded.
    struct Parser {
        int hdr_have = 0;
        unsigned char hdr[5];
        long remaining = 0; // payload bytes of the current message still to come
        bool in_cc = false; // current message is CommandComplete
        std::string tag;
        long completes = 0;
        // Feeds a chunk; returns the number of CommandCompletes finished in it, sets commit
        // when one of them is "COMMIT".
        int feed(const char *b, size_t n, bool *commit) {
            int done = 0;
            size_t i = 0;
            while (i < n) {
                if (remaining == 0 && hdr_have < 5) {
                    hdr[hdr_have++] = static_cast<unsigned char>(b[i++]);
                    if (hdr_have == 5) {
                        long len = (long(hdr[1]) << 24) | (long(hdr[2]) << 16) |
                                   (long(hdr[3]) << 8) | long(hdr[4]);
                        remaining = len - 4;
                        in_cc = hdr[0] == 'C';
                        tag.clear();
                        if (remaining <= 0) {
                            remaining = 0;
                            hdr_have = 0;
                        }
                    }
                    continue;
                }
                size_t take = std::min<size_t>(n - i, static_cast<size_t>(remaining));
                if (in_cc)
                    tag.append(b + i, take);
                i += take;
                remaining -= static_cast<long>(take);
                if (remaining == 0) {
                    hdr_have = 0;
                    if (in_cc) {
                        done++;
                        completes++;
                        if (tag.compare(0, 6, "COMMIT") == 0)
                            *commit = true;
                    }
                }
            }
            return done;
        }
    };

    void latency() {
        if (cfg_.latency_max_ms > 0)
            std::this_thread::sleep_for(
                std::chrono::milliseconds(rand_int(cfg_.latency_min_ms, cfg_.latency_max_ms)));
    }

    // The end of a buffered connection: forwards a strict prefix of the server's whole answer
    // (ServerByte; nothing for LostResponse, or for an empty answer), then the cut.
    void cut_buffered(int cfd, const std::string &answer, Kind kind) {
        size_t keep = 0;
        if (kind == ServerByte && answer.size() >= 2)
            keep = static_cast<size_t>(rand_int(1, static_cast<int>(answer.size()) - 1));
        latency();
        write_all(cfd, answer.data(), keep);
        if (!answer.empty())
            cuts[kind]++;
    }

    void serve(int cfd) {
        int ufd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(cfg_.upstream_port));
        int one = 1;
        ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::connect(ufd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
            ::close(ufd);
            ::close(cfd);
            return;
        }
        Kind kind = choose_kind();
        long s2c_cut_at = kind == ServerByte ? rand_int(1, 1500) : -1;
        long c2s_cut_at = kind == ClientByte ? rand_int(1, cfg_.client_cut_max) : -1;
        // A ServerByte or LostResponse connection of a buffer_response proxy: the answer is read
        // to the server's end of stream, then a prefix of it (none for LostResponse) is sent.
        bool buffering = cfg_.buffer_response && (kind == ServerByte || kind == LostResponse);
        if (buffering)
            s2c_cut_at = -1;
        std::string answer;
        long stmt_cut_at = kind == AfterStatement ? rand_int(1, 4) : -1;
        long s2c = 0, c2s = 0;
        Parser parser;
        char buf[16384];
        bool cut = false;
        // Forwards the n bytes read into buf to fd; when this direction's cut point cut_at (a byte
        // count; sent: the bytes forwarded so far) falls within them, only the bytes before it,
        // and then cuts (kind k). False: stop relaying.
        auto forward = [&](int fd, ssize_t n, long &sent, long cut_at, Kind k) {
            if (cut_at >= 0 && sent + n >= cut_at) {
                write_all(fd, buf, static_cast<size_t>(cut_at - sent));
                cuts[k]++;
                cut = true;
                return false;
            }
            sent += n;
            latency();
            return write_all(fd, buf, static_cast<size_t>(n));
        };
        while (running_ && !cut) {
            pollfd p[2] = {{cfd, POLLIN, 0}, {ufd, POLLIN, 0}};
            int r = ::poll(p, 2, 100);
            if (r < 0 && errno != EINTR)
                break;
            if (r <= 0)
                continue;
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) { // client -> server
                ssize_t n = ::recv(cfd, buf, sizeof buf, 0);
                if (n <= 0)
                    break;
                if (!forward(ufd, n, c2s, c2s_cut_at, ClientByte))
                    break;
            }
            if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) { // server -> client
                ssize_t n = ::recv(ufd, buf, sizeof buf, 0);
                if (buffering) {
                    if (n > 0) {
                        answer.append(buf, static_cast<size_t>(n));
                        continue;
                    }
                    cut_buffered(cfd, answer, kind);
                    cut = true;
                    break;
                }
                if (n <= 0)
                    break;
                bool commit = false;
                if (cfg_.pg_protocol)
                    parser.feed(buf, static_cast<size_t>(n), &commit);
                if (kind == AfterCommit && commit) {
                    cuts[AfterCommit]++; // the server committed; the client never hears of it
                    cut = true;
                    break;
                }
                if (kind == AfterStatement && parser.completes >= stmt_cut_at) {
                    cuts[AfterStatement]++;
                    cut = true;
                    break;
                }
                if (!forward(cfd, n, s2c, s2c_cut_at, ServerByte))
                    break;
            }
        }
        // A cut is abrupt on both sides: RST, no orderly shutdown.
        linger lg{1, 0};
        if (cut) {
            ::setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            ::setsockopt(ufd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        ::close(cfd);
        ::close(ufd);
    }
};

} // namespace idemtest
