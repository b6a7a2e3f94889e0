"""What `kbisect history` prints and writes: a text or markdown table, JSON, and with
--out history.json, history.png and history.html (one static self-contained page: the
PNG inline as base64, no script, no external file; a CI artifact or GitHub Pages can
serve it as is)."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from kbisect.core import atomic
from kbisect.history import series
from kbisect.history.series import History, Point
from kbisect.report import plots

SIDE_B = plots.SIDE_COLOURS["B"]
PNG = "history.png"
HTML = "history.html"
JSON = "history.json"


def _ci(p: Point) -> str:
    return f"[{p.low:.1f}, {p.high:.1f}]" if p.low is not None and p.high is not None else "-"


def _ratio(p: Point) -> str:
    r = p.ratio
    if r is None:
        return "-"
    if r.low == r.high:
        return f"{r.ratio:.3f}x"
    return f"{r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}]"


def rows(h: History) -> list[list[str]]:
    steps = {s.index: s for s in h.steps}
    out = []
    for i, p in enumerate(h.points):
        note = "baseline" if i == h.baseline else ""
        if i in steps:
            note = f"{steps[i].kind} step".strip() if not note else f"{note}, {steps[i].kind} step"
        out.append([p.key, str(p.n), f"{p.mean:.1f}", _ci(p), _ratio(p), note])
    return out


HEAD = ["point", "n", "mean tps", "95% CI", "ratio to baseline", ""]


def findings(h: History) -> list[str]:
    out = [
        f"{len(h.points)} points of {h.scenario or 'the scenario'}"
        + (f" on {h.machine}" if h.machine else "")
        + f", by {h.by}; baseline {h.points[h.baseline].key}; left out: "
        f"{h.failed} failed, {h.disturbed} disturbed samples"
    ]
    for s in h.steps:
        out.append(f"{s.kind} {series.describe(h, s)} (|z| {abs(s.z):.1f} > {s.threshold:.1f})")
    if not h.steps:
        out.append("no change point")
    d = h.drift
    if d is None:
        out.append("drift: fewer than 3 points from the baseline on: not judged")
    elif d.flagged:
        out.append(f"drift ({d.kind}): " + "; ".join(d.reasons))
    else:
        out.append(f"no drift (slope {d.moved:+.1%} over {d.points} points, p = {d.slope_p:.2g})")
    out += [f"REGRESSION: {a}" for a in h.alarms]
    return out


def text(h: History) -> str:
    table = [HEAD, *rows(h)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return "\n".join([*lines, "", *findings(h)]) + "\n"


def markdown(h: History) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(r) + " |" for r in rows(h)]
    return (
        "\n".join(["## kbisect history", "", *lines, "", *(f"- {f}" for f in findings(h))]) + "\n"
    )


def as_json(h: History) -> str:
    return json.dumps(h.as_dict(), indent=2, sort_keys=True) + "\n"


def png(h: History) -> bytes:
    """The means with their intervals along the series, the baseline's level, the change
    points as vertical lines, each segment's level."""
    fig = plots.figure(max(8.0, 0.35 * len(h.points)), 4.5, bottom=0.3)
    ax = fig.add_subplot()
    x = list(range(len(h.points)))
    ys = [p.mean for p in h.points]
    lows = [p.mean - (p.low if p.low is not None else p.mean) for p in h.points]
    highs = [(p.high if p.high is not None else p.mean) - p.mean for p in h.points]
    ax.errorbar(x, ys, yerr=[lows, highs], fmt="o", color=plots.SIDE_COLOURS["A"], capsize=3)
    ax.axhline(ys[h.baseline], color=plots.OTHER_COLOUR, linestyle=":", label="baseline")
    fitting = [lv for lv in h.levels if lv.fits]  # none through points it does not fit
    for i, lv in enumerate(fitting):
        label = "level" if i == 0 else None
        ax.hlines(lv.tps, lv.start - 0.4, lv.end - 0.6, SIDE_B, linewidth=2, label=label)
    for s in h.steps:
        colour = plots.VERDICT_COLOURS["bad" if s.kind == "regression" else "good"]
        ax.axvline(s.index - 0.5, color=colour, linestyle="--", linewidth=1.2)
    ax.set_xticks(x)
    ax.set_xticklabels([p.key for p in h.points], rotation=60, ha="right", fontsize=7)
    title = f"{h.scenario or 'tps'} by {h.by}" + (": REGRESSION" if h.alarms else "")
    plots.frame(ax, title)
    ax.legend(fontsize=8, loc="lower left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def page(h: History, image: bytes) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in HEAD)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>\n" for r in rows(h))
    items = "".join(f"<li>{e(f)}</li>\n" for f in findings(h))
    status = "regression flagged" if h.alarms else "no regression flagged"
    src = "data:image/png;base64," + base64.b64encode(image).decode()
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:1em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 6px;"
        "text-align:right}td:first-child{text-align:left}img{max-width:100%}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>kbisect history: {e(h.scenario)}</title><style>{style}</style></head>\n"
        f'<body><h1>kbisect history: {e(h.scenario)}</h1>\n<p id="status">{e(status)}</p>\n'
        f'<img id="plot" alt="tps by {e(h.by)}" src="{src}">\n<ul>\n{items}</ul>\n'
        f'<table id="points"><tr>{head}</tr>\n{body}</table>\n</body></html>\n'
    )


def write(h: History, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    image = png(h)
    atomic.write_bytes(out / PNG, image)
    atomic.write_text(out / HTML, page(h, image))
    atomic.write_text(out / JSON, as_json(h))
    return [out / PNG, out / HTML, out / JSON]
