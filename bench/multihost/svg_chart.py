"""Minimal SVG line and scatter charts with no plotting package (the project's Python environment
has none): axes with ticks, optional log scales, series of points joined or not, a legend, and
optional guide lines. Used by scaling_model.py for the projection and validation figures."""
import math
from xml.sax.saxutils import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


class Chart:
    """One panel. add_series() then svg(); coordinates in data units.

    Not thread-safe; one chart per figure panel."""

    def __init__(self, title, x_label, y_label, x_log=False, y_log=False, x_range=None,
                 y_range=None, width=460, height=320, legend="upper left"):
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.x_log, self.y_log = x_log, y_log
        self.x_range, self.y_range = x_range, y_range
        self.width, self.height = width, height
        if legend not in ("upper left", "lower left"):
            raise ValueError(f"legend: 'upper left' or 'lower left', not {legend!r}")
        self.legend = legend
        self.series = []  # (label, [(x, y)], colour, dashed, lines, markers)
        self.guides = []  # (label, [(x, y)], colour); label None: not in the legend
        self.x_ticks = None

    def add_series(self, label, points, dashed=False, lines=True, markers=True, colour=None):
        colour = colour or PALETTE[len(self.series) % len(PALETTE)]
        self.series.append((label, list(points), colour, dashed, lines, markers))

    def add_guide(self, label, points, colour="#777777"):
        """A thin dashed reference line (a target, y = x) drawn under the series; label None
        keeps it out of the legend."""
        self.guides.append((label, list(points), colour))

    def set_x_ticks(self, values):
        self.x_ticks = list(values)

    def _range(self, values, log, fixed):
        if fixed:
            return fixed
        lo, hi = min(values), max(values)
        if log:
            return 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))
        pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
        return lo - pad, hi + pad

    @staticmethod
    def _ticks(lo, hi, log):
        if log:
            first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
            return [10.0 ** e for e in range(first, last + 1) if lo <= 10.0 ** e <= hi]
        raw = (hi - lo) / 5
        step = 10 ** math.floor(math.log10(raw))
        step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
        start = math.ceil(lo / step) * step
        return [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]

    @staticmethod
    def _format(v):
        if v == 0:
            return "0"
        if abs(v) >= 1000 or abs(v) < 0.01:
            return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
        return f"{v:g}"

    def svg_body(self, x0, y0):
        """The panel's SVG elements, its top-left corner at (x0, y0)."""
        points = [p for s in self.series for p in s[1]] + [p for g in self.guides for p in g[1]]
        xr = self._range([p[0] for p in points], self.x_log, self.x_range)
        yr = self._range([p[1] for p in points], self.y_log, self.y_range)
        left, right, top, bottom = 62, 14, 30, 44
        pw, ph = self.width - left - right, self.height - top - bottom

        def sx(x):
            t = ((math.log10(x) - math.log10(xr[0])) / (math.log10(xr[1]) - math.log10(xr[0]))
                 if self.x_log else (x - xr[0]) / (xr[1] - xr[0]))
            return x0 + left + t * pw

        def sy(y):
            t = ((math.log10(y) - math.log10(yr[0])) / (math.log10(yr[1]) - math.log10(yr[0]))
                 if self.y_log else (y - yr[0]) / (yr[1] - yr[0]))
            return y0 + top + (1 - t) * ph

        out = [f'<text x="{x0 + self.width / 2:.1f}" y="{y0 + 18}" text-anchor="middle" '
               f'font-size="13" font-weight="bold">{escape(self.title)}</text>',
               f'<rect x="{x0 + left}" y="{y0 + top}" width="{pw}" height="{ph}" fill="none" '
               'stroke="#333"/>']
        for v in self.x_ticks or self._ticks(*xr, self.x_log):
            x = sx(v)
            out.append(f'<line x1="{x:.1f}" y1="{y0 + top}" x2="{x:.1f}" y2="{y0 + top + ph}" '
                       'stroke="#eee"/>')
            out.append(f'<text x="{x:.1f}" y="{y0 + top + ph + 14}" text-anchor="middle" '
                       f'font-size="10">{self._format(v)}</text>')
        for v in self._ticks(*yr, self.y_log):
            y = sy(v)
            out.append(f'<line x1="{x0 + left}" y1="{y:.1f}" x2="{x0 + left + pw}" y2="{y:.1f}" '
                       'stroke="#eee"/>')
            out.append(f'<text x="{x0 + left - 4}" y="{y + 3:.1f}" text-anchor="end" '
                       f'font-size="10">{self._format(v)}</text>')
        out.append(f'<text x="{x0 + left + pw / 2:.1f}" y="{y0 + self.height - 8}" '
                   f'text-anchor="middle" font-size="11">{escape(self.x_label)}</text>')
        out.append(f'<text transform="translate({x0 + 14},{y0 + top + ph / 2:.1f}) rotate(-90)" '
                   f'text-anchor="middle" font-size="11">{escape(self.y_label)}</text>')
        for label, pts, colour in self.guides:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                       'stroke-width="1" stroke-dasharray="2,3"/>')
        for label, pts, colour, dashed, lines, markers in self.series:
            if lines and len(pts) > 1:
                dash = ' stroke-dasharray="6,3"' if dashed else ""
                path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                           f'stroke-width="1.6"{dash}/>')
            if markers:
                for x, y in pts:
                    out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.6" '
                               f'fill="{colour}"/>')
        legend = [(s[0], s[2], s[3], s[4]) for s in self.series]
        legend += [(g[0], g[2], True, True) for g in self.guides if g[0] is not None]
        first = (y0 + top + 12 if self.legend == "upper left"
                 else y0 + top + ph - 6 - 13 * (len(legend) - 1))
        for i, (label, colour, dashed, line) in enumerate(legend):
            ly = first + i * 13
            lx = x0 + left + 8
            dash = ' stroke-dasharray="6,3"' if dashed else ""
            if line:
                out.append(f'<line x1="{lx}" y1="{ly - 3}" x2="{lx + 18}" y2="{ly - 3}" '
                           f'stroke="{colour}" stroke-width="1.6"{dash}/>')
            else:
                out.append(f'<circle cx="{lx + 9}" cy="{ly - 3}" r="2.6" fill="{colour}"/>')
            out.append(f'<text x="{lx + 22}" y="{ly}" font-size="10">{escape(label)}</text>')
        return out


def figure(charts, columns=2):
    """An SVG document holding the charts in a grid, `columns` per row."""
    width = max(c.width for c in charts)
    height = max(c.height for c in charts)
    rows = (len(charts) + columns - 1) // columns
    cols = min(columns, len(charts))
    body = []
    for i, chart in enumerate(charts):
        body += chart.svg_body((i % columns) * width, (i // columns) * height)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * width}" '
            f'height="{rows * height}" font-family="sans-serif">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
