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
  int width = 760, height = 260;
};

std::string RenderLineChart(const LineChart& chart);

struct StackedBars {
  std::string title, x_label;
  std::vector<std::string> segment_names;   // legend, in stacking order
  std::vector<std::string> segment_colors;  // one per segment
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> rows;  // one value per segment for each row
  int width = 760;
};

std::string RenderStackedBars(const StackedBars& bars);

// Text safe inside SVG/HTML element content and attribute values.
std::string EscapeXml(const std::string& text);

}  // namespace retort::report
