// Node-shaped failures on test hosts (testing/test_hosts.h): the coordinator on host 0, two
// workers on each of hosts 1 and 2 (ranks 0-1 on host 1, 2-3 on host 2; UCX over TCP between the
// hosts, shared memory inside each). Every process of host 2 killed at once; host 2 cut off
// for less than the eviction timeout; host 2 cut off until evicted, then healed; the coordinator
// partitioned from host 2 only (host 1 and host 2 still connected) until evicted, then healed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "elastic/metrics_checks.h"
#include "multihost/multihost_fixture.h"

namespace retort::multihost {
namespace {

using elastic_testing::ClusterOptions;
using elastic_testing::ElasticCluster;
using elastic_testing::JobOptions;
using elastic_testing::MetricLine;
using elastic_testing::MetricsFile;
using elastic_testing::RepeatedSteps;
using elastic_testing::StatusView;
using std::chrono::milliseconds;

constexpr int kWorkerHosts = 2;     // hosts 1 and 2
constexpr int kWorkersPerHost = 2;  // two ranks per host: an intra-node group
constexpr int kVictimHost = 2;

using testing::UnixMs;

// Unix ms of the first coordinator log line at or after `after_ms` that contains `what` and
// `node` ("2026-11-25T11:56:31.286Z I coordinator] member_evicted: w1-3 (node/0): ..."); -1 if
// none.
int64_t FirstCoordinatorEvent(const std::string& log, const std::string& what,
                              const std::string& node, int64_t after_ms) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(what) == std::string::npos || line.find(node) == std::string::npos) continue;
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(line.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) != 7)
      continue;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
    if (ms >= after_ms) return ms;
  }
  return -1;
}

class NodeFailureTest : public MultiHostScenarioTest {
 protected:
  static JobOptions Job() {
    JobOptions job;
    job.min_workers = 2;
    job.max_workers = kWorkerHosts * kWorkersPerHost;
    return job;
  }

  // Coordinator on host 0, kWorkersPerHost workers on each worker host.
  std::unique_ptr<ElasticCluster> StartOnHosts(const JobOptions& job,
                                               const testing::TestHosts& hosts,
                                               ClusterOptions options) {
    options.hosts = &hosts;
    options.coordinator_host = 0;
    options.port = 7070;  // the coordinator has host 0's network to itself
    auto c = std::make_unique<ElasticCluster>(job, options);
    dirs_.push_back(c->dir());
    std::string error;
    EXPECT_TRUE(c->StartCoordinator(milliseconds(30000), &error)) << error;
    for (int h = 1; h <= kWorkerHosts; ++h)
      for (int l = 0; l < kWorkersPerHost; ++l) c->StartWorkerOnHost(h, l);
    return c;
  }

  // All workers ranked in one generation, node-major by host (ranks 0-1 on host 1, ...).
  void WaitForFullWorld(ElasticCluster& c, const testing::TestHosts& hosts, StatusView* st) {
    const int world = kWorkerHosts * kWorkersPerHost;
    ASSERT_TRUE(c.WaitForWorld(world, 10, kStartup)) << c.Logs();
    ASSERT_TRUE(WaitAllRanked(c, world, kEvent, st));
    for (int r = 0; r < world; ++r)
      ASSERT_EQ(st->ByRank(r)->node, hosts.name(1 + r / kWorkersPerHost)) << st->raw;
  }

  std::vector<int> WorkersOn(const ElasticCluster& c, int host) const {
    std::vector<int> out;
    for (int i = 0; i < c.worker_count(); ++i)
      if (c.host_of(i) == host) out.push_back(i);
    return out;
  }

  // A generation after `before` without any member of `host`, every member ranked.
  static bool FormedWithout(const StatusView& s, const StatusView& before,
                            const std::string& host) {
    if (s.generation <= before.generation || !s.AllRanked() || s.members.empty()) return false;
    for (const auto& m : s.members)
      if (m.node == host) return false;
    return true;
  }

  void WholeHostKillRecovers(const testing::LinkProfile* links);
  void EvictedThenHealed(const testing::TestHosts& hosts,
                         const std::function<bool(std::string*)>& cut,
                         const std::function<bool(std::string*)>& heal, const std::string& what);

  static void ExpectGenerationsNeverGoBack(const MetricsFile& m) {
    for (size_t i = 1; i < m.lines.size(); ++i)
      EXPECT_GE(m.lines[i].generation, m.lines[i - 1].generation)
          << "metrics line " << i << " (step " << m.lines[i].step
          << ") comes from an older generation than the line before it: two worlds wrote";
  }
};

