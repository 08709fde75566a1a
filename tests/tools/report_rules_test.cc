// The run report's bottleneck rules on recorded step logs: a planted slow loader, a planted
// straggler, planted step-time outliers and a checkpoint stall are each found, with the rank
// or steps they concern; a clean log yields no finding. Also the HTML's sections and the SVG.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "testing/subprocess.h"
#include "tools/report/bottleneck_rules.h"
#include "tools/report/html_report.h"
#include "tools/report/step_logs.h"
#include "tools/report/svg_chart.h"

namespace retort::report {
namespace {

// Phases of a normal step on every rank (seconds): data, teacher, student, backward, comm,
// optimizer, checkpoint. Deterministic jitter of +-3% keeps the clean log realistic.
struct Plan {
  int ranks = 4;
  int steps = 60;
  double data_wait = 0.004;
  int straggler = -1;  // rank whose compute takes straggler_factor x longer
  double straggler_factor = 1.0;
  std::vector<int64_t> outliers;        // steps 20x slower on every rank
  int64_t checkpoint_step = 0;          // a step whose checkpoint snapshot takes 2 x a step
  uint64_t generation_change_step = 0;  // generation 2 from this step on (3 ranks)
  int64_t rebalance_step = 0;           // from this step the straggler's share is 10 of 64, not 16
};

double Jitter(int rank, int64_t step, int phase) {
  const unsigned h = static_cast<unsigned>(rank * 7919 + step * 104729 + phase * 1299709);
  return 1.0 + 0.03 * (static_cast<double>(h % 2001) / 1000.0 - 1.0);
}

RunLogs MakeRun(const Plan& p) {
  RunLogs run;
  run.dir = "/planted";
  run.job_name = "planted";
  const double compute[] = {0.010, 0.020, 0.040, 0.005};  // teacher, student, backward, opt
  std::vector<std::ostringstream> text(p.ranks);
  int64_t t_us = 1'700'000'000'000'000;
  for (int64_t s = 1; s <= p.steps; ++s) {
    const bool outlier = std::count(p.outliers.begin(), p.outliers.end(), s) > 0;
    const int world =
        p.generation_change_step && s >= static_cast<int64_t>(p.generation_change_step)
            ? p.ranks - 1
            : p.ranks;
    // Busy time (everything but waiting on communication) of each rank; the slowest sets the
    // pace and the others wait for it in exposed communication.
    std::vector<std::vector<double>> ph(world, std::vector<double>(kPhaseCount, 0.0));
    double slowest_busy = 0;
    for (int r = 0; r < world; ++r) {
      const double f = (r == p.straggler ? p.straggler_factor : 1.0) * (outlier ? 20.0 : 1.0);
      ph[r][0] = p.data_wait * Jitter(r, s, 0);
      ph[r][1] = compute[0] * f * Jitter(r, s, 1);
      ph[r][2] = compute[1] * f * Jitter(r, s, 2);
      ph[r][3] = compute[2] * f * Jitter(r, s, 3);
      ph[r][5] = compute[3] * f * Jitter(r, s, 5);
      if (s == p.checkpoint_step) ph[r][6] = 0.16;
      double busy = 0;
      for (double v : ph[r]) busy += v;
      slowest_busy = std::max(slowest_busy, busy);
    }
    for (int r = 0; r < world; ++r) {
      double busy = 0;
      for (double v : ph[r]) busy += v;
      ph[r][4] = 0.002 * Jitter(r, s, 4) + (slowest_busy - busy);
      double total = busy + ph[r][4];
      nlohmann::json j{
          {"step", s},
          {"generation", world == p.ranks ? 1 : 2},
          {"rank", r},
          {"world_size", world},
          {"loss", 2.3 * std::exp(-0.02 * s)},
          {"lr", 0.001},
          {"skipped", false},
          {"samples_per_second", 64 / total},
          {"step_s", total},
          {"local_batch",
           p.rebalance_step > 0 && s >= p.rebalance_step ? (r == p.straggler ? 10 : 18) : 16},
          {"data_start_unix_us", t_us},
          {"end_unix_us", t_us + static_cast<int64_t>(total * 1e6)}};
      for (int i = 0; i < kPhaseCount; ++i) j[std::string(kPhaseNames[i]) + "_s"] = ph[r][i];
      text[r] << j.dump() << "\n";
    }
    t_us += static_cast<int64_t>((slowest_busy + 0.003) * 1e6);
  }
  for (int r = 0; r < p.ranks; ++r) {
    int malformed = 0;
    run.workers.push_back(ParseWorkerLog("node0-" + std::to_string(r), text[r].str(), &malformed));
    EXPECT_EQ(malformed, 0);
  }
  return run;
}

std::vector<std::string> Rules(const Analysis& a) {
  std::vector<std::string> r;
  for (const Finding& f : a.findings) r.push_back(f.rule);
  return r;
}

const Finding* FindRule(const Analysis& a, const std::string& rule) {
  for (const Finding& f : a.findings)
    if (f.rule == rule) return &f;
  return nullptr;
}

TEST(ReportRules, CleanLogHasNoFinding) {
  const Analysis a = Analyze(MakeRun(Plan{}));
  EXPECT_TRUE(a.findings.empty()) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(a.bottleneck, "compute:backward");
  EXPECT_EQ(a.steps, 60);
}

TEST(ReportRules, SlowLoaderIsFound) {
  Plan p;
  p.data_wait = 0.060;  // ~45% of the step
  const Analysis a = Analyze(MakeRun(p));
  ASSERT_NE(FindRule(a, "data_loader"), nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(a.bottleneck, "data_loader");
  EXPECT_EQ(FindRule(a, "straggler"), nullptr);
  EXPECT_EQ(FindRule(a, "communication"), nullptr);
  EXPECT_NE(FindRule(a, "data_loader")->text.find("threshold 20%"), std::string::npos);
}

TEST(ReportRules, StragglerRankIsNamedAndNotMistakenForCommunication) {
  Plan p;
  p.straggler = 2;
  p.straggler_factor = 1.5;
  const Analysis a = Analyze(MakeRun(p));
  const Finding* f = FindRule(a, "straggler");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(f->ranks, std::vector<int>{2});
  EXPECT_EQ(f->workers, std::vector<std::string>{"node0-2"});
  EXPECT_NE(f->text.find("mostly backward"), std::string::npos) << f->text;
  // The fast ranks wait ~1/3 of their step on rank 2, but that is the straggler, not the link.
  EXPECT_EQ(FindRule(a, "communication"), nullptr);
  int stragglers = 0;
  for (const Finding& g : a.findings) stragglers += g.rule == "straggler";
  EXPECT_EQ(stragglers, 1);
}

TEST(ReportRules, RebalancedSharesAreReportedWithTheFirstChange) {
  Plan p;
  p.straggler = 2;
  p.straggler_factor = 1.5;
  p.rebalance_step = 20;
  const Analysis a = Analyze(MakeRun(p));
  const Finding* f = FindRule(a, "rebalanced");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(f->steps, std::vector<int64_t>{20});
  EXPECT_EQ(f->workers.size(), 4u);
  EXPECT_NE(f->text.find("node0-2 10"), std::string::npos) << f->text;
  EXPECT_NE(f->text.find("node0-0 18"), std::string::npos) << f->text;
  EXPECT_NE(a.bottleneck, "rebalanced");
  // Without a change (the clean log's constant shares) there is no such finding.
  EXPECT_EQ(FindRule(Analyze(MakeRun(Plan{})), "rebalanced"), nullptr);
}

TEST(ReportRules, SlowLinkIsCommunicationBound) {
  // Every rank waits long on communication, the slowest one included.
  Plan p;
  RunLogs run = MakeRun(p);
  for (WorkerLog& w : run.workers)
    for (StepLine& l : w.lines) {
      l.phase_s[4] += 0.05;
      l.step_s += 0.05;
    }
  const Analysis a = Analyze(run);
  ASSERT_NE(FindRule(a, "communication"), nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(FindRule(a, "straggler"), nullptr);
}

TEST(ReportRules, OutliersAreFoundAtTheirSteps) {
  Plan p;
  p.outliers = {20, 41};
  const Analysis a = Analyze(MakeRun(p));
  const Finding* f = FindRule(a, "outliers");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(f->steps, (std::vector<int64_t>{20, 41}));
  EXPECT_EQ(FindRule(a, "straggler"), nullptr);
}

TEST(ReportRules, CheckpointStallIsFoundAndNotCalledAnOutlier) {
  Plan p;
  p.checkpoint_step = 30;
  const Analysis a = Analyze(MakeRun(p));
  const Finding* f = FindRule(a, "checkpoint_stall");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(Rules(a));
  EXPECT_EQ(f->steps, std::vector<int64_t>{30});
  EXPECT_EQ(FindRule(a, "outliers"), nullptr);
}

TEST(ReportRules, RollbackAndGenerationChangeAreMembershipChanges) {
  Plan p;
  p.generation_change_step = 31;
  RunLogs run = MakeRun(p);
  // Rank 0 re-ran steps 29-30 after a failure.
  WorkerLog& w = run.workers[0];
  std::vector<StepLine> rerun(w.lines.begin() + 28, w.lines.begin() + 30);
  w.lines.insert(w.lines.begin() + 30, rerun.begin(), rerun.end());
  const auto changes = MembershipChanges(run);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].step, 1);
  EXPECT_EQ(changes[1].step, 29);
  EXPECT_TRUE(changes[1].recovery);
  EXPECT_EQ(changes[2].step, 31);
  EXPECT_NE(changes[2].what.find("3 rank(s) (was 4)"), std::string::npos) << changes[2].what;
  EXPECT_TRUE(Analyze(run).findings.empty());
}

TEST(ReportHtml, HasEverySectionAndOnlyInlineContent) {
  Plan p;
  p.straggler = 1;
  p.straggler_factor = 1.6;
  p.generation_change_step = 40;
  RunLogs run = MakeRun(p);
  run.student_top1 = 0.81;
  const Analysis a = Analyze(run);
  const std::string html = RenderHtmlReport(run, a);
  for (const char* id : {"summary", "findings", "loss", "accuracy", "throughput", "step-time",
                         "phases", "membership"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  // Self-contained: no scripts, no external references.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // Charts: loss, lr, throughput, step time (paths) and the phase bars (one row per worker).
  const std::regex svg("<svg ");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(html.begin(), html.end(), svg), std::sregex_iterator()),
      5);
  EXPECT_NE(html.find("data-rule=\"straggler\""), std::string::npos);
  EXPECT_NE(html.find("81.00%"), std::string::npos);
  EXPECT_NE(html.find("class=\"marker\""), std::string::npos);  // the generation change
  const nlohmann::json j = ReportJson(run, a);
  EXPECT_EQ(j["bottleneck"], "straggler");
  EXPECT_EQ(j["findings"][0]["ranks"][0], 1);
  EXPECT_EQ(j["workers"].size(), 4u);
}

// The report as a browser shows it: headless Chromium (Debian's `chromium`, installed by
// scripts/setup) loads the file, its rendered DOM has every section and chart, and a screenshot
// of the page is a PNG of the window's width.
TEST(ReportHtml, RendersInHeadlessChromium) {
  const std::string chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium))
    GTEST_SKIP() << chromium << " is not installed (scripts/setup installs the chromium package)";
  Plan p;
  p.straggler = 1;
  p.straggler_factor = 1.6;
  p.generation_change_step = 40;
  RunLogs run = MakeRun(p);
  run.student_top1 = 0.81;
  const std::string dir = testing::MakeTempDir("retort_report_render");
  const std::string html = dir + "/report.html", png = dir + "/report.png";
  const std::string page = RenderHtmlReport(run, Analyze(run));
  std::ofstream(html) << page;
  // A copy of the page with a script that measures the layout as the browser drew it (the report
  // itself has no scripts): every chart spans most of the window and no text leaves its chart.
  const std::string measured = dir + "/measured.html";
  std::ofstream(measured) << page.substr(0, page.rfind("</body>")) << R"(<script>
const problems = [];
const page = document.documentElement.clientWidth;
document.querySelectorAll('svg').forEach((svg, i) => {
  const box = svg.getBoundingClientRect();
  if (box.width < 0.8 * page) problems.push(`chart ${i} is ${Math.round(box.width)} of ${page} px`);
  svg.querySelectorAll('text').forEach(t => {
    const r = t.getBoundingClientRect();
    if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
        r.bottom > box.bottom + 1)
      problems.push(`chart ${i}: "${t.textContent}" is cut`);
  });
});
document.body.setAttribute('data-layout', problems.length ? problems.join('; ') : 'ok');
</script></body></html>)";
  // One browser profile per run, no sandbox (root in CI), no GPU, nothing fetched.
  const std::vector<std::string> browser = {chromium,
                                            "--headless",
                                            "--no-sandbox",
                                            "--disable-gpu",
                                            "--no-first-run",
                                            "--user-data-dir=" + dir + "/profile",
                                            "--window-size=1280,3000"};
  std::string dom;
  std::vector<std::string> dump = browser;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + html);
  ASSERT_EQ(testing::RunCommand(dump, &dom, std::chrono::milliseconds(120000)), 0) << dom;
  for (const char* id : {"summary", "findings", "loss", "accuracy", "throughput", "step-time",
                         "phases", "membership"})
    EXPECT_NE(dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  const std::regex svg("<svg[ >]");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(dom.begin(), dom.end(), svg), std::sregex_iterator()), 5)
      << "the rendered page lost a chart";
  EXPECT_NE(dom.find("data-rule=\"straggler\""), std::string::npos);
  EXPECT_EQ(dom.find("class=\"tick\">1e+"), std::string::npos) << "an exponent on an axis";

  std::string layout;
  std::vector<std::string> measure = browser;
  measure.push_back("--dump-dom");
  measure.push_back("file://" + measured);
  ASSERT_EQ(testing::RunCommand(measure, &layout, std::chrono::milliseconds(120000)), 0) << layout;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(layout, found, std::regex("data-layout=\"([^\"]*)\"")))
      << "the measuring script did not run";
  EXPECT_EQ(found[1].str(), "ok");

  std::string shot_log;
  std::vector<std::string> shot = browser;
  shot.push_back("--screenshot=" + png);
  shot.push_back("file://" + html);
  ASSERT_EQ(testing::RunCommand(shot, &shot_log, std::chrono::milliseconds(120000)), 0) << shot_log;
  std::ifstream in(png, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 24u) << "no screenshot";
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  // IHDR: width, big-endian, at byte 16.
  const auto byte = [&](int i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i]));
  };
  const uint32_t width = byte(16) << 24 | byte(17) << 16 | byte(18) << 8 | byte(19);
  EXPECT_EQ(width, 1280u);
  EXPECT_GT(bytes.size(), 20000u) << "a page of charts compresses to more than a blank page";
  // RETORT_REPORT_SCREENSHOT=FILE keeps the screenshot, to look at the page as a user would.
  if (const char* keep = std::getenv("RETORT_REPORT_SCREENSHOT"))
    std::filesystem::copy_file(png, keep, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove_all(dir);
}

