"""Time series as text: unicode sparklines, share bars and the rows of ``cdnaas vcdn metrics``."""

BARS = "▁▂▃▄▅▆▇█"
GAP = " "
#: the figures of a region that ``cdnaas vcdn metrics`` draws: (Point field, label, format)
REGION_FIGURES = (("viewers", "viewers", "{:,.0f}"), ("mos", "MOS", "{:.2f}"),
                  ("watts", "watts", "{:,.1f}"))


#: a spread this small against the values' size is noise, drawn flat rather than magnified
FLAT_SHARE = 0.001


def sparkline(values, low=None, high=None):
    """One bar per value, from ``▁`` at ``low`` to ``█`` at ``high``; None draws a gap.

    :param values: numbers or None, oldest first.
    :param low: the value drawn ``▁`` (default: the least of ``values``).
    :param high: the value drawn ``█`` (default: the greatest of ``values``).
    :returns: a string exactly as long as ``values``; a series without spread (every
        value within :data:`FLAT_SHARE` of its size, e.g. 115.0 and 115.002 W) is drawn
        at mid height, one without numbers is all gaps.
    """
    known = [value for value in values if value is not None]
    if not known:
        return GAP * len(values)
    low = min(known) if low is None else low
    high = max(known) if high is None else high
    top = len(BARS) - 1
    flat = high - low <= FLAT_SHARE * max(abs(high), abs(low))

    def bar(value):
        if value is None:
            return GAP
        if flat:
            return BARS[top // 2]
        return BARS[min(max(round((value - low) / (high - low) * top), 0), top)]

    return "".join(bar(value) for value in values)


def resample(values, width):
    """``values`` squeezed to at most ``width`` entries, each the mean of a run of neighbours.

    :returns: ``values`` as a list when it is no longer than ``width``; else ``width``
        means of consecutive runs (None for a run without numbers), oldest first.
    """
    count = len(values)
    if count <= width:
        return list(values)
    means = []
    for index in range(width):
        run = [value for value in values[index * count // width:(index + 1) * count // width]
               if value is not None]
        means.append(sum(run) / len(run) if run else None)
    return means


def share_bar(share, width=10):
    """``share`` (0-1, None unknown) as a bar of ``width`` cells, e.g. ``███░░░░░░░ 30%``."""
    if share is None:
        return "-"
    filled = round(min(max(share, 0.0), 1.0) * width)
    return f"{'█' * filled}{'░' * (width - filled)} {share:.0%}"


def figure_row(points, figure, label, number_format, width):
    """One figure of a series as text: its sparkline, latest value, least and greatest.

    :param points: ``Point`` objects of the API (``api-spec/im.yaml``), oldest first.
    :param width: the most bars drawn; longer series are resampled (see :func:`resample`).
    :returns: ``{"figure", "chart", "latest", "min", "max"}``, "-" where nothing is known.
    """
    values = [point.get(figure) for point in points]
    known = [value for value in values if value is not None]
    low, high = (min(known), max(known)) if known else (None, None)

    def text(value):
        return "-" if value is None else number_format.format(value)

    return {"figure": label, "chart": sparkline(resample(values, width), low, high),
            "latest": text(values[-1] if values else None), "min": text(low), "max": text(high)}


#: the figures ``cdnaas vcdn traffic`` draws per region: (point field, label, format)
TRAFFIC_FIGURES = (("requests_per_second", "requests/s", "{:,.1f}"),
                   ("bytes_per_second", "bytes/s", "{:,.0f}"),
                   ("hit_ratio", "hit ratio", "{:.1%}"))


def traffic_rows(traffic, width):
    """The rows of ``cdnaas vcdn traffic``: per region, one per figure of TRAFFIC_FIGURES.

    :param traffic: the API's ``Traffic`` answer (``api-spec/im.yaml``).
    """
    return [{"region": series.get("region"),
             **figure_row(series.get("points") or [], figure, label, number_format, width)}
            for series in traffic.get("regions") or []
            for figure, label, number_format in TRAFFIC_FIGURES]


def region_rows(metrics, width):
    """The rows of ``cdnaas vcdn metrics``: per region series, one per figure of REGION_FIGURES.

    :param metrics: the API's ``Metrics`` answer.
    :returns: dicts of :func:`figure_row` plus ``region`` and ``samples`` (its point count).
    """
    rows = []
    for series in metrics.get("series") or []:
        if series.get("scope") != "region":
            continue
        points = series.get("points") or []
        for figure, label, number_format in REGION_FIGURES:
            rows.append({"region": series.get("key"), "samples": len(points),
                         **figure_row(points, figure, label, number_format, width)})
    return rows