// Every process of host 2 dies at once (its PID namespace's init is killed). Ranks 2 and 3 go
// together; their optimizer ranges' replicas live on host 1 (replicas two ranks along the
// ring), so the survivors rebuild the state in memory and lose no completed step. With
// `links`, every host's link (the coordinator's too) goes through the link emulator first.
void NodeFailureTest::WholeHostKillRecovers(const testing::LinkProfile* links) {
  auto hosts = MakeHosts(1 + kWorkerHosts);
  if (!hosts) GTEST_SKIP() << skip_reason();
  std::string why;
  for (int h = 0; links != nullptr && h < hosts->size(); ++h)
    ASSERT_TRUE(hosts->EmulateLink(h, *links, &why)) << why;
  const std::string shape =
      links == nullptr ? std::string()
                       : " over " + std::to_string(links->rate_mbit) + " Mbit/s links with " +
                             std::to_string(links->latency.count()) + " us one way";
  const JobOptions job = Job();
  LoadReference(job);
  auto c = StartOnHosts(job, *hosts, {});
  StatusView st;
  WaitForFullWorld(*c, *hosts, &st);
  if (HasFatalFailure()) return;

  const int64_t kill_ms = UnixMs();
  hosts->KillHost(kVictimHost);
  const size_t lines_before = c->Metrics().lines.size();
  const int64_t step_before = c->LastStep();
  StatusView after;
  ASSERT_TRUE(c->WaitForStatus(
      [&](const StatusView& s) { return FormedWithout(s, st, hosts->name(kVictimHost)); }, kEvent,
      &after))
      << "no generation without host 2: " << after.raw << "\n"
      << c->Logs();
  MetricsFile m;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        m = c->Metrics();
        return std::any_of(m.lines.begin(), m.lines.end(),
                           [&](const MetricLine& l) { return l.generation > st.generation; });
      },
      kEvent))
      << "no step completed after host 2 died\n"
      << c->Logs();
  for (const auto& l : m.lines) {
    if (l.generation <= st.generation) continue;
    // Steps completed before the kill that the new generation had to run again.
    const int64_t lost = std::max<int64_t>(0, step_before - (l.step - 1));
    std::cout << "[ measured ] whole-host kill (2 of 4 ranks)" << shape << " after step "
              << step_before << " -> next new completed step " << l.step << ": "
              << (l.time_unix_ms - kill_ms) / 1000.0 << " s, lost steps " << lost << "\n";
    break;
  }
  const std::vector<int> victims = WorkersOn(*c, kVictimHost);
  ExpectCompletedCleanly(*c, victims);
  if (HasFatalFailure()) return;
  for (int v : victims) EXPECT_EQ(c->worker(v).Wait(milliseconds(0)).value_or(-1), 128 + SIGKILL);

  m = c->Metrics();
  EXPECT_THAT(elastic_testing::SequenceText(elastic_testing::WorldSizeSequence(m.lines)),
              ::testing::EndsWith("4 -> 2"));
  ExpectNoLostSteps(m, job, lines_before, step_before);
  ExpectSameTrajectory(m.lines, "whole-host kill of host 2 at step " + std::to_string(step_before));
  // The survivors recovered from memory, not from a disk checkpoint (there is none).
  for (int w : WorkersOn(*c, 1))
    EXPECT_THAT(c->worker(w).Log(), ::testing::HasSubstr("starts from replicas")) << "worker " << w;
}

TEST_F(NodeFailureTest, WholeHostKillRecoversFromReplicasOnAnotherHostWithNoLostStep) {
  WholeHostKillRecovers(nullptr);
}

// The same over shaped links (1 Gbit/s, 1 ms one way, through the userspace link emulator):
// recovery still within the target, still no lost step.
TEST_F(NodeFailureTest, WholeHostKillOverSlowLinksWithLatencyLosesNoStep) {
  testing::LinkProfile links;
  links.rate_mbit = 1000;
  links.latency = std::chrono::milliseconds(1);
  WholeHostKillRecovers(&links);
}