TEST(ReportSvg, TickLabelsHaveTheDecimalsTheirStepNeedsAndNoCExponent) {
  EXPECT_EQ(FormatTick(0, 0.5), "0");
  EXPECT_EQ(FormatTick(2.5, 0.5), "2.5");
  EXPECT_EQ(FormatTick(0.25, 0.05), "0.25");
  EXPECT_EQ(FormatTick(1000, 200), "1,000");
  EXPECT_EQ(FormatTick(1200, 200), "1,200");
  EXPECT_EQ(FormatTick(12500, 2500), "12.5k");
  EXPECT_EQ(FormatTick(20000, 10000), "20k");
  EXPECT_EQ(FormatTick(2e6, 1e6), "2M");
  EXPECT_EQ(FormatTick(3e-5, 1e-5), "3e-5");
  EXPECT_EQ(FormatTick(1.5e-4, 5e-5), "1.5e-4");
  EXPECT_EQ(FormatTick(-0.5, 0.5), "-0.5");
  EXPECT_EQ(FormatTick(1.02e-3, 2e-5), "1.02e-3");  // a flat learning rate's close ticks differ
  EXPECT_EQ(FormatTick(1e-3, 2e-5), "1.00e-3");
}

TEST(ReportSvg, PhaseBarsHaveAScaleAndTheirLegendWrapsInsideTheChart) {
  StackedBars b;
  b.title = "phases";
  b.x_label = "seconds per step";
  for (int i = 0; i < 12; ++i) {
    b.segment_names.push_back("a long phase name " + std::to_string(i));
    b.segment_colors.push_back("#123456");
  }
  b.row_labels = {"w-0", "w-1"};
  b.rows = {std::vector<double>(12, 0.1), std::vector<double>(12, 0.05)};
  const std::string svg = RenderStackedBars(b);
  // Ticks from 0 to the longest bar (1.2 s).
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1.2</text>"), std::string::npos);
  // Every legend text starts inside the drawing width with room for its name.
  const std::regex legend("<text x=\"([0-9.]+)\" y=\"[0-9.]+\" class=\"legend\">([^<]*)</text>");
  int entries = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), legend); it != std::sregex_iterator();
       ++it, ++entries)
    EXPECT_LE(std::stod((*it)[1]) + 6.6 * (*it)[2].length(), b.width) << (*it)[2];
  EXPECT_EQ(entries, 12);
}

TEST(ReportSvg, EscapesTextAndDrawsEveryPoint) {
  LineChart c{"a<b & \"c\"", "x", "y", {{"s", "#000", {{0, 1}, {1, 2}, {2, 3}}}}, {}};
  const std::string svg = RenderLineChart(c);
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  const auto d = svg.find(" d=\"M");
  ASSERT_NE(d, std::string::npos);
  const std::string path = svg.substr(d, svg.find('"', d + 4) - d);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 2);
}

TEST(ReportLogs, MalformedLinesAreCountedAndLatestLineWins) {
  int malformed = 0;
  WorkerLog log = ParseWorkerLog("n-0",
                                 "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\nnot "
                                 "json\n{\"step\":2,\"loss\":1.5}\n{\"st",
                                 &malformed);
  EXPECT_EQ(malformed, 2);
  ASSERT_EQ(log.Latest().size(), 2u);
  EXPECT_DOUBLE_EQ(log.Latest()[1].loss, 1.5);
  EXPECT_EQ(log.Rollbacks(), std::vector<int64_t>{2});
}

}  // namespace
}  // namespace retort::report
