#include "tools/report/html_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "tools/report/svg_chart.h"

namespace retort::report {
namespace {

const char* kPhaseColors[kPhaseCount] = {"#d62728", "#9467bd", "#1f77b4", "#2ca02c",
                                         "#ff7f0e", "#8c564b", "#7f7f7f"};

std::string Num(double v, const char* fmt = "%.4g") {
  char buf[48];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// One line per step: the lowest rank's (loss and throughput are global-batch figures).
std::map<int64_t, StepLine> OnePerStep(const RunLogs& run) {
  std::map<int64_t, StepLine> out;
  for (const WorkerLog& w : run.workers)
    for (const StepLine& l : w.Latest()) {
      auto it = out.find(l.step);
      if (it == out.end() || l.rank < it->second.rank) out[l.step] = l;
    }
  return out;
}

int64_t FirstStartUs(const RunLogs& run) {
  int64_t first = 0;
  for (const WorkerLog& w : run.workers)
    for (const StepLine& l : w.lines)
      if (l.data_start_unix_us > 0 && (first == 0 || l.data_start_unix_us < first))
        first = l.data_start_unix_us;
  return first;
}

}  // namespace

std::vector<MembershipChange> MembershipChanges(const RunLogs& run) {
  std::vector<MembershipChange> out;
  const int64_t t0 = FirstStartUs(run);
  auto seconds = [t0](const StepLine& l) { return (l.end_unix_us - t0) / 1e6; };
  const auto steps = OnePerStep(run);
  uint64_t generation = 0;
  int world = 0;
  for (const auto& [step, l] : steps) {
    if (l.generation != generation) {
      MembershipChange c;
      c.step = step;
      c.seconds = seconds(l);
      c.what = "generation " + std::to_string(l.generation) + ": " + std::to_string(l.world_size) +
               " rank(s)" + (generation == 0 ? "" : " (was " + std::to_string(world) + ")");
      out.push_back(c);
      generation = l.generation;
      world = l.world_size;
    }
  }
  std::set<int64_t> seen;
  for (const WorkerLog& w : run.workers)
    for (size_t i = 1; i < w.lines.size(); ++i)
      if (w.lines[i].step <= w.lines[i - 1].step && seen.insert(w.lines[i].step).second) {
        MembershipChange c;
        c.step = w.lines[i].step;
        c.seconds = seconds(w.lines[i]);
        c.what = "recovery: steps from " + std::to_string(w.lines[i].step) +
                 " re-run after a failure (generation " + std::to_string(w.lines[i].generation) +
                 ")";
        c.recovery = true;
        out.push_back(c);
      }
  std::sort(out.begin(), out.end(),
            [](const MembershipChange& a, const MembershipChange& b) { return a.step < b.step; });
  return out;
}

std::string RenderHtmlReport(const RunLogs& run, const Analysis& a) {
  const auto steps = OnePerStep(run);
  const auto changes = MembershipChanges(run);
  const int64_t t0 = FirstStartUs(run);
  std::vector<Marker> step_markers, time_markers;
  for (const auto& c : changes) {
    const std::string color = c.recovery ? "#d62728" : "#1f77b4";
    step_markers.push_back({static_cast<double>(c.step), c.what, color});
    time_markers.push_back({c.seconds, c.what, color});
  }

  LineChart loss{"Loss (global batch)", "step", "loss", {}, step_markers};
  Series loss_series{"loss", "#1f77b4", {}};
  LineChart lr_chart{"Learning rate", "step", "lr", {}, step_markers};
  Series lr_series{"lr", "#2ca02c", {}};
  LineChart tput{"Throughput", "seconds since the first step", "samples/s", {}, time_markers};
  Series tput_series{"samples/s (global)", "#ff7f0e", {}};
  for (const auto& [step, l] : steps) {
    loss_series.points.push_back({static_cast<double>(step), l.loss});
    lr_series.points.push_back({static_cast<double>(step), l.lr});
    if (l.end_unix_us > 0)
      tput_series.points.push_back({(l.end_unix_us - t0) / 1e6, l.samples_per_second});
  }
  loss.series.push_back(loss_series);
  lr_chart.series.push_back(lr_series);
  tput.series.push_back(tput_series);

  // Step time of the slowest rank, outliers and checkpoint stalls marked.
  LineChart step_time{"Step time (slowest rank)", "step", "seconds", {}, step_markers};
  Series slowest{"step time", "#9467bd", {}};
  std::map<int64_t, double> slow;
  for (const WorkerLog& w : run.workers)
    for (const StepLine& l : w.Latest()) slow[l.step] = std::max(slow[l.step], l.step_s);
  for (const auto& [s, t] : slow) slowest.points.push_back({static_cast<double>(s), t});
  step_time.series.push_back(slowest);
  for (const Finding& f : a.findings)
    for (int64_t s : f.steps)
      step_time.markers.push_back({static_cast<double>(s), f.rule + " at step " + std::to_string(s),
                                   f.rule == "outliers" ? "#d62728" : "#7f7f7f"});

  StackedBars phases;
  phases.title = "Mean time per step by phase, per worker";
  phases.x_label = "seconds per step";
  for (int i = 0; i < kPhaseCount; ++i) {
    phases.segment_names.push_back(kPhaseNames[i]);
    phases.segment_colors.push_back(kPhaseColors[i]);
  }
  for (const WorkerLog& w : run.workers) {
    const auto lines = w.Latest();
    std::vector<double> mean(kPhaseCount, 0.0);
    for (const StepLine& l : lines)
      for (int i = 0; i < kPhaseCount; ++i) mean[i] += l.phase_s[i] / lines.size();
    phases.row_labels.push_back(w.name + " (rank " + std::to_string(lines.back().rank) + ")");
    phases.rows.push_back(mean);
  }

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>retort report: "
    << EscapeXml(run.job_name.empty() ? run.dir : run.job_name) << "</title><style>"
    << "body{font-family:sans-serif;margin:24px;max-width:1160px;color:#222}"
    << "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    << "svg text{font-size:11px;font-family:sans-serif}svg .title{font-size:13px;font-weight:bold}"
    << "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;font-size:13px}"
    << "li.finding{margin:6px 0}.ok{color:#2a7}.bad{color:#c33}</style></head><body>\n";
  o << "<h1>retort run report: " << EscapeXml(run.job_name.empty() ? "(unnamed job)" : run.job_name)
    << "</h1>\n";
  o << "<section id=\"summary\"><h2>Summary</h2><table>"
    << "<tr><th>run folder</th><td>" << EscapeXml(run.dir) << "</td></tr>"
    << "<tr><th>steps</th><td>" << a.steps << "</td></tr>"
    << "<tr><th>workers</th><td>" << run.workers.size() << "</td></tr>"
    << "<tr><th>median step (slowest rank)</th><td>" << Num(a.median_step_s) << " s</td></tr>"
    << "<tr><th>bottleneck</th><td>" << EscapeXml(a.bottleneck) << "</td></tr>";
  if (run.malformed_lines > 0)
    o << "<tr><th>unreadable log lines</th><td>" << run.malformed_lines << "</td></tr>";
  o << "</table></section>\n";
  o << "<section id=\"findings\"><h2>Findings</h2>";
  if (a.findings.empty()) {
    o << "<p class=\"ok\">No bottleneck rule fired: not data-loader bound, not communication "
         "bound, no straggler rank, no step-time outliers, no checkpoint stalls. The largest "
         "phase is "
      << EscapeXml(a.bottleneck.substr(a.bottleneck.find(':') + 1)) << ".</p>";
  } else {
    o << "<ul>";
    for (const Finding& f : a.findings)
      o << "<li class=\"finding bad\" data-rule=\"" << EscapeXml(f.rule) << "\">"
        << EscapeXml(f.text) << "</li>";
    o << "</ul>";
  }
  o << "</section>\n";
  o << "<section id=\"loss\"><h2>Loss</h2>" << RenderLineChart(loss) << RenderLineChart(lr_chart)
    << "</section>\n";
  o << "<section id=\"accuracy\"><h2>Accuracy</h2>";
  if (run.student_top1 || run.teacher_top1) {
    o << "<p>Top-1 on the test split, evaluated once at the end of the job:</p><table>";
    if (run.student_top1)
      o << "<tr><th>student</th><td>" << Num(100 * *run.student_top1, "%.2f") << "%</td></tr>";
    if (run.teacher_top1)
      o << "<tr><th>teacher</th><td>" << Num(100 * *run.teacher_top1, "%.2f") << "%</td></tr>";
    o << "</table>";
  } else {
    o << "<p>Not evaluated (no result.json with top-1: the job did not finish or has "
         "<code>evaluate: false</code>).</p>";
  }
  o << "</section>\n";
  o << "<section id=\"throughput\"><h2>Throughput</h2>" << RenderLineChart(tput) << "</section>\n";
  o << "<section id=\"step-time\"><h2>Step time</h2>" << RenderLineChart(step_time)
    << "</section>\n";
  o << "<section id=\"phases\"><h2>Phases per worker</h2>" << RenderStackedBars(phases)
    << "</section>\n";
  o << "<section id=\"membership\"><h2>Membership changes and recoveries</h2>";
  if (changes.empty()) {
    o << "<p>None.</p>";
  } else {
    o << "<table><tr><th>step</th><th>seconds</th><th>what</th></tr>";
    for (const auto& c : changes)
      o << "<tr><td>" << c.step << "</td><td>" << Num(c.seconds, "%.1f") << "</td><td>"
        << EscapeXml(c.what) << "</td></tr>";
    o << "</table>";
  }
  o << "</section>\n</body></html>\n";
  return o.str();
}

nlohmann::json ReportJson(const RunLogs& run, const Analysis& a) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : a.findings)
    findings.push_back({{"rule", f.rule},
                        {"text", f.text},
                        {"workers", f.workers},
                        {"ranks", f.ranks},
                        {"steps", f.steps}});
  nlohmann::json phases = nlohmann::json::object();
  for (int i = 0; i < kPhaseCount; ++i) phases[kPhaseNames[i]] = a.mean_phase_s[i];
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : MembershipChanges(run))
    changes.push_back(
        {{"step", c.step}, {"seconds", c.seconds}, {"what", c.what}, {"recovery", c.recovery}});
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerLog& w : run.workers) workers.push_back(w.name);
  nlohmann::json j{{"run_dir", run.dir},
                   {"job", run.job_name},
                   {"steps", a.steps},
                   {"workers", workers},
                   {"median_step_s", a.median_step_s},
                   {"bottleneck", a.bottleneck},
                   {"findings", findings},
                   {"mean_phase_s", phases},
                   {"membership_changes", changes}};
  if (run.student_top1) j["student_top1"] = *run.student_top1;
  if (run.teacher_top1) j["teacher_top1"] = *run.teacher_top1;
  return j;
}

}  // namespace retort::report
