// The standards advisor's page: its report (GET /openddb/advisor, docs/ADVISOR.md), findings first, then the
// rules it could not check and the observed access patterns. Each finding links to its table and, where its
// evidence names keys, to a query of each key's partition. The report is read as any HTTP client reads it, signed
// with the console's credentials (under --auth verify the server answers the caller's own tables alone): the console
// adds no path of its own. Values are shown as text, never as HTML.
"use strict";

const SEVERITY_LABELS = { error: "Error", warning: "Warning", info: "Info" };
const VALUE_TYPES = new Set(["S", "N", "B"]);

async function advisorReport(table) {
  const parameters = {};
  if (table) parameters.table = table;
  const credentials = Credentials.get();
  if (credentials.given) parameters.region = credentials.region;  // (tables kept per region: the caller's)
  const query = SigV4.canonicalQuery(parameters);
  const headers = SigV4.signGet(credentials, "/openddb/advisor", query, location.host, new Date());
  const mine = generation;
  const response = await fetch(`/openddb/advisor?${query}`, { headers, credentials: "omit", cache: "no-store" });
  const text = await response.text();
  if (mine !== generation) throw new Stale("the advisor's report arrived after the page changed");
  if (response.status === 404) return null;
  if (!response.ok) {
    let answer = {};
    try { answer = JSON.parse(text); } catch (error) { /* (not JSON: shown as it came) */ }
    const type = String(answer.__type || `HTTP ${response.status}`).split("#").pop();
    const error = new ApiError(type, answer.message || answer.Message || text);
    if (AUTH_ERRORS.has(type)) showSignIn(error.message);
    throw error;
  }
  return JSON.parse(text);
}

// The partition key values a finding's evidence names: members named "key" or "..._key" holding a key value
// ({"S": "a"}) or an item's key ({"pk": {"S": "a"}, ...}: its first member, the partition key).
function evidenceKeys(evidence, found = []) {
  if (Array.isArray(evidence)) { for (const value of evidence) evidenceKeys(value, found); return found; }
  if (!evidence || typeof evidence !== "object") return found;
  for (const [name, value] of Object.entries(evidence)) {
    if ((name === "key" || name.endsWith("_key")) && value && typeof value === "object" && !Array.isArray(value)) {
      const typed = Object.keys(value).length === 1 && VALUE_TYPES.has(Object.keys(value)[0])
        ? value : Object.values(value)[0];
      const [type, text] = typed && typeof typed === "object" ? Object.entries(typed)[0] || [] : [];
      if (VALUE_TYPES.has(type) && !found.includes(String(text))) found.push(String(text));
    } else if (typeof value === "object") evidenceKeys(value, found);
  }
  return found.slice(0, 5);
}

const where = (entry) => (entry.account ? `${entry.table} (${entry.account}, ${entry.region})` : entry.table);

function findingRow(finding) {
  const keys = finding.table ? evidenceKeys(finding.evidence) : [];
  const table = finding.table ? tableLink(finding.table) : "(server)";
  return h("tr", { "data-rule": finding.rule },
    h("td", { class: `severity ${finding.severity}` }, SEVERITY_LABELS[finding.severity]),
    h("th", { scope: "row" }, finding.rule),
    h("td", {}, table, finding.account ? ` (${finding.account}, ${finding.region})` : null),
    h("td", {}, finding.message,
      h("details", {}, h("summary", {}, "Evidence, why and the standard"),
        pre(finding.evidence, { "aria-label": `Evidence of ${finding.rule}` }),
        h("p", {}, h("strong", {}, "Why it matters: "), finding.why),
        h("p", {}, h("strong", {}, "Standard: "), finding.standard.statement,
          ` (${finding.standard.sources.join(", ")})`))),
    h("td", {}, keys.map((key) => h("a", { href: `#/query/${encodeURIComponent(finding.table)}/${encodeURIComponent(key)}`,
                                         class: "key" }, `Query ${key}`)).flatMap((link, i) => (i ? [" · ", link] : [link]))),
    h("td", {}, finding.fix));
}

function patternRow(row) {
  return h("tr", {}, h("th", { scope: "row" }, tableLink(row.table), row.account ? ` (${row.account}, ${row.region})` : null),
    [row.operation, row.index || "—", row.key_condition || "—", row.projection, row.consistent_read ? "strong" : "eventual"]
      .map((value) => h("td", {}, value)),
    [row.count, row.refused, row.latency_ms.mean, row.read_units, row.write_units]
      .map((value) => h("td", { class: "number" }, String(value))));
}

function headings(...names) {
  return h("thead", {}, h("tr", {}, names.map((name) => h("th", { scope: "col" }, name))));
}

async function advisorPage(table) {
  const nav = () => (table ? [tableNav(table, "advisor")] : []);
  page(table ? `Advisor: ${table}` : "Advisor", ...nav(), h("p", {}, "Loading…"));
  const report = await advisorReport(table);
  if (report === null) {
    refill(...nav(), h("p", {}, "The standards advisor is off on this server: start it with ",
      h("code", {}, "openddb serve --advisor on"), " (docs/ADVISOR.md)."));
    return;
  }
  const filter = input({ name: "advisor-table", value: table || "" });
  const form = h("form", { role: "search", onsubmit: (event) => {
    event.preventDefault();
    location.hash = filter.value.trim() ? `#/advisor/${encodeURIComponent(filter.value.trim())}` : "#/advisor";
  } }, field("Table", filter, "Empty: every table"), h("button", { type: "submit" }, "Show"));
  const { findings, window: seen } = report;
  const sampled = seen.requests_passed_over ? ` (${seen.requests_passed_over} of them passed over and counted from a sample)` : "";
  refill(...nav(), form,
    h("p", { "data-testid": "advisor-summary" },
      `${findings.length} finding${findings.length === 1 ? "" : "s"} over ${seen.requests_observed} observed requests${sampled}; `
      + `configuration: ${seen.configuration}.`),
    h("h2", {}, "Findings"),
    findings.length === 0 ? h("p", {}, "No finding: the traffic seen keeps every rule checked.")
      : h("div", { class: "scroll" }, h("table", { class: "findings" },
        h("caption", {}, "Errors first, then warnings, then infos"),
        headings("Severity", "Rule", "Table", "What was seen", "Keys", "How to fix"),
        h("tbody", {}, findings.map(findingRow)))),
    h("h2", {}, "Observed access patterns"),
    report.access_patterns.length === 0 ? h("p", {}, "No traffic observed yet.")
      : h("div", { class: "scroll" }, h("table", { class: "patterns" },
        headings("Table", "Operation", "Index", "Key condition", "Projection", "Consistency", "Count", "Refused", "Mean ms",
                 "Read units", "Write units"),
        h("tbody", {}, report.access_patterns.map(patternRow)))),
    h("h2", {}, "Not checked"),
    h("ul", {}, report.not_checked.map((entry) =>
      h("li", {}, h("strong", {}, entry.rule), ` ${entry.table ? where(entry) : "(server)"}: ${entry.reason}`))));
}

NAV.push(["#/advisor", "Advisor"]);
ROUTES.advisor = (table) => advisorPage(table);
