/**
 * Chart data from a matplotlib figure, as E2B's `e2b_charts` package extracts it
 * (github.com/e2b-dev/code-interpreter, chart_data_extractor, MIT licence): the result's
 * `chart` with its type (line, scatter, bar, pie, box_and_whisker, superchart for a figure
 * of several axes, unknown), title, axis labels and units, ticks and scales, and elements.
 *
 * A port of that package's logic to plain Python over matplotlib alone: E2B's package
 * builds pydantic 2 models, and Debian ships pydantic 1; the dicts here have the same keys,
 * in the same order, and the same values as its `chart.model_dump()`. Loaded into each
 * IPython kernel as the module `_e2b_charts` (kernel-bridge.ts); the `e2b/chart` formatter
 * (kernel-startup.ts) calls `figure_to_dict`.
 */
export const KERNEL_CHARTS = String.raw`
import re
from datetime import date
from decimal import Decimal, localcontext

import matplotlib
import matplotlib.dates
import numpy
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge
from matplotlib.text import Text

try:
    from matplotlib.dates import _SwitchableDateConverter as _DateConverter
except ImportError:  # matplotlib before 3.5
    from matplotlib.dates import DateConverter as _DateConverter


def dynamic_round(number):
    # 8 significant digits, whatever the magnitude (e2b_charts.utils.rounding).
    d = Decimal(str(number))
    with localcontext() as ctx:
        ctx.prec = max(1, 8 - d.adjusted())
        return float(+d)


def is_grid_line(line):
    x, y = line.get_xdata(), line.get_ydata()
    if len(x) != 2 or len(y) != 2:
        return False
    return bool(x[0] == x[1] or y[0] == y[1])


def _number_or_text(v):
    # pydantic's Union[str, float]: a string stays one, any number is a float.
    if isinstance(v, str):
        return v
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, numpy.datetime64):
        return str(v.astype("datetime64[s]").astype(str))
    return float(v)


def _converter(axis):
    return axis.get_converter() if hasattr(axis, "get_converter") else axis.converter


def _chart(ax, kind):
    title = ax.get_title() if ax is not None else None
    return {"type": kind, "title": title or None, "elements": []}


def _chart2d(ax, kind):
    c = _chart(ax, kind)
    x_label, y_label = ax.get_xlabel() or None, ax.get_ylabel() or None
    c.update({"x_label": x_label, "y_label": y_label, "x_unit": _unit(x_label), "y_unit": _unit(y_label)})
    return c


def _unit(label):
    if not label:
        return None
    m = re.search(r"\s\((.*?)\)|\[(.*?)\]", label)
    return (m.group(1) or m.group(2)) if m else None


def _swap_axes(c):
    c["x_label"], c["y_label"] = c["y_label"], c["x_label"]
    c["x_unit"], c["y_unit"] = c["y_unit"], c["x_unit"]


def _ticks(converter, ticks):
    if isinstance(converter, _DateConverter):
        return [matplotlib.dates.num2date(t).isoformat() for t in ticks]
    if len(ticks) and isinstance(ticks[0], (int, float)):
        return [float(t) for t in ticks]
    return [_number_or_text(t) for t in ticks]


def _scale(converter, scale, ticks, labels):
    if isinstance(converter, _DateConverter):
        return "datetime"
    if scale != "linear":
        return scale
    # Ticks 0..n-1 whose labels are not those numbers: categories.
    for i, (tick, label) in enumerate(zip(ticks, labels)):
        if isinstance(tick, (int, float)) and tick == i and str(i) != label:
            continue
        return "linear"
    return "categorical"


def _point_chart(ax, kind):
    c = _chart2d(ax, kind)
    for axis, get_scale, key in ((ax.xaxis, ax.get_xscale, "x"), (ax.yaxis, ax.get_yscale, "y")):
        labels = [t.get_text() for t in (ax.get_xticklabels() if key == "x" else ax.get_yticklabels())]
        ticks = _ticks(_converter(axis), ax.get_xticks() if key == "x" else ax.get_yticks())
        c[key + "_ticks"] = ticks
        c[key + "_tick_labels"] = labels
        c[key + "_scale"] = _scale(_converter(axis), get_scale(), ticks, labels)
    # pydantic's field order: the x fields, then the y fields.
    order = ["type", "title", "elements", "x_label", "y_label", "x_unit", "y_unit", "x_ticks", "x_tick_labels", "x_scale", "y_ticks", "y_tick_labels", "y_scale"]
    return {k: c[k] for k in order}


def _points(pairs):
    return [[_number_or_text(x), _number_or_text(y)] for x, y in pairs]


def line_chart(ax):
    c = _point_chart(ax, "line")
    for line in ax.get_lines():
        if is_grid_line(line):
            continue
        label = line.get_label()
        if label.startswith("_child"):
            label = "Line %d" % int(label[6:])
        c["elements"].append({"label": str(label), "points": _points(zip(line.get_xdata(), line.get_ydata()))})
    return c


def scatter_chart(ax):
    c = _point_chart(ax, "scatter")
    for collection in ax.collections:
        c["elements"].append({"label": str(collection.get_label()), "points": _points((x, y) for x, y in collection.get_offsets())})
    return c


def bar_chart(ax):
    c = _chart2d(ax, "bar")
    for container in ax.containers:
        group = container.get_label()
        if group.startswith("_container"):
            group = "Group %d" % int(group[10:])
        heights = [rect.get_height() for rect in container]
        if all(h == heights[0] for h in heights):
            # Bars of one height: horizontal bars, their values are the widths.
            _swap_axes(c)
            labels = [t.get_text() for t in ax.get_yticklabels()]
            values = [rect.get_width() for rect in container]
        else:
            labels = [t.get_text() for t in ax.get_xticklabels()]
            values = heights
        for label, value in zip(labels, values):
            c["elements"].append({"label": str(label), "group": str(group), "value": float(value)})
    return c


def box_and_whisker_chart(ax):
    c = _chart2d(ax, "box_and_whisker")
    labels = [t.get_text() for t in ax.get_xticklabels()]
    boxes = []
    for label, box in zip(labels, ax.patches):
        v = box.get_path().vertices
        xs = [dynamic_round(x) for x in v[:, 0]]
        ys = [dynamic_round(y) for y in v[:, 1]]
        x, y = min(xs), min(ys)
        boxes.append({"x": x, "y": y, "label": label, "width": max(xs) - x, "height": max(ys) - y, "outliers": []})
    vertical = all(b["height"] == boxes[0]["height"] for b in boxes)
    if vertical:
        _swap_axes(c)
        for b in boxes:
            b["x"], b["y"] = b["y"], b["x"]
            b["width"], b["height"] = b["height"], b["width"]
    for line in ax.lines:
        xdata = [dynamic_round(x) for x in line.get_xdata()]
        ydata = [dynamic_round(y) for y in line.get_ydata()]
        if vertical:
            xdata, ydata = ydata, xdata
        if len(xdata) == 1:
            box = next((b for b in boxes if b["x"] <= xdata[0] <= b["x"] + b["width"]), None)
            if box is None:
                continue
            box["outliers"].append(ydata[0])
        if len(ydata) != 2:
            continue
        box = next((b for b in boxes if b["x"] <= xdata[0] <= xdata[1] <= b["x"] + b["width"]), None)
        if box is None:
            continue
        if ydata[0] == ydata[1] and box["y"] <= ydata[0] <= box["y"] + box["height"]:
            box["median"] = ydata[0]
            continue
        lower, upper = min(ydata), max(ydata)
        if upper == box["y"]:
            box["whisker_lower"] = lower
        elif lower == box["y"] + box["height"]:
            box["whisker_upper"] = upper
    c["elements"] = [
        {"label": str(b["label"]), "min": float(b["whisker_lower"]), "first_quartile": float(b["y"]), "median": float(b["median"]),
         "third_quartile": float(b["y"] + b["height"]), "max": float(b["whisker_upper"]), "outliers": [float(o) for o in b["outliers"]]}
        for b in boxes
    ]
    return c


def pie_chart(ax):
    c = _chart(ax, "pie")
    for wedge in ax.patches:
        angle = abs(dynamic_round(Decimal(float(wedge.theta2)) - Decimal(float(wedge.theta1))))
        c["elements"].append({"label": str(wedge.get_label()), "angle": float(angle), "radius": float(wedge.r)})
    return c


def chart_type(ax):
    objects = [o for o in ax._children if not isinstance(o, Text)]
    if all(isinstance(o, Line2D) for o in objects):
        return "line"
    if all(isinstance(o, (PathPatch, Line2D)) for o in objects):
        return "box_and_whisker"
    objects = [o for o in objects if not (isinstance(o, Line2D) and is_grid_line(o))]
    if all(isinstance(o, PathCollection) for o in objects):
        return "scatter"
    if all(isinstance(o, Wedge) for o in objects):
        return "pie"
    if all(isinstance(o, Rectangle) for o in objects):
        return "bar"
    return "unknown"


EXTRACT = {"line": line_chart, "scatter": scatter_chart, "bar": bar_chart, "pie": pie_chart, "box_and_whisker": box_and_whisker_chart}


def chart_of_axes(ax):
    kind = chart_type(ax)
    return EXTRACT[kind](ax) if kind in EXTRACT else _chart(ax, kind)


def figure_to_dict(figure):
    axes = figure.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return {}
    if len(axes) > 1:
        suptitle = figure.get_suptitle() if hasattr(figure, "get_suptitle") else (figure._suptitle.get_text() if figure._suptitle else "")
        return {"type": "superchart", "title": suptitle, "elements": [chart_of_axes(ax) for ax in axes]}
    return chart_of_axes(axes[0])
`;
