// Hierarchical vs flat data plane on shaped links between test hosts
// (tests/testing/test_hosts.h: network + PID + IPC + mount namespaces, UCX over TCP between
// hosts, shared memory inside one). For every link setting (rate x one-way latency, and one
// loss rate) it shapes each host's link in both directions, with tc tbf (rate only) or the
// userspace link emulator (testing/link_emulator.h: rate, latency, loss; this kernel has no
// netem), then runs collectives_bench --rank=R on each host for the flat UCX ring and the
// hierarchical communicator (intra-host, then inter-host among equal local indices) in the same
// run, and prints rank 0's JSON lines with the link setting and layout added, plus one comment
// line per setting with the emulator's counters. Needs root.
#include <unistd.h>

#include <algorithm>
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

// One process of a backend's run: where it runs and its place in its communicator.
struct Placement {
  int host = 0;
  int group = 0;  // independent communicators run at once; each has its own store
  int rank = 0;
  int group_size = 0;
};

// The processes of one run of `backend`; the first one reports. ucx: one ring over all ranks,
// numbered host by host (one flow per link and direction). ucx-interleaved: the same ring with
// ranks dealt to hosts in turn, so every hop crosses a link and each link carries
// ranks_per_host flows each way, as the hierarchical inter-host level does. hierarchical: the
// intra-host then inter-host composition. intra: a ring inside every host, all hosts at once
// (the hierarchical intra-host level alone, under the same contention). cross: a ring of one
// rank per host (one flow per link). scaling_model.py calibrates on intra, cross and
// ucx-interleaved and predicts ucx and hierarchical.
std::vector<Placement> Layout(const std::string& backend, int hosts, int ranks_per_host) {
  std::vector<Placement> out;
  const int world = hosts * ranks_per_host;
  if (backend == "intra") {
    for (int r = 0; r < world; ++r)
      out.push_back({r / ranks_per_host, r / ranks_per_host, r % ranks_per_host, ranks_per_host});
  } else if (backend == "cross") {
    for (int h = 0; h < hosts; ++h) out.push_back({h, 0, h, hosts});
  } else {
    const bool interleaved = backend == "ucx-interleaved";
    for (int r = 0; r < world; ++r)
      out.push_back({interleaved ? r % hosts : r / ranks_per_host, 0, r, world});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t hosts = 2, ranks_per_host = 2, timeout_s = 300, rounds = 1;
  std::string rates = "0,4000,1000", latencies = "0", shaper = "auto",
              backends = "ucx,hierarchical", ops = "all_reduce,reduce_scatter";
  double loss = 0;
  int64_t queue_ms = 50;
  int64_t min_bytes = int64_t{1} << 20, max_bytes = int64_t{16} << 20;
  std::string bench = std::string(RETORT_BINARY_DIR) + "/bench/collectives/collectives_bench";
  retort::ArgParser args(
      "shaped_links_bench [--hosts=2] [--ranks_per_host=2] [--rates_mbit=0,4000,1000]\n"
      "                   [--latencies_us=0,500] [--loss=0.001] [--shaper=auto|tbf|emulator]\n"
      "                   [--rounds=3] [...]",
      "Runs retort's flat and hierarchical collectives across test hosts (network namespaces,\n"
      "root only) whose links are shaped with tc tbf (rate) or the userspace link emulator\n"
      "(rate, one-way latency, loss); prints JSON lines (busbw as collectives_bench defines it)\n"
      "with link_mbit (0: no rate limit), link_latency_us, link_loss, shaper and the layout.");
  args.AddInt("hosts", &hosts, "test hosts (ranks_per_host ranks on each)");
  args.AddInt("ranks_per_host", &ranks_per_host, "ranks on each host");
  args.AddString("rates_mbit", &rates, "comma list of link rates in Mbit/s (0: no limit)");
  args.AddString("latencies_us", &latencies,
                 "comma list of one-way latencies in microseconds added to each host's link "
                 "(emulator only)");
  args.AddDouble("loss", &loss,
                 "per-segment loss probability on each host's link, each way "
                 "(emulator only)");
  args.AddInt("queue_ms", &queue_ms,
              "emulator only: longest wait for the link before a frame is dropped (the "
              "queue's size in time; tc tbf's latency is 50 ms)");
  args.AddString("shaper", &shaper,
                 "tbf (kernel token bucket: rate only), emulator (userspace: rate, latency, "
                 "loss) or auto (the emulator when a latency or loss is asked for)");
  args.AddString("backends", &backends,
                 "comma list: ucx (flat ring, ranks host by host: one flow per link and "
                 "direction), ucx-interleaved (flat ring, ranks dealt to hosts in turn: "
                 "ranks_per_host flows per link), hierarchical, intra (a ring inside every "
                 "host, all at once: the hierarchical intra-host level alone), cross (a ring "
                 "of one rank per host: one flow per link)");
  args.AddString("ops", &ops, "collectives_bench --ops");
  args.AddInt("min_bytes", &min_bytes, "smallest size (bytes; sizes grow x4)");
  args.AddInt("max_bytes", &max_bytes, "largest size (bytes)");
  args.AddString("collectives_bench", &bench, "path of collectives_bench");
  args.AddInt("timeout_s", &timeout_s, "deadline of each run of every rank");
  args.AddInt("rounds", &rounds,
              "runs of every backend at each link setting, the backends taking turns so that "
              "each sees the same load (lines carry \"round\"; scaling_model.py takes medians)");
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "shaped_links_bench: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!*parsed) return 0;
  if (hosts < 2 || ranks_per_host < 1 || rounds < 1) {
    std::cerr << "shaped_links_bench: --hosts must be >= 2, --ranks_per_host and --rounds >= 1 "
                 "(got "
              << hosts << ", " << ranks_per_host << ", " << rounds << ")\n";
    return 2;
  }
  for (const std::string& backend : Split(backends)) {
    static const std::vector<std::string> kKnown = {"ucx", "ucx-interleaved", "hierarchical",
                                                    "intra", "cross"};
    if (std::find(kKnown.begin(), kKnown.end(), backend) == kKnown.end()) {
      std::cerr << "shaped_links_bench: unknown backend '" << backend << "' (";
      for (size_t i = 0; i < kKnown.size(); ++i) std::cerr << (i ? ", " : "") << kKnown[i];
      std::cerr << ")\n";
      return 2;
    }
  }
  std::vector<int64_t> latency_list;
  for (const std::string& l : Split(latencies)) latency_list.push_back(std::stoll(l));
  const bool wants_emulator = loss > 0 || std::any_of(latency_list.begin(), latency_list.end(),
                                                      [](int64_t l) { return l != 0; });
  if (shaper == "auto") shaper = wants_emulator ? "emulator" : "tbf";
  if (shaper != "tbf" && shaper != "emulator") {
    std::cerr << "shaped_links_bench: --shaper must be auto, tbf or emulator (got '" << shaper
              << "')\n";
    return 2;
  }
  if (shaper == "tbf" && wants_emulator) {
    std::cerr << "shaped_links_bench: tc tbf shapes the rate only; latency and loss need "
                 "--shaper=emulator\n";
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
  int run = 0, failures = 0;
  for (const std::string& rate : Split(rates)) {
    for (const int64_t latency_us : latency_list) {
      const int64_t mbit = std::stoll(rate);
      std::vector<retort::testing::LinkEmulator::Counters> before(hosts);
      for (int h = 0; h < hosts; ++h) {
        bool shaped = false;
        if (shaper == "tbf") {
          shaped = test_hosts->ShapeLink(h, mbit, &why);
        } else {
          retort::testing::LinkProfile profile;
          profile.rate_mbit = mbit;
          profile.latency = std::chrono::microseconds(latency_us);
          profile.loss = loss;
          profile.queue_limit = std::chrono::milliseconds(queue_ms);
          shaped = test_hosts->EmulateLink(h, profile, &why);
          before[h] = test_hosts->link_counters(h);
        }
        if (!shaped) {
          std::cerr << "shaped_links_bench: shaping host " << h << " (" << mbit << " Mbit/s, "
                    << latency_us << " us, loss " << loss << "): " << why << "\n";
          return 1;
        }
      }
      for (int64_t round = 0; round < rounds; ++round) {
        for (const std::string& backend : Split(backends)) {
          const std::string run_dir = dir + "/run" + std::to_string(run++);
          const std::vector<Placement> layout =
              Layout(backend, static_cast<int>(hosts), static_cast<int>(ranks_per_host));
          std::vector<std::unique_ptr<Subprocess>> ranks;
          for (size_t p = 0; p < layout.size(); ++p) {
            const Placement& place = layout[p];
            ranks.push_back(test_hosts->Spawn(
                place.host,
                {bench, "--rank=" + std::to_string(place.rank),
                 "--ranks=" + std::to_string(place.group_size),
                 "--store-dir=" + run_dir + "/store" + std::to_string(place.group),
                 "--backend=" + std::string(backend == "hierarchical" ? "hierarchical" : "ucx"),
                 "--local-size=" + std::to_string(ranks_per_host), "--ops=" + ops,
                 "--min-bytes=" + std::to_string(min_bytes),
                 "--max-bytes=" + std::to_string(max_bytes), "--label=retort-" + backend},
                run_dir + "-rank" + std::to_string(p) + ".log"));
          }
          bool ok = true;
          for (size_t r = 0; r < ranks.size(); ++r) {
            auto rc = ranks[r]->Wait(milliseconds(timeout_s * 1000));
            if (!rc || *rc != 0) {
              ok = false;
              std::cerr << "shaped_links_bench: rank " << r << " of " << backend << " at " << mbit
                        << " Mbit/s, " << latency_us << " us "
                        << (rc ? "exited " + std::to_string(*rc) : "timed out") << ":\n"
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
            std::printf(
                "%s,\"link_mbit\":%lld,\"link_latency_us\":%lld,\"link_loss\":%g,"
                "\"shaper\":\"%s\",\"queue_ms\":%lld,\"hosts\":%lld,\"ranks_per_host\":%lld,"
                "\"round\":%lld}\n",
                line.c_str(), static_cast<long long>(mbit), static_cast<long long>(latency_us),
                loss, shaper.c_str(), static_cast<long long>(shaper == "emulator" ? queue_ms : 50),
                static_cast<long long>(hosts), static_cast<long long>(ranks_per_host),
                static_cast<long long>(round));
          }
          std::fflush(stdout);
        }
      }
      if (shaper == "emulator") {
        // What the emulators did at this setting, summed over the hosts' links.
        retort::testing::LinkEmulator::Counters sum;
        for (int h = 0; h < hosts; ++h) {
          const auto now = test_hosts->link_counters(h);
          sum.frames += now.frames - before[h].frames;
          sum.lost += now.lost - before[h].lost;
          sum.queue_drops += now.queue_drops - before[h].queue_drops;
          sum.late_us_max = std::max(sum.late_us_max, now.late_us_max);
        }
        std::printf(
            "{\"comment\":\"emulator\",\"link_mbit\":%lld,\"link_latency_us\":%lld,"
            "\"frames\":%llu,\"lost\":%llu,\"queue_drops\":%llu,\"late_us_max\":%lld}\n",
            static_cast<long long>(mbit), static_cast<long long>(latency_us),
            static_cast<unsigned long long>(sum.frames), static_cast<unsigned long long>(sum.lost),
            static_cast<unsigned long long>(sum.queue_drops),
            static_cast<long long>(sum.late_us_max));
        std::fflush(stdout);
      }
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
