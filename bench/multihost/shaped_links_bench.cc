// Hierarchical vs flat data plane on rate-limited links between test hosts
// (tests/testing/test_hosts.h: network + PID + IPC + mount namespaces, UCX over TCP between
// hosts, shared memory inside one). For every link rate it shapes each host's link (tc tbf,
// both directions), then runs collectives_bench --rank=R on each host for the flat UCX ring and
// the hierarchical communicator (intra-host, then inter-host among equal local indices) in the
// same run, and prints rank 0's JSON lines with the link rate and layout added. Needs root.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/args.h"
#include "testing/test_hosts.h"

namespace {

using retort::testing::Subprocess;
using retort::testing::TestHosts;
using std::chrono::milliseconds;

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t hosts = 2, ranks_per_host = 2, timeout_s = 300;
  std::string rates = "0,4000,1000", backends = "ucx,hierarchical",
              ops = "all_reduce,reduce_scatter";
  int64_t min_bytes = int64_t{1} << 20, max_bytes = int64_t{16} << 20;
  std::string bench = std::string(RETORT_BINARY_DIR) + "/bench/collectives/collectives_bench";
  retort::ArgParser args(
      "shaped_links_bench [--hosts=2] [--ranks_per_host=2] [--rates_mbit=0,4000,1000] [...]",
      "Runs retort's flat and hierarchical collectives across test hosts (network namespaces,\n"
      "root only) whose links are rate-limited with tc tbf; prints JSON lines (busbw as\n"
      "collectives_bench defines it) with link_mbit (0: unshaped veth) and the layout.");
  args.AddInt("hosts", &hosts, "test hosts (ranks_per_host ranks on each)");
  args.AddInt("ranks_per_host", &ranks_per_host, "ranks on each host");
  args.AddString("rates_mbit", &rates, "comma list of link rates in Mbit/s (0: no limit)");
  args.AddString("backends", &backends, "comma list: ucx (flat ring), hierarchical");
  args.AddString("ops", &ops, "collectives_bench --ops");
  args.AddInt("min_bytes", &min_bytes, "smallest size (bytes; sizes grow x4)");
  args.AddInt("max_bytes", &max_bytes, "largest size (bytes)");
  args.AddString("collectives_bench", &bench, "path of collectives_bench");
  args.AddInt("timeout_s", &timeout_s, "deadline of each run of every rank");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "shaped_links_bench: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!*parsed) return 0;
  if (hosts < 2 || ranks_per_host < 1) {
    std::cerr << "shaped_links_bench: --hosts must be >= 2 and --ranks_per_host >= 1 (got " << hosts
              << ", " << ranks_per_host << ")\n";
    return 2;
  }
  char dir_template[] = "/tmp/retort_shaped_bench_XXXXXX";
  if (!mkdtemp(dir_template)) return 1;
  const std::string dir = dir_template;
  std::string why;
  auto test_hosts = TestHosts::Create(static_cast<int>(hosts), dir + "/hosts", &why);
  if (!test_hosts) {
    std::cerr << "shaped_links_bench: cannot make test hosts: " << why << "\n";
    return 1;
  }
  std::printf("{\"comment\":\"load before\",\"loadavg\":\"%s\"}\n", LoadAverage().c_str());
  const int world = static_cast<int>(hosts * ranks_per_host);
  int run = 0, failures = 0;
  for (const std::string& rate : Split(rates)) {
    const int64_t mbit = std::stoll(rate);
    for (int h = 0; h < hosts; ++h) {
      if (!test_hosts->ShapeLink(h, mbit, &why)) {
        std::cerr << "shaped_links_bench: shaping host " << h << " to " << mbit
                  << " Mbit/s: " << why << "\n";
        return 1;
      }
    }
    for (const std::string& backend : Split(backends)) {
      const std::string run_dir = dir + "/run" + std::to_string(run++);
      std::vector<std::unique_ptr<Subprocess>> ranks;
      for (int r = 0; r < world; ++r) {
        const int host = r / static_cast<int>(ranks_per_host);
        ranks.push_back(test_hosts->Spawn(
            host,
            {bench, "--rank=" + std::to_string(r), "--ranks=" + std::to_string(world),
             "--store-dir=" + run_dir + "/store", "--backend=" + backend,
             "--local-size=" + std::to_string(ranks_per_host), "--ops=" + ops,
             "--min-bytes=" + std::to_string(min_bytes), "--max-bytes=" + std::to_string(max_bytes),
             "--label=retort-" + backend},
            run_dir + "-rank" + std::to_string(r) + ".log"));
      }
      bool ok = true;
      for (int r = 0; r < world; ++r) {
        auto rc = ranks[r]->Wait(milliseconds(timeout_s * 1000));
        if (!rc || *rc != 0) {
          ok = false;
          std::cerr << "shaped_links_bench: rank " << r << " of " << backend << " at " << mbit
                    << " Mbit/s " << (rc ? "exited " + std::to_string(*rc) : "timed out") << ":\n"
                    << ranks[r]->Log() << "\n";
        }
      }
      if (!ok) {
        ++failures;
        continue;
      }
      std::istringstream lines(ranks[0]->Log());
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line.front() != '{' || line.back() != '}') continue;
        line.pop_back();
        std::printf("%s,\"link_mbit\":%lld,\"hosts\":%lld,\"ranks_per_host\":%lld}\n", line.c_str(),
                    static_cast<long long>(mbit), static_cast<long long>(hosts),
                    static_cast<long long>(ranks_per_host));
      }
      std::fflush(stdout);
    }
  }
  std::printf("{\"comment\":\"load after\",\"loadavg\":\"%s\"}\n", LoadAverage().c_str());
  test_hosts.reset();
  if (failures == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::cerr << "shaped_links_bench: logs in " << dir << "\n";
  }
  return failures == 0 ? 0 : 1;
}
