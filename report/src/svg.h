// Inline SVG for the HTML report: a small drawing surface (every text and tooltip escaped), linear
// and logarithmic scales, and round axis ticks. Drawn by us so the report needs no script or
// network at view time.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acspeed::report {

// Escapes & < > " ' so text is literal in HTML/SVG text content and in quoted attribute values.
std::string escape_markup(std::string_view text);

// Round values ("1, 2, 5 x 10^k" steps) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// Tick text without trailing zeros: 0.5, 25, 1200.
std::string tick_label(double value);

// Maps data [d0, d1] to pixels [p0, p1], linearly or on a log scale (d0, d1 > 0).
struct Scale {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  bool log = false;
  double operator()(double value) const;
};

class Svg {
 public:
  // `title` becomes the image's accessible name (<title>).
  Svg(double width, double height, std::string_view title);

  double width() const { return width_; }
  double height() const { return height_; }

  // `tooltip` (optional) is shown on hover through an SVG <title> child.
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view tooltip = "");
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double stroke_width = 1,
            bool dashed = false);
  void circle(double cx, double cy, double r, std::string_view fill, double opacity = 1,
              std::string_view tooltip = "");
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                double stroke_width = 2);
  struct TextStyle {
    std::string_view anchor = "start";  // start|middle|end
    double size = 12;
    std::string_view fill = "#333";
    bool bold = false;
    double rotate = 0;  // degrees, around (x, y)
  };
  void text(double x, double y, std::string_view content, const TextStyle& style);
  void text(double x, double y, std::string_view content) { text(x, y, content, TextStyle{}); }

  // The <svg> element, ready to inline in HTML.
  std::string str() const;

 private:
  double width_, height_;
  std::string title_;
  std::string body_;
};

}  // namespace acspeed::report
