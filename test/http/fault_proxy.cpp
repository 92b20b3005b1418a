// A fault-injecting HTTP proxy on loopback for test/http/http_test.py: test/programs/proxy.hpp
// without the PostgreSQL protocol. Each connection is forwarded to 127.0.0.1:<upstream> with
// added latency, and a share of the connections is cut, in equal parts:
//   client_byte    at a random client->server byte (the service may never see the request)
//   server_byte    at a random byte inside the service's answer (at least one byte of it sent)
//   lost_response  after the service produced its whole answer, before any of it is forwarded
// --kinds client_byte,server_byte,lost_response chooses among fewer kinds. Clients must send
// "Connection: close" (one request per connection): the answer ends where the service closes its
// side.
//   fault_proxy --upstream PORT [--listen PORT] [--latency MIN-MAX] [--cut P] [--seed N]
//                [--kinds K,...]
// Prints "listening on 127.0.0.1:N" once it accepts connections; on SIGTERM or SIGINT prints
// "connections N cuts C client_byte A server_byte B lost_response L" and exits 0.
#include "proxy.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

static void usage() {
    std::fprintf(stderr, "usage: fault_proxy --upstream PORT [--listen PORT] [--latency MIN-MAX] "
                         "[--cut P] [--seed N] [--kinds K,...]\n");
    std::exit(2);
}

int main(int argc, char **argv) {
    idemtest::ProxyConfig cfg;
    cfg.pg_protocol = false;
    cfg.buffer_response = true;
    cfg.w_server_byte = cfg.w_client_byte = cfg.w_lost_response = 1;
    cfg.client_cut_max = 150; // inside the request line and headers of any request of the test
    cfg.upstream_port = 0;
    cfg.latency_max_ms = 5;
    cfg.cut_probability = 0.5;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc)
            usage();
        std::string v = argv[++i];
        if (a == "--upstream")
            cfg.upstream_port = std::atoi(v.c_str());
        else if (a == "--listen")
            cfg.listen_port = std::atoi(v.c_str());
        else if (a == "--latency" &&
                 std::sscanf(v.c_str(), "%d-%d", &cfg.latency_min_ms, &cfg.latency_max_ms) == 2)
            ;
        else if (a == "--cut")
            cfg.cut_probability = std::atof(v.c_str());
        else if (a == "--kinds") {
            auto has = [&](const char *k) {
                return (',' + v + ',').find(',' + std::string(k) + ',') != std::string::npos;
            };
            cfg.w_client_byte = has("client_byte");
            cfg.w_server_byte = has("server_byte");
            cfg.w_lost_response = has("lost_response");
            if (cfg.w_client_byte + cfg.w_server_byte + cfg.w_lost_response == 0)
                usage();
        } else if (a == "--seed")
            cfg.seed = std::strtoul(v.c_str(), nullptr, 10);
        else
            usage();
    }
    if (cfg.upstream_port <= 0)
        usage();

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr); // the proxy's threads inherit the mask

    idemtest::Proxy proxy(cfg);
    try {
        proxy.start();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fault_proxy: %s\n", e.what());
        return 1;
    }
    std::printf("listening on 127.0.0.1:%d\n", proxy.port());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    proxy.stop();
    using P = idemtest::Proxy;
    std::printf("connections %ld cuts %ld client_byte %ld server_byte %ld lost_response %ld\n",
                proxy.accepted.load(), proxy.total_cuts(), proxy.cuts[P::ClientByte].load(),
                proxy.cuts[P::ServerByte].load(), proxy.cuts[P::LostResponse].load());
    return 0;
}
