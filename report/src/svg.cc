#include "svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace acspeed::report {

std::string escape_markup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

std::string tick_label(double value) { return fmt::format("{:g}", value); }

double Scale::operator()(double value) const {
  double t;
  if (log) {
    t = (std::log(value) - std::log(d0)) / (std::log(d1) - std::log(d0));
  } else {
    t = d1 == d0 ? 0.5 : (value - d0) / (d1 - d0);
  }
  if (!std::isfinite(t)) t = 0.5;
  return p0 + t * (p1 - p0);
}

Svg::Svg(double width, double height, std::string_view title)
    : width_(width), height_(height), title_(title) {}

namespace {
std::string tooltip_element(std::string_view tooltip) {
  return tooltip.empty() ? "" : fmt::format("<title>{}</title>", escape_markup(tooltip));
}
}  // namespace

void Svg::rect(double x, double y, double w, double h, std::string_view fill, std::string_view tooltip) {
  body_ += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">{}</rect>\n", x,
                       y, std::max(0.0, w), std::max(0.0, h), escape_markup(fill), tooltip_element(tooltip));
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double stroke_width, bool dashed) {
  body_ += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                       "stroke-width=\"{:g}\"{}/>\n",
                       x1, y1, x2, y2, escape_markup(stroke), stroke_width, dashed ? " stroke-dasharray=\"6 4\"" : "");
}

void Svg::circle(double cx, double cy, double r, std::string_view fill, double opacity, std::string_view tooltip) {
  body_ += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:g}\" fill=\"{}\" fill-opacity=\"{:g}\">{}</circle>\n",
                       cx, cy, r, escape_markup(fill), opacity, tooltip_element(tooltip));
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                   double stroke_width) {
  std::string coords;
  for (const auto& [x, y] : points) coords += fmt::format("{:.1f},{:.1f} ", x, y);
  body_ += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{:g}\"/>\n", coords,
                       escape_markup(stroke), stroke_width);
}

void Svg::text(double x, double y, std::string_view content, const TextStyle& style) {
  const std::string transform =
      style.rotate != 0 ? fmt::format(" transform=\"rotate({:g} {:.1f} {:.1f})\"", style.rotate, x, y) : "";
  body_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" font-size=\"{:g}\" fill=\"{}\"{}{}>{}</text>\n",
                       x, y, escape_markup(style.anchor), style.size, escape_markup(style.fill),
                       style.bold ? " font-weight=\"bold\"" : "", transform, escape_markup(content));
}

std::string Svg::str() const {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {:g} {:g}\" width=\"{:g}\" "
                     "height=\"{:g}\" role=\"img\" font-family=\"sans-serif\"><title>{}</title>\n{}</svg>\n",
                     width_, height_, width_, height_, escape_markup(title_), body_);
}

}  // namespace acspeed::report
