// A table's metrics page: throughput, throttles and latency per minute, from CloudWatch's GetMetricData on the
// server's own port (AWS/DynamoDB names and dimensions), and a partition heat map from its Contributor Insights
// (GetInsightRuleReport: the most accessed partition keys, per minute). Charts are SVG drawn with DOM calls (no
// inline style: the page's Content-Security-Policy allows none), each with its figures as a table too.
"use strict";

const CLOUDWATCH = "GraniteServiceVersion20100801";
const SVG_NS = "http://www.w3.org/2000/svg";
const COLOURS = ["#0b57a4", "#a3160f", "#1b6e20", "#6b3fa0"];  // (each at least 6:1 on white: WCAG AA)
const RANGES = [["900", "last 15 minutes"], ["3600", "last hour"], ["10800", "last 3 hours"]];

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const minute = (epoch) => new Date(epoch * 1000).toISOString().slice(11, 16);
const cloudwatch = (operation, request) => call(operation, request, CLOUDWATCH);

// One chart's series: [{label, points: [[epoch seconds, value], ...]}], drawn over [start, end].
function lineChart(title, unit, series, start, end) {
  const width = 640, height = 180, left = 56, right = 8, top = 10, bottom = 22;
  const highest = Math.max(0, ...series.flatMap((s) => s.points.map(([, value]) => value)));
  const scale = highest > 0 ? highest : 1;
  const x = (at) => left + ((at - start) / Math.max(end - start, 1)) * (width - left - right);
  const y = (value) => top + (1 - value / scale) * (height - top - bottom);
  const lines = series.map((s, i) => svg("polyline", { fill: "none", stroke: COLOURS[i % COLOURS.length], "stroke-width": 2,
    points: s.points.map(([at, value]) => `${x(at).toFixed(1)},${y(value).toFixed(1)}`).join(" ") }));
  const dots = series.flatMap((s, i) => s.points.map(([at, value]) =>
    svg("circle", { cx: x(at).toFixed(1), cy: y(value).toFixed(1), r: 2.5, fill: COLOURS[i % COLOURS.length] })));
  const summary = series.map((s) => `${s.label}: highest ${Math.max(0, ...s.points.map(([, v]) => v))} ${unit}`).join("; ");
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                             "aria-label": `${title}, per minute. ${summary || "no data"}` },
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#4a4a4a" }),
    svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#4a4a4a" }),
    svg("text", { x: left - 4, y: top + 8, "text-anchor": "end", "font-size": 11, fill: "#1a1a1a" }, String(highest)),
    svg("text", { x: left - 4, y: height - bottom, "text-anchor": "end", "font-size": 11, fill: "#1a1a1a" }, "0"),
    svg("text", { x: left, y: height - 6, "font-size": 11, fill: "#1a1a1a" }, minute(start)),
    svg("text", { x: width - right, y: height - 6, "text-anchor": "end", "font-size": 11, fill: "#1a1a1a" }, minute(end)),
    lines, dots);
  const legend = h("ul", { class: "legend" }, series.map((s, i) => h("li", { "data-colour": String(i % COLOURS.length) }, s.label)));
  const times = [...new Set(series.flatMap((s) => s.points.map(([at]) => at)))].sort((a, b) => a - b);
  const data = h("details", {}, h("summary", {}, `${title}: the figures`),
    h("table", { "data-testid": `data-${title}` }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "minute (UTC)"),
      series.map((s) => h("th", { scope: "col" }, s.label)))),
    h("tbody", {}, times.map((at) => h("tr", {}, h("th", { scope: "row" }, minute(at)),
      series.map((s) => h("td", { class: "number" }, String(s.points.find(([when]) => when === at)?.[1] ?? "—"))))))));
  return h("figure", { class: "chart" }, h("figcaption", {}, `${title} (${unit} per minute)`), chart, legend, data);
}

function metricQuery(id, name, stat, dimensions) {
  return { Id: id, Label: name, ReturnData: true, MetricStat: { Period: 60, Stat: stat,
    Metric: { Namespace: "AWS/DynamoDB", MetricName: name, Dimensions: Object.entries(dimensions).map(([Name, Value]) => ({ Name, Value })) } } };
}

const LATENCY_OPERATIONS = ["GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan"];

async function charts(name, start, end) {
  const table = { TableName: name };
  const queries = [metricQuery("read", "ConsumedReadCapacityUnits", "Sum", table),
    metricQuery("write", "ConsumedWriteCapacityUnits", "Sum", table),
    metricQuery("readThrottles", "ReadThrottleEvents", "Sum", table),
    metricQuery("writeThrottles", "WriteThrottleEvents", "Sum", table),
    ...LATENCY_OPERATIONS.map((operation) => metricQuery(`latency${operation}`, "SuccessfulRequestLatency", "Average",
                                                          { TableName: name, Operation: operation }))];
  const answer = await cloudwatch("GetMetricData", { MetricDataQueries: queries, StartTime: start, EndTime: end,
                                                      ScanBy: "TimestampAscending" });
  const byId = Object.fromEntries(answer.MetricDataResults.map((r) => [r.Id, r]));
  const series = (id, label) => ({ label, points: (byId[id]?.Timestamps || []).map((at, i) => [Number(at), byId[id].Values[i]]) });
  const latency = LATENCY_OPERATIONS.map((operation) => series(`latency${operation}`, operation)).filter((s) => s.points.length);
  return [lineChart("Throughput", "capacity units", [series("read", "read units"), series("write", "write units")], start, end),
    lineChart("Throttles", "events", [series("readThrottles", "read throttle events"), series("writeThrottles", "write throttle events")], start, end),
    lineChart("Latency", "ms, average", latency.length ? latency : [{ label: "no successful request", points: [] }], start, end)];
}