// Host 2 is cut off for well under the eviction timeout: its ranks stall with everyone (the
// collectives wait), nobody is evicted, the generation does not change and the job completes
// with all four workers.
TEST_F(NodeFailureTest, ShortCutOffCausesNoGenerationChange) {
  auto hosts = MakeHosts(1 + kWorkerHosts);
  if (!hosts) GTEST_SKIP() << skip_reason();
  const JobOptions job = Job();
  LoadReference(job);
  ClusterOptions options;
  // Far above the cut plus TCP's retransmission back-off after it (~3 s for a 1.5 s cut).
  options.eviction_timeout_ms = 10000;
  options.comm_timeout_ms = 20000;
  auto c = StartOnHosts(job, *hosts, options);
  StatusView st;
  WaitForFullWorld(*c, *hosts, &st);
  if (HasFatalFailure()) return;

  const int64_t cut_ms = UnixMs();
  const int64_t step_at_cut = c->LastStep();
  std::string why;
  ASSERT_TRUE(hosts->SetLinkUp(kVictimHost, false, &why)) << why;
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_TRUE(hosts->SetLinkUp(kVictimHost, true, &why)) << why;
  ASSERT_LT(c->LastStep(), job.steps) << "the job ended before the cut was healed";

  ExpectCompletedCleanly(*c);
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  EXPECT_EQ(m.lines.size(), static_cast<size_t>(job.steps));
  EXPECT_EQ(elastic_testing::MissingSteps(m.lines, job.steps), "");
  int64_t longest_gap_ms = 0;
  for (size_t i = 0; i < m.lines.size(); ++i) {
    if (m.lines[i].step <= step_at_cut) continue;
    EXPECT_EQ(m.lines[i].generation, st.generation)
        << "step " << m.lines[i].step << " ran in another generation";
    EXPECT_EQ(m.lines[i].world_size, 4) << "step " << m.lines[i].step;
    if (i > 0)
      longest_gap_ms = std::max(
          longest_gap_ms, m.lines[i].time_unix_ms - std::max(m.lines[i - 1].time_unix_ms, cut_ms));
  }
  std::cout << "[ measured ] 1.5 s cut of host 2 at step " << step_at_cut
            << ": longest wait for a step after the cut " << longest_gap_ms / 1000.0
            << " s, generation unchanged\n";
  // The cut did stop training: some step waited for most of it.
  EXPECT_GE(longest_gap_ms, 1000) << "no step waited for the cut host: was it cut off at all?";
  ExpectSameTrajectory(m.lines, "1.5 s cut of host 2 at step " + std::to_string(step_at_cut));
}

