#include "trainer/step_profiler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/format_number.h"

namespace retort::trainer {
namespace {

std::string Num(double v) { return FormatNumber("%.6g", v); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string Percent(double part, double whole) {
  return Num(whole > 0 ? std::round(1000.0 * part / whole) / 10.0 : 0) + "%";
}

}  // namespace

std::string StepTimingJson(const StepTiming& t) {
  std::ostringstream os;
  os << "{\"step\":" << t.step << ",\"data_wait_s\":" << Num(t.data_wait)
     << ",\"teacher_forward_s\":" << Num(t.teacher_forward)
     << ",\"student_forward_s\":" << Num(t.student_forward) << ",\"backward_s\":" << Num(t.backward)
     << ",\"comm_exposed_s\":" << Num(t.comm_exposed) << ",\"optimizer_s\":" << Num(t.optimizer)
     << ",\"total_s\":" << Num(t.total)
     << ",\"teacher_cached\":" << (t.teacher_cached ? "true" : "false")
     << ",\"skipped\":" << (t.skipped ? "true" : "false") << "}";
  return os.str();
}

void StepProfiler::Record(const StepTiming& timing) {
  steps_.push_back(timing);
  if (out_) *out_ << StepTimingJson(timing) << "\n";
}

ProfileSummary StepProfiler::Summarize() const {
  ProfileSummary s;
  s.steps = static_cast<int64_t>(steps_.size());
  if (steps_.empty()) {
    s.bottleneck = "none";
    s.findings.push_back("no steps recorded");
    return s;
  }
  StepTiming& m = s.mean;
  std::vector<double> totals;
  for (const StepTiming& t : steps_) {
    m.data_wait += t.data_wait;
    m.teacher_forward += t.teacher_forward;
    m.student_forward += t.student_forward;
    m.backward += t.backward;
    m.comm_exposed += t.comm_exposed;
    m.optimizer += t.optimizer;
    m.total += t.total;
    totals.push_back(t.total);
  }
  const double n = static_cast<double>(steps_.size());
  for (double* v : {&m.data_wait, &m.teacher_forward, &m.student_forward, &m.backward,
                    &m.comm_exposed, &m.optimizer, &m.total})
    *v /= n;
  m.step = s.steps;

  const double median = Median(totals);
  std::vector<double> deviations;
  for (double t : totals) deviations.push_back(std::abs(t - median));
  // Floor sigma at 1% of the median so that perfectly regular steps do not flag noise.
  const double sigma = std::max(1.4826 * Median(deviations), 0.01 * median);
  for (const StepTiming& t : steps_)
    if (t.total > median + options_.outlier_sigmas * sigma) s.outlier_steps.push_back(t.step);

  if (m.data_wait > options_.data_bound_fraction * m.total) {
    s.bottleneck = "data_loader";
    s.findings.push_back("data-loader bound: data wait is " + Percent(m.data_wait, m.total) +
                         " of step time (more loader threads, or cheaper decode/augmentation)");
  }
  if (m.comm_exposed > options_.comm_bound_fraction * m.total) {
    if (s.bottleneck.empty()) s.bottleneck = "communication";
    s.findings.push_back("communication bound: exposed communication is " +
                         Percent(m.comm_exposed, m.total) +
                         " of step time (larger buckets, more overlap, or a faster link)");
  }
  if (!s.outlier_steps.empty()) {
    std::string list;
    for (size_t i = 0; i < s.outlier_steps.size() && i < 10; ++i)
      list += (i ? "," : "") + std::to_string(s.outlier_steps[i]);
    s.findings.push_back("step-time outliers: " + std::to_string(s.outlier_steps.size()) +
                         " step(s) beyond " + Num(options_.outlier_sigmas) +
                         " sigma of the median " + Num(median) + " s (steps " + list + ")");
  }
  if (s.bottleneck.empty()) {
    std::pair<double, const char*> phases[] = {{m.teacher_forward, "teacher_forward"},
                                               {m.student_forward, "student_forward"},
                                               {m.backward, "backward"},
                                               {m.optimizer, "optimizer"}};
    auto* top = std::max_element(std::begin(phases), std::end(phases));
    s.bottleneck = std::string("compute:") + top->second;
    s.findings.push_back(std::string("compute bound: largest phase is ") + top->second + " (" +
                         Percent(top->first, m.total) + " of step time)");
  }
  return s;
}

std::string ProfileSummary::ToJson() const {
  std::ostringstream os;
  os << "{\"summary\":true,\"steps\":" << steps << ",\"bottleneck\":\"" << bottleneck
     << "\",\"mean\":" << StepTimingJson(mean) << ",\"outlier_steps\":[";
  for (size_t i = 0; i < outlier_steps.size(); ++i) os << (i ? "," : "") << outlier_steps[i];
  os << "],\"findings\":[";
  for (size_t i = 0; i < findings.size(); ++i) {
    os << (i ? "," : "") << "\"";
    for (char c : findings[i]) {
      if (c == '"' || c == '\\') os << '\\';
      os << c;
    }
    os << "\"";
  }
  os << "]}";
  return os.str();
}

}  // namespace retort::trainer
