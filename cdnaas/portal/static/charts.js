// Line charts of a vCDN's metrics as inline SVG markup, drawn by hand: no library, nothing
// fetched. Pure functions of the API's answers, so they can be checked outside a browser.
"use strict";

const CHART_BOX = { width: 320, height: 120, left: 46, right: 10, top: 22, bottom: 20 };
// The figures of a region's Point (api-spec/im.yaml) drawn for each region: field, title, unit.
const REGION_FIGURES = [
  ["viewers", "Viewers", ""],
  ["mos", "Estimated MOS", ""],
  ["watts", "Power", "W"],
];

function escapeXml(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// 16000 -> "16k", 1500 -> "1.5k", 226.78 -> "227", 42.5 -> "42.5", 4.8 -> "4.80".
function formatValue(value) {
  const size = Math.abs(value);
  if (size >= 10000) return `${(value / 1000).toFixed(0)}k`;
  if (size >= 1000) return `${(value / 1000).toFixed(1)}k`;
  if (size >= 100) return value.toFixed(0);
  return value.toFixed(size >= 10 ? 1 : 2);
}

// "2030-01-31T18:00:05.123Z" (or its milliseconds) -> "18:00:05" in UTC.
function clockTime(time) {
  return new Date(time).toISOString().slice(11, 19);
}

// Consecutive known points as runs: a null value ends a run.
function runsOf(points) {
  const runs = [];
  let run = [];
  for (const point of points) {
    if (point.value === null || point.value === undefined) {
      if (run.length) runs.push(run);
      run = [];
    } else {
      run.push(point);
    }
  }
  if (run.length) runs.push(run);
  return runs;
}

// One line chart as SVG markup.
//   points: [{time: ISO text, value: number or null}], oldest first.
//   target: a value drawn as a dashed line (e.g. the region's minimum MOS), or null.
// A null value breaks the line; a point alone between gaps is drawn as a dot.
function lineChart({ title, unit = "", points, target = null }) {
  const box = CHART_BOX;
  const plotWidth = box.width - box.left - box.right;
  const plotHeight = box.height - box.top - box.bottom;
  const known = points.filter((p) => p.value !== null && p.value !== undefined);
  const latest = known.length ? `${formatValue(known[known.length - 1].value)} ${unit}`.trim() : "no data";
  const parts = [
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="${box.width}" height="${box.height}"`
      + ` viewBox="0 0 ${box.width} ${box.height}" role="img" aria-label="${escapeXml(title)}">`,
    `<text class="title" x="${box.left}" y="14">${escapeXml(title)}: ${escapeXml(latest)}</text>`,
    `<rect class="plot" x="${box.left}" y="${box.top}" width="${plotWidth}" height="${plotHeight}"/>`,
  ];
  if (known.length) {
    const values = known.map((p) => p.value).concat(target === null ? [] : [target]);
    let low = Math.min(...values);
    let high = Math.max(...values);
    // A spread under a thousandth of the values' size is noise (an idle host's watts):
    // drawn flat in a band of +-10% rather than magnified to the full height.
    // Figures that are never negative (viewers, watts) keep their axis from 0: no load reads 0 to 1.
    if (high - low <= 0.001 * Math.max(Math.abs(high), Math.abs(low))) {
      const middle = (high + low) / 2;
      const pad = Math.abs(middle) * 0.1 || 1;
      low = low >= 0 ? Math.max(0, middle - pad) : middle - pad;
      high = middle + pad;
    }
    const times = points.map((p) => Date.parse(p.time));
    const first = Math.min(...times);
    const span = Math.max(...times) - first;
    const x = (time) => box.left + (span ? ((Date.parse(time) - first) / span) * plotWidth : plotWidth / 2);
    const y = (value) => box.top + (1 - (value - low) / (high - low)) * plotHeight;
    const at = (number) => number.toFixed(1);
    if (target !== null) {
      parts.push(`<line class="target" x1="${box.left}" x2="${box.left + plotWidth}" y1="${at(y(target))}"`
        + ` y2="${at(y(target))}" stroke-dasharray="4 3"><title>target ${formatValue(target)}</title></line>`);
    }
    for (const run of runsOf(points)) {
      if (run.length === 1) {
        parts.push(`<circle class="line" cx="${at(x(run[0].time))}" cy="${at(y(run[0].value))}" r="2"/>`);
      } else {
        const coordinates = run.map((p) => `${at(x(p.time))},${at(y(p.value))}`).join(" ");
        parts.push(`<polyline class="line" points="${coordinates}"/>`);
      }
    }
    parts.push(
      `<text class="axis" x="${box.left - 4}" y="${box.top + 8}" text-anchor="end">${formatValue(high)}</text>`,
      `<text class="axis" x="${box.left - 4}" y="${box.top + plotHeight}" text-anchor="end">${formatValue(low)}</text>`,
      `<text class="axis" x="${box.left}" y="${box.height - 6}">${clockTime(first)}</text>`,
      `<text class="axis" x="${box.left + plotWidth}" y="${box.height - 6}" text-anchor="end">`
        + `${clockTime(first + span)} UTC</text>`,
    );
  }
  parts.push("</svg>");
  return parts.join("");
}

// A region's charts under its name.
function regionPanel(region, charts) {
  return `<div class="region-charts"><h4>${escapeXml(region)}</h4><div class="charts">${charts.join("")}</div></div>`;
}

// The charts of every region of a Metrics answer (api-spec/im.yaml) as HTML markup:
// per region a heading and one line chart per REGION_FIGURES entry.
//   targets: {region name: minimum MOS}, drawn as a dashed line on the MOS chart.
//   shown: the names of the vCDN's regions now (null: every region of the answer); a region
//   removed within the window still has samples, and is not drawn.
function regionPanels(metrics, targets = {}, shown = null) {
  const regions = (metrics.series || []).filter((series) => series.scope === "region"
    && (shown === null || shown.includes(series.key)));
  if (!regions.length) return `<p class="muted">No samples yet: the Instance Manager records one each pass.</p>`;
  return regions.map((series) => {
    const charts = REGION_FIGURES.map(([field, title, unit]) => lineChart({
      title, unit,
      points: series.points.map((point) => ({ time: point.at, value: point[field] })),
      target: field === "mos" && targets[series.key] !== undefined ? targets[series.key] : null,
    }));
    return regionPanel(series.key, charts);
  }).join("");
}

// The figures of a region's traffic point (api-spec/im.yaml Traffic) drawn for each region:
// field, title, unit, and the scale from the API's unit to the one shown.
const TRAFFIC_FIGURES = [
  ["requests_per_second", "Requests", "/s", 1],
  ["bytes_per_second", "Throughput", "Mbit/s", 8 / 1e6],
  ["hit_ratio", "Cache hit ratio", "%", 100],
];

// The charts of every region of a Traffic answer (api-spec/im.yaml) as HTML markup:
// per region a heading and one line chart per TRAFFIC_FIGURES entry.
function trafficPanels(traffic) {
  const regions = traffic.regions || [];
  if (!regions.length) return `<p class="muted">No traffic in this window yet: the Instance Manager reads the balancers' logs each pass.</p>`;
  return regions.map((series) => {
    const charts = TRAFFIC_FIGURES.map(([field, title, unit, scale]) => lineChart({
      title, unit,
      points: series.points.map((point) => ({
        time: point.at, value: point[field] === null || point[field] === undefined ? null : point[field] * scale })),
    }));
    return regionPanel(series.region, charts);
  }).join("");
}

const CURVE_BOX = { width: 560, height: 280, left: 46, right: 16, top: 40, bottom: 36 };

// QoE curves as one SVG chart: MOS (1-5) against viewers per vCPU, a line and dots per curve,
// each named in a legend. curves: [{label, model, points: [{viewers_per_vcpu, mos}]}] (the
// API's calibration job's `curves`: the calibrated one, then the model it would replace).
function curveChart(title, curves) {
  const box = CURVE_BOX;
  const plotWidth = box.width - box.left - box.right;
  const plotHeight = box.height - box.top - box.bottom;
  const xs = curves.flatMap((curve) => curve.points.map((p) => p.viewers_per_vcpu));
  const top = 1.1 * Math.max(1, ...xs);
  const x = (value) => box.left + (value / top) * plotWidth;
  const y = (mos) => box.top + ((5 - mos) / 4) * plotHeight;
  const at = (number) => number.toFixed(1);
  const parts = [
    `<svg class="chart curves" xmlns="http://www.w3.org/2000/svg" width="${box.width}" height="${box.height}"`
      + ` viewBox="0 0 ${box.width} ${box.height}" role="img" aria-label="${escapeXml(title)}">`,
    `<text class="title" x="${box.left}" y="14">${escapeXml(title)}</text>`,
    `<rect class="plot" x="${box.left}" y="${box.top}" width="${plotWidth}" height="${plotHeight}"/>`,
  ];
  for (const mos of [1, 2, 3, 4, 5]) {
    parts.push(`<text class="axis" x="${box.left - 6}" y="${at(y(mos) + 3)}" text-anchor="end">${mos}</text>`);
  }
  for (let i = 0; i <= 4; i += 1) {
    parts.push(`<text class="axis" x="${at(x((top * i) / 4))}" y="${box.top + plotHeight + 12}"`
      + ` text-anchor="middle">${formatValue((top * i) / 4)}</text>`);
  }
  parts.push(`<text class="axis" x="${box.left + plotWidth / 2}" y="${box.height - 6}" text-anchor="middle">`
    + "concurrent HD viewers per vCPU (MOS on the left)</text>");
  curves.forEach((curve, index) => {
    const coordinates = curve.points.map((p) => `${at(x(p.viewers_per_vcpu))},${at(y(p.mos))}`).join(" ");
    parts.push(`<g class="curve curve-${index}"><title>${escapeXml(curve.label)} (${escapeXml(curve.model)})</title>`,
      `<polyline class="line" points="${coordinates}"/>`,
      ...curve.points.map((p) => `<circle class="line" cx="${at(x(p.viewers_per_vcpu))}" cy="${at(y(p.mos))}" r="3"/>`),
      `<text class="legend" x="${box.left + plotWidth}" y="${box.top - 18 + 12 * index}" text-anchor="end">`
        + `${escapeXml(curve.label)} (${escapeXml(curve.model)})</text></g>`);
  });
  parts.push("</svg>");
  return parts.join("");
}