// Host 2 is cut off (by `cut`) until the coordinator evicts its workers, the two ranks on host 1
// go on from their replicas (no step lost), then `heal` ends the cut. Host 2's workers are fenced
// (their old generation is refused): they re-join as new members or exit saying they were
// evicted, never write a checkpoint of a step they did not train, and no step but the one in
// flight at the eviction is completed twice (one world at a time).
void NodeFailureTest::EvictedThenHealed(const testing::TestHosts& hosts,
                                        const std::function<bool(std::string*)>& cut,
                                        const std::function<bool(std::string*)>& heal,
                                        const std::string& what) {
  JobOptions job = Job();
  job.checkpoint_every_steps = 20;
  LoadReference(job);
  ClusterOptions options;
  options.eviction_timeout_ms = 3000;
  // A cut-off worker that finds the job gone when it is healed gives up well inside the
  // completion check's stall window instead of retrying to reach the exited coordinator.
  options.rejoin_timeout_ms = 12000;
  auto c = StartOnHosts(job, hosts, options);
  StatusView st;
  WaitForFullWorld(*c, hosts, &st);
  if (HasFatalFailure()) return;

  const int64_t cut_ms = UnixMs();
  std::string why;
  ASSERT_TRUE(cut(&why)) << why;
  const size_t lines_before = c->Metrics().lines.size();
  const int64_t step_before = c->LastStep();
  StatusView after;
  const bool evicted = c->WaitForStatus(
      [&](const StatusView& s) { return FormedWithout(s, st, hosts.name(kVictimHost)); }, kEvent,
      &after);
  const int64_t evicted_ms = UnixMs();
  if (!evicted) heal(&why);
  ASSERT_TRUE(evicted) << "host 2's workers were not evicted: " << after.raw << "\n" << c->Logs();
  const std::string victim_node = "(" + hosts.name(kVictimHost) + "/";
  const int64_t evicted_logged_ms =
      FirstCoordinatorEvent(c->coordinator().Log(), "member_evicted", victim_node, cut_ms);
  const int64_t formed_logged_ms =
      FirstCoordinatorEvent(c->coordinator().Log(), " formed with ", "", evicted_logged_ms);
  std::cout << "[ measured ] " << what << " at step " << step_before << ": first eviction "
            << (evicted_logged_ms - cut_ms) / 1000.0 << " s after the cut, generation without it "
            << (formed_logged_ms - cut_ms) / 1000.0 << " s (coordinator log), seen by status "
            << (evicted_ms - cut_ms) / 1000.0 << " s (eviction timeout "
            << options.eviction_timeout_ms / 1000.0 << " s, settle " << options.settle_ms / 1000.0
            << " s)\n";
  EXPECT_GE(evicted_logged_ms, cut_ms) << "no eviction of host 2 in the coordinator's log";
  // Host 1 has gone on without host 2 once a step completes in a world of host 1 alone: steps
  // the old generation completed after the cut (host 2 was still reachable from host 1 when
  // only the coordinator was cut off) do not count, and healing before such a step let host 2
  // re-join into the next generation first.
  const bool continued = c->WaitForWorld(kWorkersPerHost, step_before + 1, kEvent);
  const int64_t heal_ms = UnixMs();
  ASSERT_TRUE(heal(&why)) << why;
  ASSERT_TRUE(continued) << "host 1 did not go on without host 2\n" << c->Logs();

  const std::vector<int> zombies = WorkersOn(*c, kVictimHost);
  ExpectCompletedCleanly(*c, zombies);
  if (HasFatalFailure()) return;
  MetricsFile m = c->Metrics();
  // Steps trained without host 2 (between its eviction and its return).
  std::set<int64_t> without;
  for (const auto& l : m.lines)
    if (l.generation > st.generation && l.world_size == kWorkersPerHost) without.insert(l.step);
  EXPECT_FALSE(without.empty());
  const bool rejoined =
      FirstCoordinatorEvent(c->coordinator().Log(), "member_joined", victim_node, heal_ms) >= 0;
  const std::regex wrote("checkpoint ([0-9]+) at step ([0-9]+): wrote");
  for (int z : zombies) {
    const std::string log = c->worker(z).Log();
    const int rc = c->worker(z).Wait(milliseconds(0)).value_or(-1);
    std::cout << "[ measured ] worker " << z << " of host 2 after healing: "
              << (rc == 0 ? "finished" : "exited " + std::to_string(rc))
              << (rejoined ? " (host 2 re-joined)" : "") << "\n";
    if (rc == 0)
      EXPECT_TRUE(rejoined) << "a healed worker that finished must have re-joined\n" << log;
    else
      EXPECT_TRUE(log.find("evicted") != std::string::npos ||
                  log.find("stayed unreachable") != std::string::npos)
          << "a healed worker that gives up must say it was evicted or lost its coordinator\n"
          << log;
    for (std::sregex_iterator it(log.begin(), log.end(), wrote), end; it != end; ++it) {
      const int64_t step = std::stoll((*it)[2]);
      EXPECT_EQ(without.count(step), 0u)
          << "fenced worker " << z << " wrote checkpoint " << (*it)[1] << " at step " << step
          << ", which it did not train";
    }
  }
  // One world at a time: the step in flight at the eviction may have completed on the old
  // generation's rank 0 and run again by the next generation from its replicas (the same
  // contract as a kill -9: metrics_checks.h RepeatedSteps); any other repeat is a split brain.
  const auto repeated = RepeatedSteps(m.lines);
  EXPECT_LE(repeated.size(), 1u) << "more than the step in flight ran twice";
  for (const auto& [step, generations] : repeated) {
    EXPECT_EQ(generations.size(), 2u) << "step " << step << " ran more than twice";
    EXPECT_LT(generations.front(), generations.back())
        << "step " << step << " completed twice in one generation";
    EXPECT_GE(step, step_before) << "step " << step << " had completed before the cut";
  }
  EXPECT_EQ(m.lines.size(), static_cast<size_t>(job.steps) + repeated.size());
  ExpectNoLostSteps(m, job, lines_before, step_before);
  ExpectGenerationsNeverGoBack(m);
  ExpectSameTrajectory(
      m.lines, what + " until evicted at step " + std::to_string(step_before) + ", then healed");
  EXPECT_FALSE(elastic_testing::ListCommittedCheckpoints(c->checkpoint_dir()).empty())
      << "no checkpoint committed";
}

// Host 2's link down: cut off from the coordinator and from host 1.
TEST_F(NodeFailureTest, LongCutOffEvictsThenTheFencedHostRejoinsWithoutSplitBrain) {
  auto hosts = MakeHosts(1 + kWorkerHosts);
  if (!hosts) GTEST_SKIP() << skip_reason();
  EvictedThenHealed(
      *hosts, [&](std::string* why) { return hosts->SetLinkUp(kVictimHost, false, why); },
      [&](std::string* why) { return hosts->SetLinkUp(kVictimHost, true, why); }, "host 2 cut off");
}

// Only the path between the coordinator (host 0) and host 2 is dropped: hosts 1 and 2 still
// reach each other, so host 2's workers lose the coordinator while their data plane works.
TEST_F(NodeFailureTest, CoordinatorPartitionedFromOneHostEvictsItWithoutSplitBrain) {
  auto hosts = MakeHosts(1 + kWorkerHosts);
  if (!hosts) GTEST_SKIP() << skip_reason();
  EvictedThenHealed(
      *hosts, [&](std::string* why) { return hosts->SetPathBlocked(0, kVictimHost, true, why); },
      [&](std::string* why) { return hosts->SetPathBlocked(0, kVictimHost, false, why); },
      "coordinator partitioned from host 2");
}

}  // namespace
}  // namespace retort::multihost