// The heat map: a row per partition key among the most accessed, a column per minute, each cell's shade its
// share of the busiest cell (the figure itself in its title and in the table beside).
function heatMap(report, start, end) {
  const contributors = report.Contributors || [];
  if (!contributors.length) return h("p", {}, "No key accessed in this range yet.");
  const minutes = [];
  for (let at = start - (start % 60); at < end; at += 60) minutes.push(at);
  const cell = 14, left = 160, top = 4;
  const highest = Math.max(1, ...contributors.flatMap((c) => c.Datapoints.map((d) => d.ApproximateValue)));
  const rows = contributors.map((contributor, row) => {
    const values = Object.fromEntries(contributor.Datapoints.map((d) => [Math.floor(Number(d.Timestamp) / 60) * 60, d.ApproximateValue]));
    return svg("g", {}, svg("text", { x: left - 6, y: top + row * cell + 11, "text-anchor": "end", "font-size": 11, fill: "#1a1a1a" },
                            contributor.Keys.join(", ").slice(0, 24)),
      minutes.map((at, column) => svg("rect", { x: left + column * cell, y: top + row * cell, width: cell - 1, height: cell - 1,
        fill: "#a3160f", "fill-opacity": ((values[at] || 0) / highest).toFixed(3), stroke: "#c8c8c8", "stroke-width": 0.5 },
        svg("title", {}, `${contributor.Keys.join(", ")} at ${minute(at)}: ${values[at] || 0} requests`))));
  });
  const width = left + minutes.length * cell + 4, height = top + contributors.length * cell + 4;
  const map = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                           "aria-label": `Partition heat map: ${contributors.map((c) => `${c.Keys.join(", ")} ${c.ApproximateAggregateValue}`).join("; ")}` },
    rows);
  const data = h("table", { "data-testid": "heat-keys" }, h("thead", {}, h("tr", {}, ["Partition key", "Requests in the range"]
    .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, contributors.map((c) => h("tr", {}, h("th", { scope: "row" }, c.Keys.join(", ")),
      h("td", { class: "number" }, String(c.ApproximateAggregateValue))))));
  return h("figure", { class: "chart" }, h("figcaption", {}, `Partition heat map: the ${contributors.length} most accessed partition keys, per minute (${minute(start)} to ${minute(end)} UTC; darker: more requests)`),
    h("div", { class: "scroll" }, map), data);
}

async function heatSection(name, start, end, redraw) {
  const insights = await call("DescribeContributorInsights", { TableName: name });
  if (insights.ContributorInsightsStatus !== "ENABLED") {
    return [h("p", {}, `Contributor Insights is ${String(insights.ContributorInsightsStatus).toLowerCase()} on this table: `
      + "the heat map counts the keys it sees once it is on."),
      h("button", { type: "button", onclick: () => attempt(async () => {
        await call("UpdateContributorInsights", { TableName: name, ContributorInsightsAction: "ENABLE" });
        say(`Contributor Insights enabled on ${name}`);
        redraw();
      }) }, "Enable Contributor Insights")];
  }
  const rule = (insights.ContributorInsightsRuleList || []).find((r) => r.includes("-PKC-"));
  if (!rule) return [h("p", {}, "This table's insights count throttled keys only: no access heat map.")];
  const report = await cloudwatch("GetInsightRuleReport", { RuleName: rule, StartTime: start, EndTime: end, Period: 60,
                                                           MaxContributorCount: 10 });
  return [heatMap(report, start, end)];
}

async function metricsPage(name, range = "900") {
  page(`Metrics of ${name}`, tableNav(name, "metrics"), h("p", {}, "Loading…"));
  const seconds = Number(RANGES.some(([value]) => value === range) ? range : "900");
  const end = Math.floor(Date.now() / 1000) + 60;
  const start = end - seconds;
  const chosen = select(RANGES, { name: "range" });
  chosen.value = String(seconds);
  const redraw = () => {  // (a hash unchanged fires no hashchange: the page is drawn again all the same)
    const wanted = `#/metrics/${encodeURIComponent(name)}/${chosen.value}`;
    if (location.hash === wanted) route(); else location.hash = wanted;
  };
  const form = h("form", { onsubmit: (event) => { event.preventDefault(); redraw(); } },
    field("Time range", chosen), h("button", { type: "submit" }, "Show"));
  const drawn = await charts(name, start, end);
  const heat = await heatSection(name, start, end, redraw);
  refill(tableNav(name, "metrics"), form, ...drawn, h("h2", {}, "Partition heat map"), ...heat);
}

ROUTES.metrics = (name, range) => metricsPage(name, range);
