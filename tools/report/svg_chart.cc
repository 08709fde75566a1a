#include "tools/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/format_number.h"

namespace retort::report {
namespace {

std::string F(double v) { return FormatNumber("%.1f", v); }

// A value inside a tooltip (not laid out, so any length does).
std::string TooltipValue(double v) { return FormatNumber("%.3g", v); }

// An approximate text width in the charts' 11 px sans-serif (no font metrics without a browser):
// generous, so that what is laid out by it is not cut.
double TextWidth(const std::string& text) { return 6.6 * text.size(); }

// The outer <svg> element: drawn at width x height units, scaled to the width of the page.
std::string OpenSvg(const char* css_class, int width, double height, const std::string& title) {
  std::ostringstream o;
  o << "<svg class=\"" << css_class << "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 "
    << width << " " << F(height) << "\" width=\"100%\" style=\"max-width:" << width
    << "px;height:auto\" role=\"img\" aria-label=\"" << EscapeXml(title) << "\">";
  return o.str();
}

// A "nice" step for about `ticks` ticks across [lo, hi].
double NiceStep(double lo, double hi, int ticks) {
  const double raw = (hi - lo) / std::max(1, ticks);
  if (raw <= 0) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// The fewest decimals (at most `most`) that write multiples of `step` exactly.
int DecimalsFor(double step, int most) {
  for (int d = 0; d < most; ++d) {
    const double scaled = step * std::pow(10.0, d);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
  }
  return most;
}

}  // namespace

std::string FormatTick(double value, double step) {
  char buf[48];
  const double a = std::abs(value);
  step = std::abs(step);
  if (a < 1e-300) return "0";
  if (a >= 1e4) {  // thousands and millions, with the decimals the step needs at that scale
    const double scale = a >= 1e6 ? 1e6 : 1e3;
    const char* suffix = a >= 1e6 ? "M" : "k";
    std::snprintf(buf, sizeof(buf), "%.*f%s", DecimalsFor(step / scale, 3), value / scale, suffix);
    return buf;
  }
  if (step > 0 && step < 1e-3) {  // a short power of ten: "3e-5", "1.5e-4"
    const int exponent = static_cast<int>(std::floor(std::log10(a)));
    const double mantissa = value / std::pow(10.0, exponent);
    std::snprintf(buf, sizeof(buf), "%.*f", DecimalsFor(step / std::pow(10.0, exponent), 4),
                  mantissa);
    return std::string(buf) + "e" + std::to_string(exponent);
  }
  const int decimals = DecimalsFor(step, 6);
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  std::string out = buf;
  if (decimals == 0 && a >= 1000) out.insert(out.size() - 3, ",");  // 1,000 .. 9,999
  return out;
}

std::string EscapeXml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderLineChart(const LineChart& c) {
  const double left = 64, right = 24, top = 28, bottom = 40;
  const double w = c.width - left - right, h = c.height - top - bottom;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const Series& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::ostringstream o;
  o << OpenSvg("chart", c.width, c.height, c.title);
  o << "<text x=\"" << left << "\" y=\"18\" class=\"title\">" << EscapeXml(c.title) << "</text>";
  if (x0 > x1) {
    o << "<text x=\"" << left << "\" y=\"" << top + h / 2 << "\">no data</text></svg>";
    return o.str();
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + (y0 == 0 ? 1 : std::abs(y0) * 0.1);
  if (y0 > 0 && y0 < 0.5 * y1) y0 = 0;  // start at zero when that costs little
  auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * w; };
  auto Y = [&](double y) { return top + h - (y - y0) / (y1 - y0) * h; };
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << w << "\" height=\"" << h
    << "\" fill=\"none\" stroke=\"#999\"/>";
  const double ys = NiceStep(y0, y1, 4);
  for (double y = std::ceil(y0 / ys) * ys; y <= y1 + 1e-12; y += ys)
    o << "<line x1=\"" << left << "\" x2=\"" << left + w << "\" y1=\"" << F(Y(y)) << "\" y2=\""
      << F(Y(y)) << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << F(Y(y) + 4)
      << "\" text-anchor=\"end\" class=\"tick\">" << FormatTick(y, ys) << "</text>";
  const double xs = NiceStep(x0, x1, 6);
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + 1e-12; x += xs)
    o << "<text x=\"" << F(X(x)) << "\" y=\"" << top + h + 16
      << "\" text-anchor=\"middle\" class=\"tick\">" << FormatTick(x, xs) << "</text>";
  o << "<text x=\"" << left + w / 2 << "\" y=\"" << c.height - 6
    << "\" text-anchor=\"middle\" class=\"axis\">" << EscapeXml(c.x_label) << "</text>";
  o << "<text transform=\"translate(14," << top + h / 2
    << ") rotate(-90)\" text-anchor=\"middle\" class=\"axis\">" << EscapeXml(c.y_label)
    << "</text>";
  for (const Marker& m : c.markers) {
    if (m.x < x0 || m.x > x1) continue;
    o << "<line class=\"marker\" x1=\"" << F(X(m.x)) << "\" x2=\"" << F(X(m.x)) << "\" y1=\"" << top
      << "\" y2=\"" << top + h << "\" stroke=\"" << EscapeXml(m.color)
      << "\" stroke-dasharray=\"4 3\"><title>" << EscapeXml(m.label) << "</title></line>";
  }
  int legend = 0;
  for (const Series& s : c.series) {
    std::string path;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      path += (path.empty() ? "M" : " L") + F(X(x)) + " " + F(Y(y));
    }
    o << "<path class=\"series\" d=\"" << path << "\" fill=\"none\" stroke=\"" << EscapeXml(s.color)
      << "\" stroke-width=\"1.5\"><title>" << EscapeXml(s.name) << "</title></path>";
    o << "<text x=\"" << left + w - 4 << "\" y=\"" << top + 14 + 14 * legend++
      << "\" text-anchor=\"end\" fill=\"" << EscapeXml(s.color) << "\" class=\"legend\">"
      << EscapeXml(s.name) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string RenderStackedBars(const StackedBars& b) {
  const double left = 150, right = 24, top = 28, row_h = 22, axis_h = 20, legend_row_h = 16;
  const double w = b.width - left - right;
  double max_total = 0;
  for (const auto& row : b.rows) {
    double t = 0;
    for (double v : row) t += std::max(0.0, v);
    max_total = std::max(max_total, t);
  }
  if (max_total <= 0) max_total = 1;
  // The legend wraps onto as many lines as the width needs: each entry is a swatch and a name.
  struct LegendEntry {
    double x;
    int line;
  };
  std::vector<LegendEntry> legend;
  double lx = left;
  int legend_lines = b.segment_names.empty() ? 0 : 1;
  for (const std::string& name : b.segment_names) {
    const double entry_w = 13 + TextWidth(name) + 14;
    if (lx > left && lx + entry_w > left + w) lx = left, ++legend_lines;
    legend.push_back({lx, legend_lines - 1});
    lx += entry_w;
  }
  const double bars_bottom = top + row_h * b.rows.size();
  const double legend_top = bars_bottom + axis_h + 16;
  const double height = legend_top + legend_row_h * legend_lines + 24;
  std::ostringstream o;
  o << OpenSvg("bars", b.width, height, b.title);
  o << "<text x=\"8\" y=\"18\" class=\"title\">" << EscapeXml(b.title) << "</text>";
  // The scale: grid lines and tick labels in the bars' unit.
  const double step = NiceStep(0, max_total, 6);
  for (double v = 0; v <= max_total * (1 + 1e-9); v += step) {
    const double x = left + v / max_total * w;
    o << "<line x1=\"" << F(x) << "\" x2=\"" << F(x) << "\" y1=\"" << top << "\" y2=\""
      << F(bars_bottom + 4) << "\" stroke=\"#ddd\"/><text x=\"" << F(x) << "\" y=\""
      << F(bars_bottom + 16) << "\" text-anchor=\"middle\" class=\"tick\">" << FormatTick(v, step)
      << "</text>";
  }
  for (size_t r = 0; r < b.rows.size(); ++r) {
    const double y = top + r * row_h;
    o << "<text x=\"" << left - 6 << "\" y=\"" << F(y + 15)
      << "\" text-anchor=\"end\" class=\"tick\">"
      << EscapeXml(r < b.row_labels.size() ? b.row_labels[r] : "") << "</text>";
    double x = left;
    for (size_t s = 0; s < b.rows[r].size(); ++s) {
      const double v = std::max(0.0, b.rows[r][s]);
      const double bw = v / max_total * w;
      if (bw <= 0) continue;
      o << "<rect x=\"" << F(x) << "\" y=\"" << F(y + 3) << "\" width=\"" << F(bw) << "\" height=\""
        << row_h - 6 << "\" fill=\""
        << EscapeXml(s < b.segment_colors.size() ? b.segment_colors[s] : "#888") << "\"><title>"
        << EscapeXml((s < b.segment_names.size() ? b.segment_names[s] : "") + ": " +
                     TooltipValue(v))
        << "</title></rect>";
      x += bw;
    }
  }
  o << "<text x=\"" << F(left + w / 2) << "\" y=\"" << F(bars_bottom + axis_h + 8)
    << "\" text-anchor=\"middle\" class=\"axis\">" << EscapeXml(b.x_label) << "</text>";
  for (size_t s = 0; s < b.segment_names.size(); ++s) {
    const double ly = legend_top + legend_row_h * legend[s].line + 10;
    o << "<rect x=\"" << F(legend[s].x) << "\" y=\"" << F(ly - 9)
      << "\" width=\"10\" height=\"10\" fill=\""
      << EscapeXml(s < b.segment_colors.size() ? b.segment_colors[s] : "#888") << "\"/><text x=\""
      << F(legend[s].x + 13) << "\" y=\"" << F(ly) << "\" class=\"legend\">"
      << EscapeXml(b.segment_names[s]) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace retort::report
