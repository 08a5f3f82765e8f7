"""The report as one self-contained HTML file: charts drawn by matplotlib as inline SVG, no
script, no font or stylesheet fetched, so it opens anywhere (an attachment, an air-gapped
laptop) and reads the same without JavaScript.

Everything in it that came from people or documents (questions, titles, URLs) is escaped by
the template; a link is kept only when it is http(s) or a file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.insights.report import Report

STATUS_COLOURS = {
    "answered": "#1a7f37",
    "partial": "#bf8700",
    "not_found": "#cf222e",
    "error": "#6e7781",
    "held back": "#8250df",
}
CHART_SIZE_IN = (6.4, 2.8)
# Links kept: the web and the files `bot ingest` read; anything else (javascript:, data:) is text.
LINK_SCHEMES = frozenset({"http", "https", "file"})


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    svg: str


def render_html(report: Report) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(
        loader=PackageLoader("core.insights", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    template = env.get_template("report.html.j2")
    return template.render(
        r=report,
        charts=charts(report),
        pct=lambda share: f"{share:.0%}",
        secs=lambda value: "n/a" if value is None else f"{value:.2f} s",
        num=lambda value: "n/a" if value is None else f"{value:,.0f}",
        link=_link,
    )


def charts(report: Report) -> list[Chart]:
    import matplotlib

    matplotlib.use("svg")  # no display, no GUI toolkit: the SVG backend only
    from matplotlib import pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    drawn = []
    days = list(report.per_day)
    figure, axes = plt.subplots(figsize=CHART_SIZE_IN)
    axes.bar(range(len(days)), list(report.per_day.values()), color="#0969da")
    step = max(1, len(days) // 8)
    axes.set_xticks(range(0, len(days), step), days[::step], rotation=30, ha="right")
    axes.set_title("Questions per day")
    drawn.append(Chart("Questions per day", _svg(figure)))
    counts = {**report.statuses, "held back": report.abstained}
    figure, axes = plt.subplots(figsize=CHART_SIZE_IN)
    names = list(counts)
    axes.barh(names, [counts[n] for n in names], color=[STATUS_COLOURS[n] for n in names])
    axes.invert_yaxis()
    axes.set_title("Outcomes")
    drawn.append(Chart("Outcomes", _svg(figure)))
    plt.close("all")
    return drawn


def _svg(figure: object) -> str:
    buffer = io.StringIO()
    figure.tight_layout()  # type: ignore[attr-defined]
    figure.savefig(buffer, format="svg")  # type: ignore[attr-defined]
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # the XML prologue and doctype are not for inline SVG


def _link(url: str) -> str | None:
    return url if urlsplit(url).scheme in LINK_SCHEMES else None
