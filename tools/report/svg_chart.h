// Small SVG charts drawn by our own code (no scripts, no network): line charts with vertical
// event markers, and horizontal stacked bars. Each function returns one <svg> element.
#pragma once

#include <string>
#include <vector>

namespace retort::report {

struct Series {
  std::string name;
  std::string color;                              // CSS color
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct Marker {
  double x = 0;
  std::string label;
  std::string color;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Marker> markers;
  int width = 1100, height = 280;  // drawing units; the page scales the chart to its width
};

std::string RenderLineChart(const LineChart& chart);

struct StackedBars {
  std::string title, x_label;
  std::vector<std::string> segment_names;   // legend, in stacking order
  std::vector<std::string> segment_colors;  // one per segment
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> rows;  // one value per segment for each row
  int width = 1100;                       // drawing units, as LineChart's
};

std::string RenderStackedBars(const StackedBars& bars);

// An axis label for `value` on an axis whose ticks are `step` apart: fixed point with the
// decimals the step needs ("0.25", "1,500"), k and M from 10,000 up ("12.5k", "2M"), and a
// short power of ten for steps below 0.001 ("3e-5"); never C's "1e+03".
std::string FormatTick(double value, double step);

// Text safe inside SVG/HTML element content and attribute values.
std::string EscapeXml(const std::string& text);

}  // namespace retort::report
