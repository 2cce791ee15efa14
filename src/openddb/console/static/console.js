// The OpenDDB console: one page, hash routes, every action one signed call to the server's own API (POST /).
// Data is always shown through textContent (never as HTML), and the page's Content-Security-Policy allows no
// inline script.
"use strict";

// ---- the API ------------------------------------------------------------------------------------------------
const AUTH_ERRORS = new Set(["UnrecognizedClientException", "InvalidSignatureException",
  "MissingAuthenticationTokenException", "IncompleteSignatureException", "ExpiredTokenException",
  "AccessDeniedException"]);

class ApiError extends Error {
  constructor(type, message) { super(`${type}: ${message}`); this.type = type; }
}

const Credentials = {
  // Kept in sessionStorage: this tab only, gone when it closes. Without credentials given, the console signs
  // with a placeholder key, which a server with --auth off accepts and one with --auth verify refuses.
  get() {
    const saved = sessionStorage.getItem("openddb.credentials");
    return saved ? JSON.parse(saved) : { accessKeyId: "console", secretAccessKey: "console", sessionToken: "",
                                         region: "us-east-1", given: false };
  },
  set(value) { sessionStorage.setItem("openddb.credentials", JSON.stringify({ ...value, given: true })); },
  clear() { sessionStorage.removeItem("openddb.credentials"); },
};

// Bumped by every navigation: an answer that arrives after it belongs to a page no longer shown, and is dropped
// (as a Stale error, which nothing reports) rather than drawn over the new page.
let generation = 0;
class Stale extends Error {}

async function call(operation, request, service = "DynamoDB_20120810") {
  const mine = generation;
  const body = JSON.stringify(request);
  const target = `${service}.${operation}`;
  const headers = SigV4.sign(Credentials.get(), target, body, location.host, new Date());
  const response = await fetch("/", { method: "POST", headers, body, credentials: "omit", cache: "no-store" });
  const text = await response.text();
  const answer = text ? JSON.parse(text) : {};
  if (mine !== generation) throw new Stale(`${operation}: answered after the page changed`);
  if (!response.ok) {
    const type = String(answer.__type || `HTTP ${response.status}`).split("#").pop();
    const error = new ApiError(type, answer.message || answer.Message || "");
    if (AUTH_ERRORS.has(type)) showSignIn(error.message);
    throw error;
  }
  return answer;
}
const streamsCall = (operation, request) => call(operation, request, "DynamoDBStreams_20120810");

async function listAllTables() {
  const names = [];
  let start;
  do {
    const page = await call("ListTables", start ? { ExclusiveStartTableName: start } : {});
    names.push(...page.TableNames);
    start = page.LastEvaluatedTableName;
  } while (start);
  return names;
}

// ---- DOM helpers ------------------------------------------------------------------------------------------
function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return node;
}
let fieldCount = 0;
function field(label, input, hint) {
  const id = input.id || (input.id = `f${++fieldCount}`);
  const hintNode = hint ? h("small", { id: `${id}-hint` }, hint) : null;
  if (hintNode) input.setAttribute("aria-describedby", hintNode.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), input, hintNode);
}
const input = (attributes = {}) => h("input", { type: "text", ...attributes });
function select(options, attributes = {}) {
  return h("select", attributes, options.map(([value, label]) => h("option", { value }, label ?? value)));
}
const pre = (value, attributes = {}) => h("pre", { tabindex: "0", ...attributes },
                                          typeof value === "string" ? value : JSON.stringify(value, null, 2));
const main = () => document.getElementById("main");
let statusTimer;
function say(message, kind = "info") {
  const status = document.getElementById("status");
  status.className = `status ${kind}`;
  status.textContent = message;
  clearTimeout(statusTimer);
  if (kind === "info") statusTimer = setTimeout(() => { status.textContent = ""; status.className = "status"; }, 8000);
}
// Run an action, reporting its failure in the status line (and keeping the page usable).
async function attempt(action) {
  try { return await action(); } catch (error) { if (!(error instanceof Stale)) say(error.message, "error"); return undefined; }
}
function page(title, ...children) {
  const heading = h("h1", { tabindex: "-1" }, title);
  main().replaceChildren(heading, ...children);
  document.title = `${title} · OpenDDB console`;
  heading.focus();
}
// The rest of a page whose heading is already shown: the focus stays where the user has moved it meanwhile.
function refill(...children) {
  main().replaceChildren(main().firstChild, ...children);
}

// ---- values: DynamoDB JSON and plain JSON -----------------------------------------------------------------
const TYPES = ["S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"];
function toPlain(value) {
  const [type, inner] = Object.entries(value)[0];
  switch (type) {
    case "N": { const n = Number(inner); return String(n) === inner ? n : inner; }
    case "NS": return inner.map((n) => (String(Number(n)) === n ? Number(n) : n));
    case "M": return Object.fromEntries(Object.entries(inner).map(([k, v]) => [k, toPlain(v)]));
    case "L": return inner.map(toPlain);
    case "NULL": return null;
    default: return inner;
  }
}
function fromPlain(value, path) {
  if (value === null) return { NULL: true };
  if (typeof value === "string") return { S: value };
  if (typeof value === "boolean") return { BOOL: value };
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`${path}: not a finite number`);
    return { N: String(value) };
  }
  if (Array.isArray(value)) return { L: value.map((v, i) => fromPlain(v, `${path}[${i}]`)) };
  return { M: Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromPlain(v, `${path}.${k}`)])) };
}
function checkTyped(value, path) {
  if (typeof value !== "object" || value === null || Array.isArray(value) || Object.keys(value).length !== 1) {
    throw new Error(`${path}: a value is an object with one type key, such as {"S": "text"}`);
  }
  const [type, inner] = Object.entries(value)[0];
  if (!TYPES.includes(type)) throw new Error(`${path}: unknown type "${type}" (one of ${TYPES.join(", ")})`);
  if ((type === "S" || type === "N" || type === "B") && typeof inner !== "string") {
    throw new Error(`${path}: ${type} takes a string`);
  }
  if (type === "M") Object.entries(inner || {}).forEach(([k, v]) => checkTyped(v, `${path}.${k}`));
  if (type === "L") (inner || []).forEach((v, i) => checkTyped(v, `${path}[${i}]`));
}
// An item from the editor's text: validated here first (so the message points at the attribute), then by the
// server when it is written.
function parseItem(text, format) {
  let parsed;
  try { parsed = JSON.parse(text); } catch (error) { throw new Error(`Not JSON: ${error.message}`); }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error("An item is a JSON object of attributes");
  }
  if (format === "plain") return fromPlain(parsed, "item").M;
  Object.entries(parsed).forEach(([name, value]) => checkTyped(value, name));
  return parsed;
}
function itemText(item, format) {
  return JSON.stringify(format === "plain" ? toPlain({ M: item }) : item, null, 2);
}
const cell = (value) => (value === undefined ? "" : JSON.stringify(toPlain(value)));

// ---- equivalent calls: boto3 and the AWS CLI --------------------------------------------------------------
function pythonLiteral(value, indent = "") {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "string" || typeof value === "number") return JSON.stringify(value);
  const next = indent + "    ";
  if (Array.isArray(value)) {
    return value.length ? `[\n${value.map((v) => next + pythonLiteral(v, next)).join(",\n")},\n${indent}]` : "[]";
  }
  const entries = Object.entries(value);
  return entries.length ? `{\n${entries.map(([k, v]) => `${next}${JSON.stringify(k)}: ${pythonLiteral(v, next)}`)
    .join(",\n")},\n${indent}}` : "{}";
}
function boto3Call(operation, request) {
  const method = operation.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  return `import boto3\n\nclient = boto3.client("dynamodb", endpoint_url=${JSON.stringify(location.origin)}, ` +
    `region_name=${JSON.stringify(Credentials.get().region)})\n` +
    `response = client.${method}(**${pythonLiteral(request)})`;
}
function cliCall(operation, request) {
  const command = operation.replace(/([a-z])([A-Z])/g, "$1-$2").toLowerCase();
  const quoted = `'${JSON.stringify(request).replace(/'/g, "'\\''")}'`;
  return `aws dynamodb ${command} --endpoint-url ${location.origin} --region ${Credentials.get().region} ` +
    `--cli-input-json ${quoted}`;
}
function equivalents(operation, request) {
  return h("section", { class: "equivalents", "aria-label": "The same request elsewhere" },
    h("h3", {}, "Request JSON"), pre(request, { "data-testid": "request-json" }),
    h("h3", {}, "boto3"), pre(boto3Call(operation, request), { "data-testid": "boto3" }),
    h("h3", {}, "AWS CLI"), pre(cliCall(operation, request), { "data-testid": "cli" }));
}

// ---- results ------------------------------------------------------------------------------------------------
function itemsTable(items, keyNames, actions) {
  const names = [...keyNames];
  for (const item of items) for (const name of Object.keys(item)) if (!names.includes(name)) names.push(name);
  const head = h("tr", {}, names.map((n) => h("th", { scope: "col" }, n)), actions ? h("th", { scope: "col" }, "Actions") : null);
  const rows = items.map((item) => h("tr", {}, names.map((n) => h("td", {}, cell(item[n]))),
                                     actions ? h("td", {}, actions(item)) : null));
  return h("div", { class: "scroll" }, h("table", { class: "items" }, h("thead", {}, head), h("tbody", {}, rows)));
}
function writeUnits(answer) {
  const units = answer.ConsumedCapacity?.CapacityUnits ?? 0;
  return `${units} write capacity unit${units === 1 ? "" : "s"}`;
}
function capacityLine(answer) {
  const consumed = [answer.ConsumedCapacity].flat().filter(Boolean);
  const units = consumed.map((c) => `${c.TableName}: ${c.CapacityUnits ?? 0} units` +
    (c.ReadCapacityUnits !== undefined ? ` (${c.ReadCapacityUnits} read)` : "") +
    (c.WriteCapacityUnits !== undefined ? ` (${c.WriteCapacityUnits} write)` : ""));
  return h("p", { "data-testid": "capacity" }, `Consumed capacity: ${units.join("; ") || "none reported"}`);
}

// ---- pages: tables --------------------------------------------------------------------------------------------
const keyText = (schema) => schema.map((k) => `${k.AttributeName} (${k.KeyType === "HASH" ? "partition" : "sort"})`).join(", ");
const tableLink = (name, view = "table") => h("a", { href: `#/${view}/${encodeURIComponent(name)}` }, name);

async function tablesPage() {
  page("Tables", h("p", {}, "Loading…"));
  const names = await listAllTables();
  const descriptions = await Promise.all(names.map((n) => call("DescribeTable", { TableName: n }).then((a) => a.Table)));
  const rows = descriptions.map((t) => h("tr", {},
    h("th", { scope: "row" }, tableLink(t.TableName)), h("td", {}, t.TableStatus), h("td", {}, keyText(t.KeySchema)),
    h("td", {}, [...(t.GlobalSecondaryIndexes || []), ...(t.LocalSecondaryIndexes || [])].map((i) => i.IndexName).join(", ") || "—"),
    h("td", {}, t.BillingModeSummary?.BillingMode === "PAY_PER_REQUEST" ? "on demand"
      : `provisioned ${t.ProvisionedThroughput.ReadCapacityUnits} R / ${t.ProvisionedThroughput.WriteCapacityUnits} W`),
    h("td", { class: "number" }, String(t.ItemCount)), h("td", { class: "number" }, `${t.TableSizeBytes} B`),
    h("td", {}, t.StreamSpecification?.StreamEnabled ? t.StreamSpecification.StreamViewType : "off"),
    h("td", {}, tableLink(t.TableName, "items"), " · ", tableLink(t.TableName, "query"))));
  refill(
    h("p", {}, h("a", { href: "#/create", class: "button" }, "Create table")),
    names.length === 0 ? h("p", {}, "No tables yet.") : h("div", { class: "scroll" }, h("table", {},
      h("caption", {}, `${names.length} table${names.length === 1 ? "" : "s"} (item counts and sizes as DescribeTable reports them)`),
      h("thead", {}, h("tr", {}, ["Name", "Status", "Key", "Indexes", "Capacity", "Items", "Size", "Stream", "Open"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows))));
}

function keyFields(prefix, required) {
  const name = input({ name: `${prefix}-name`, required });
  const type = select([["S", "String"], ["N", "Number"], ["B", "Binary"]], { name: `${prefix}-type` });
  return { name, type, nodes: [field(`${prefix === "hash" ? "Partition" : "Sort"} key name`, name,
    required ? null : "Leave empty for a table without a sort key"), field("Type", type)] };
}

function createPage() {
  const name = input({ name: "table-name", required: true, pattern: "[a-zA-Z0-9_.\\-]{3,255}" });
  const hash = keyFields("hash", true);
  const range = keyFields("range", false);
  const billing = select([["PAY_PER_REQUEST", "On demand"], ["PROVISIONED", "Provisioned"]], { name: "billing" });
  const rcu = input({ type: "number", name: "rcu", min: "1", value: "5" });
  const wcu = input({ type: "number", name: "wcu", min: "1", value: "5" });
  const stream = select([["", "Off"], ["NEW_AND_OLD_IMAGES"], ["NEW_IMAGE"], ["OLD_IMAGE"], ["KEYS_ONLY"]], { name: "stream" });
  const form = h("form", { onsubmit: (event) => { event.preventDefault(); attempt(async () => {
    const definitions = [{ AttributeName: hash.name.value, AttributeType: hash.type.value }];
    const schema = [{ AttributeName: hash.name.value, KeyType: "HASH" }];
    if (range.name.value) {
      definitions.push({ AttributeName: range.name.value, AttributeType: range.type.value });
      schema.push({ AttributeName: range.name.value, KeyType: "RANGE" });
    }
    const request = { TableName: name.value, AttributeDefinitions: definitions, KeySchema: schema, BillingMode: billing.value };
    if (billing.value === "PROVISIONED") {
      request.ProvisionedThroughput = { ReadCapacityUnits: Number(rcu.value), WriteCapacityUnits: Number(wcu.value) };
    }
    if (stream.value) request.StreamSpecification = { StreamEnabled: true, StreamViewType: stream.value };
    await call("CreateTable", request);
    say(`Table ${name.value} created`);
    location.hash = `#/table/${encodeURIComponent(name.value)}`;
  }); } },
    field("Table name", name), h("fieldset", {}, h("legend", {}, "Partition key"), hash.nodes),
    h("fieldset", {}, h("legend", {}, "Sort key (optional)"), range.nodes),
    h("fieldset", {}, h("legend", {}, "Capacity"), field("Billing mode", billing),
      field("Read capacity units", rcu, "Provisioned only"), field("Write capacity units", wcu, "Provisioned only")),
    field("Stream", stream),
    h("button", { type: "submit" }, "Create table"));
  page("Create table", form);
}

function tableNav(name, current) {
  const views = [["table", "Overview"], ["items", "Items"], ["query", "Query"], ["stream", "Stream"],
                 ["metrics", "Metrics"], ["advisor", "Advisor"]];
  return h("nav", { "aria-label": `Table ${name}`, class: "subnav" }, views.map(([view, label]) =>
    h("a", { href: `#/${view}/${encodeURIComponent(name)}`, "aria-current": view === current ? "page" : false }, label)));
}

async function tablePage(name) {
  const table = (await call("DescribeTable", { TableName: name })).Table;
  const ttl = (await call("DescribeTimeToLive", { TableName: name })).TimeToLiveDescription;
  const indexes = [...(table.GlobalSecondaryIndexes || []).map((i) => ({ ...i, kind: "global" })),
                   ...(table.LocalSecondaryIndexes || []).map((i) => ({ ...i, kind: "local" }))];
  const summary = h("dl", { class: "summary" },
    [["Status", table.TableStatus], ["Key", keyText(table.KeySchema)],
     ["Attributes", table.AttributeDefinitions.map((a) => `${a.AttributeName}: ${a.AttributeType}`).join(", ")],
     ["Billing", table.BillingModeSummary?.BillingMode || "PROVISIONED"],
     ["Throughput", `${table.ProvisionedThroughput.ReadCapacityUnits} read / ${table.ProvisionedThroughput.WriteCapacityUnits} write units`],
     ["Items", String(table.ItemCount)], ["Size", `${table.TableSizeBytes} bytes`],
     ["Stream", table.StreamSpecification?.StreamEnabled ? `${table.StreamSpecification.StreamViewType} (${table.LatestStreamArn})` : "off"],
     ["Time to live", ttl.TimeToLiveStatus + (ttl.AttributeName ? ` on ${ttl.AttributeName}` : "")],
     ["ARN", table.TableArn]].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]).flat());
  const indexRows = indexes.map((i) => h("tr", {}, h("th", { scope: "row" }, i.IndexName), h("td", {}, i.kind),
    h("td", {}, keyText(i.KeySchema)), h("td", {}, i.Projection.ProjectionType), h("td", {}, i.IndexStatus || "ACTIVE"),
    h("td", { class: "number" }, String(i.ItemCount ?? "")),
    h("td", {}, i.kind === "global" ? h("button", { type: "button", onclick: () => deleteIndex(name, i.IndexName) },
      `Delete index ${i.IndexName}`) : "")));
  page(`Table ${name}`, tableNav(name, "table"), summary,
    h("h2", {}, "Indexes"), indexes.length ? h("table", {}, h("thead", {}, h("tr", {},
      ["Name", "Kind", "Key", "Projection", "Status", "Items", ""].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, indexRows)) : h("p", {}, "No secondary indexes."),
    addIndexForm(table), throughputForm(table), ttlForm(name, ttl), streamForm(table), deleteTableForm(name));
}

async function update(request, done) {
  await attempt(async () => {
    await call("UpdateTable", request);
    say(done);
    await route();
  });
}
async function deleteIndex(table, index) {
  if (!confirm(`Delete index ${index} of ${table}?`)) return;
  await update({ TableName: table, GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: index } }] }, `Index ${index} deleted`);
}

function addIndexForm(table) {
  const name = input({ name: "index-name", required: true });
  const hash = keyFields("hash", true);
  const range = keyFields("range", false);
  const projection = select([["ALL"], ["KEYS_ONLY"]], { name: "projection" });
  return h("form", { "aria-labelledby": "add-index", onsubmit: (event) => { event.preventDefault();
    const definitions = [{ AttributeName: hash.name.value, AttributeType: hash.type.value }];
    const schema = [{ AttributeName: hash.name.value, KeyType: "HASH" }];
    if (range.name.value) {
      definitions.push({ AttributeName: range.name.value, AttributeType: range.type.value });
      schema.push({ AttributeName: range.name.value, KeyType: "RANGE" });
    }
    const create = { IndexName: name.value, KeySchema: schema, Projection: { ProjectionType: projection.value } };
    if (table.BillingModeSummary?.BillingMode !== "PAY_PER_REQUEST") {
      create.ProvisionedThroughput = { ReadCapacityUnits: 5, WriteCapacityUnits: 5 };
    }
    update({ TableName: table.TableName, AttributeDefinitions: definitions,
             GlobalSecondaryIndexUpdates: [{ Create: create }] }, `Index ${name.value} is being created`);
  } }, h("h2", { id: "add-index" }, "Add a global secondary index"), field("Index name", name),
    h("fieldset", {}, h("legend", {}, "Index partition key"), hash.nodes),
    h("fieldset", {}, h("legend", {}, "Index sort key (optional)"), range.nodes),
    field("Projection", projection), h("button", { type: "submit" }, "Add index"));
}

function throughputForm(table) {
  const billing = select([["PAY_PER_REQUEST", "On demand"], ["PROVISIONED", "Provisioned"]], { name: "billing" });
  billing.value = table.BillingModeSummary?.BillingMode || "PROVISIONED";
  const rcu = input({ type: "number", name: "rcu", min: "1", value: String(table.ProvisionedThroughput.ReadCapacityUnits || 5) });
  const wcu = input({ type: "number", name: "wcu", min: "1", value: String(table.ProvisionedThroughput.WriteCapacityUnits || 5) });
  return h("form", { "aria-labelledby": "capacity", onsubmit: (event) => { event.preventDefault();
    const request = { TableName: table.TableName, BillingMode: billing.value };
    if (billing.value === "PROVISIONED") {
      const throughput = { ReadCapacityUnits: Number(rcu.value), WriteCapacityUnits: Number(wcu.value) };
      request.ProvisionedThroughput = throughput;
      // Leaving on-demand, every global index needs its own throughput too (the same, here).
      if (table.BillingModeSummary?.BillingMode === "PAY_PER_REQUEST" && table.GlobalSecondaryIndexes?.length) {
        request.GlobalSecondaryIndexUpdates = table.GlobalSecondaryIndexes.map((i) =>
          ({ Update: { IndexName: i.IndexName, ProvisionedThroughput: throughput } }));
      }
    }
    update(request, "Capacity updated");
  } }, h("h2", { id: "capacity" }, "Capacity"), field("Billing mode", billing),
    field("Read capacity units", rcu), field("Write capacity units", wcu), h("button", { type: "submit" }, "Update capacity"));
}

function ttlForm(name, ttl) {
  const enabled = ttl.TimeToLiveStatus === "ENABLED" || ttl.TimeToLiveStatus === "ENABLING";
  const attribute = input({ name: "ttl-attribute", value: ttl.AttributeName || "", required: true });
  return h("form", { "aria-labelledby": "ttl", onsubmit: (event) => { event.preventDefault(); attempt(async () => {
    await call("UpdateTimeToLive", { TableName: name,
      TimeToLiveSpecification: { Enabled: !enabled, AttributeName: attribute.value } });
    say(`Time to live ${enabled ? "disabled" : "enabled"}`);
    await route();
  }); } }, h("h2", { id: "ttl" }, "Time to live"), field("Attribute (epoch seconds)", attribute),
    h("button", { type: "submit" }, enabled ? "Disable time to live" : "Enable time to live"));
}

function streamForm(table) {
  const on = table.StreamSpecification?.StreamEnabled;
  const view = select([["NEW_AND_OLD_IMAGES"], ["NEW_IMAGE"], ["OLD_IMAGE"], ["KEYS_ONLY"]], { name: "stream-view" });
  return h("form", { "aria-labelledby": "stream-settings", onsubmit: (event) => { event.preventDefault();
    update({ TableName: table.TableName, StreamSpecification: on ? { StreamEnabled: false }
      : { StreamEnabled: true, StreamViewType: view.value } }, on ? "Stream disabled" : "Stream enabled");
  } }, h("h2", { id: "stream-settings" }, "Stream"), on ? null : field("View type", view),
    h("button", { type: "submit" }, on ? "Disable stream" : "Enable stream"));
}

function deleteTableForm(name) {
  const confirmation = input({ name: "confirm-delete", autocomplete: "off" });
  return h("form", { "aria-labelledby": "delete-table", onsubmit: (event) => { event.preventDefault(); attempt(async () => {
    if (confirmation.value !== name) throw new Error(`Type the table's name, ${name}, to delete it`);
    await call("DeleteTable", { TableName: name });
    say(`Table ${name} deleted`);
    location.hash = "#/tables";
  }); } }, h("h2", { id: "delete-table" }, "Delete table"),
    field("Type the table's name to confirm", confirmation), h("button", { type: "submit", class: "danger" }, "Delete table"));
}

// ---- pages: items ---------------------------------------------------------------------------------------------
function keyOf(item, schema) {
  return Object.fromEntries(schema.map((k) => [k.AttributeName, item[k.AttributeName]]));
}

function itemEditor(table, onSaved) {
  const format = select([["ddb", "DynamoDB JSON"], ["plain", "Plain JSON"]], { name: "item-format" });
  const text = h("textarea", { name: "item", rows: "12", spellcheck: "false" });
  const problem = h("p", { class: "problem", role: "alert" });
  let lastFormat = "ddb";
  format.addEventListener("change", () => {
    try { text.value = itemText(parseItem(text.value || "{}", lastFormat), format.value); lastFormat = format.value; }
    catch (error) { format.value = lastFormat; problem.textContent = error.message; }
  });
  const form = h("form", { "aria-labelledby": "editor", onsubmit: (event) => { event.preventDefault();
    problem.textContent = "";
    let item;
    try { item = parseItem(text.value, format.value); } catch (error) { problem.textContent = error.message; return; }
    attempt(async () => {
      let answer;
      try { answer = await call("PutItem", { TableName: table.TableName, Item: item, ReturnConsumedCapacity: "TOTAL" }); }
      catch (error) { problem.textContent = error.message; throw error; }
      say(`Item saved (${writeUnits(answer)})`);
      await onSaved();
    });
  } }, h("h2", { id: "editor" }, "Edit item"), field("Format", format,
      "DynamoDB JSON keeps every type (sets, binary, exact numbers); plain JSON numbers are JavaScript numbers"),
    field("Item", text, "Saving writes the whole item (PutItem); changing its key writes a new item"),
    problem, h("button", { type: "submit" }, "Save item"));
  form.load = (item) => { format.value = lastFormat = "ddb"; text.value = itemText(item, "ddb"); problem.textContent = ""; text.focus(); };
  return form;
}

async function itemsPage(name) {
  const table = (await call("DescribeTable", { TableName: name })).Table;
  const keyNames = table.KeySchema.map((k) => k.AttributeName);
  const results = h("div", {});
  const pages = [undefined];  // the ExclusiveStartKey of each page seen
  let index = 0;
  const editor = itemEditor(table, () => show(index));
  async function show(at) {
    const request = { TableName: name, Limit: 25 };
    if (pages[at]) request.ExclusiveStartKey = pages[at];
    const answer = await call("Scan", request);
    index = at;
    pages[at + 1] = answer.LastEvaluatedKey;
    const previous = h("button", { type: "button", disabled: at === 0, onclick: () => attempt(() => show(at - 1)) }, "Previous page");
    const next = h("button", { type: "button", disabled: !answer.LastEvaluatedKey, onclick: () => attempt(() => show(at + 1)) }, "Next page");
    results.replaceChildren(h("p", { "aria-live": "polite" }, `Page ${at + 1}: ${answer.Count} item${answer.Count === 1 ? "" : "s"}`),
      itemsTable(answer.Items, keyNames, (item) => [
        h("button", { type: "button", onclick: () => editor.load(item) }, "Edit"), " ",
        h("button", { type: "button", class: "danger", onclick: () => attempt(async () => {
          if (!confirm("Delete this item?")) return;
          const answer = await call("DeleteItem", { TableName: name, Key: keyOf(item, table.KeySchema),
                                                    ReturnConsumedCapacity: "TOTAL" });
          say(`Item deleted (${writeUnits(answer)})`);
          await show(index);
        }) }, "Delete")]),
      h("div", { class: "pager" }, previous, " ", next));
  }
  page(`Items of ${name}`, tableNav(name, "items"),
    h("p", {}, h("button", { type: "button", onclick: () => editor.load(Object.fromEntries(table.KeySchema.map((k) => {
      const type = table.AttributeDefinitions.find((a) => a.AttributeName === k.AttributeName).AttributeType;
      return [k.AttributeName, { [type]: type === "N" ? "0" : "" }];
    }))) }, "New item")),
    results, editor);
  await show(0);
}

// ---- pages: query builder -------------------------------------------------------------------------------------
const SORT_OPERATORS = [["", "no condition"], ["=", "="], ["<", "<"], ["<=", "<="], [">", ">"], [">=", ">="],
                        ["between", "between"], ["begins_with", "begins with"]];

function queryForm(table) {
  const sources = [[table.TableName, `table ${table.TableName}`],
    ...[...(table.GlobalSecondaryIndexes || []), ...(table.LocalSecondaryIndexes || [])].map((i) => [i.IndexName, `index ${i.IndexName}`])];
  const f = {
    operation: select([["Query", "Query (one partition)"], ["Scan", "Scan (the whole table or index)"]], { name: "operation" }),
    source: select(sources, { name: "source" }), partition: input({ name: "partition" }),
    operator: select(SORT_OPERATORS, { name: "sort-operator" }), sort: input({ name: "sort" }), sort2: input({ name: "sort-to" }),
    filter: input({ name: "filter" }), names: input({ name: "names" }), values: input({ name: "values" }),
    projection: input({ name: "projection" }), consistent: h("input", { type: "checkbox", name: "consistent" }),
    direction: select([["true", "ascending"], ["false", "descending"]], { name: "direction" }),
    limit: input({ type: "number", name: "limit", min: "1" }),
  };
  const labels = { partition: h("span", {}), sort: h("span", {}) };
  return { f, labels, sources };
}

function schemaOf(table, source) {
  const index = [...(table.GlobalSecondaryIndexes || []), ...(table.LocalSecondaryIndexes || [])].find((i) => i.IndexName === source);
  return (index || table).KeySchema;
}

// The Query (or Scan) request the form describes: the key condition written behind placeholders (#pk, :pk, #sk,
// :sk, :sk2) beside the user's own names and values.
function buildRead(table, f) {
  const names = f.names.value.trim() ? JSON.parse(f.names.value) : {};
  const values = f.values.value.trim() ? JSON.parse(f.values.value) : {};
  const request = { TableName: table.TableName };
  if (f.source.value !== table.TableName) request.IndexName = f.source.value;
  if (f.operation.value === "Query") request.KeyConditionExpression = keyCondition(table, f, names, values);
  if (f.filter.value.trim()) request.FilterExpression = f.filter.value.trim();
  if (f.projection.value.trim()) request.ProjectionExpression = f.projection.value.trim();
  if (Object.keys(names).length) request.ExpressionAttributeNames = names;
  if (Object.keys(values).length) request.ExpressionAttributeValues = values;
  if (f.consistent.checked) request.ConsistentRead = true;
  if (f.operation.value === "Query" && f.direction.value === "false") request.ScanIndexForward = false;
  if (f.limit.value) request.Limit = Number(f.limit.value);
  request.ReturnConsumedCapacity = request.IndexName ? "INDEXES" : "TOTAL";
  return request;
}

function keyCondition(table, f, names, values) {
  const schema = schemaOf(table, f.source.value);
  const typeOf = (name) => table.AttributeDefinitions.find((a) => a.AttributeName === name).AttributeType;
  const hash = schema.find((k) => k.KeyType === "HASH").AttributeName;
  const range = schema.find((k) => k.KeyType === "RANGE")?.AttributeName;
  names["#pk"] = hash;
  values[":pk"] = { [typeOf(hash)]: f.partition.value };
  let condition = "#pk = :pk";
  const op = f.operator.value;
  if (range && op) {
    names["#sk"] = range;
    values[":sk"] = { [typeOf(range)]: f.sort.value };
    if (op === "between") {
      values[":sk2"] = { [typeOf(range)]: f.sort2.value };
      condition += " AND #sk BETWEEN :sk AND :sk2";
    } else if (op === "begins_with") condition += " AND begins_with(#sk, :sk)";
    else condition += ` AND #sk ${op} :sk`;
  }
  return condition;
}

// `key`: a partition key value to query at once (the advisor's links to the keys its findings name).
async function queryPage(name, key) {
  const table = (await call("DescribeTable", { TableName: name })).Table;
  const { f } = queryForm(table);
  const shown = h("div", {});
  const results = h("div", { "aria-live": "polite" });
  let startKey;
  const refresh = () => {
    const schema = schemaOf(table, f.source.value);
    f.partition.previousSibling.textContent = `Partition key: ${schema.find((k) => k.KeyType === "HASH").AttributeName} =`;
    const range = schema.find((k) => k.KeyType === "RANGE");
    f.operator.previousSibling.textContent = range ? `Sort key: ${range.AttributeName}` : "Sort key (none on this source)";
    const scan = f.operation.value === "Scan";
    f.operator.disabled = !range || scan;
    f.partition.disabled = f.sort.disabled = f.sort2.disabled = f.direction.disabled = scan;
    f.sort2.parentNode.hidden = f.operator.value !== "between";
    try { shown.replaceChildren(equivalents(f.operation.value, buildRead(table, f))); }
    catch (error) { shown.replaceChildren(h("p", { class: "problem" }, `Not yet a request: ${error.message}`)); }
  };
  const run = (from) => attempt(async () => {
    const request = buildRead(table, f);
    if (from) request.ExclusiveStartKey = from;
    const answer = await call(f.operation.value, request);
    startKey = answer.LastEvaluatedKey;
    results.replaceChildren(h("h2", {}, "Results"),
      h("p", { "data-testid": "counts" }, `${answer.Count} item${answer.Count === 1 ? "" : "s"} returned, ${answer.ScannedCount} scanned`),
      capacityLine(answer), itemsTable(answer.Items, table.KeySchema.map((k) => k.AttributeName)),
      startKey ? h("button", { type: "button", onclick: () => run(startKey) }, "Next page") : null);
  });
  const form = h("form", { oninput: refresh, onchange: refresh, onsubmit: (event) => { event.preventDefault(); run(); } },
    field("Operation", f.operation), field("Table or index", f.source), field("Partition key", f.partition),
    h("div", { class: "row" }, field("Sort key", f.operator), field("Value", f.sort), field("and", f.sort2)),
    field("Filter expression", f.filter, "For example: price > :min (values below)"),
    field("Expression attribute names (JSON)", f.names, 'For example: {"#s": "status"}'),
    field("Expression attribute values (DynamoDB JSON)", f.values, 'For example: {":min": {"N": "10"}}'),
    field("Projection expression", f.projection), field("Strongly consistent read", f.consistent),
    field("Direction", f.direction), field("Limit", f.limit), h("button", { type: "submit" }, "Run"));
  page(`Query ${name}`, tableNav(name, "query"), form, shown, results);
  if (key !== undefined) f.partition.value = key;
  refresh();
  if (key !== undefined) run();
}

// ---- pages: PartiQL -----------------------------------------------------------------------------------------
function partiqlPage() {
  const statement = h("textarea", { name: "statement", rows: "5", spellcheck: "false" });
  const parameters = input({ name: "parameters" });
  const consistent = h("input", { type: "checkbox", name: "consistent" });
  const results = h("div", { "aria-live": "polite" });
  const run = (token) => attempt(async () => {
    const request = { Statement: statement.value, ReturnConsumedCapacity: "TOTAL" };
    if (parameters.value.trim()) request.Parameters = JSON.parse(parameters.value);
    if (consistent.checked) request.ConsistentRead = true;
    if (token) request.NextToken = token;
    const answer = await call("ExecuteStatement", request);
    results.replaceChildren(h("h2", {}, "Results"), capacityLine(answer),
      h("p", { "data-testid": "counts" }, `Done: ${(answer.Items || []).length} item${(answer.Items || []).length === 1 ? "" : "s"} returned`),
      answer.Items?.length ? itemsTable(answer.Items, []) : null,
      answer.NextToken ? h("button", { type: "button", onclick: () => run(answer.NextToken) }, "Next page") : null,
      equivalents("ExecuteStatement", request));
  });
  page("PartiQL", h("form", { onsubmit: (event) => { event.preventDefault(); run(); } },
    field("Statement", statement, `For example: SELECT * FROM "orders" WHERE pk = ?`),
    field("Parameters (a JSON array of DynamoDB JSON values)", parameters, 'For example: [{"S": "a"}]'),
    field("Strongly consistent read", consistent), h("button", { type: "submit" }, "Run statement")), results);
}

// ---- pages: stream live tail ---------------------------------------------------------------------------------
let tailing = null;  // the running tail: stopped when another page opens

// The stream's shards not yet followed: the open ones, and with `closed` those already closed too (their records
// are still kept until the retention period ends).
async function newShards(arn, known, closed) {
  const shards = [];
  let start;
  do {
    const request = { StreamArn: arn };
    if (start) request.ExclusiveStartShardId = start;
    const description = (await streamsCall("DescribeStream", request)).StreamDescription;
    shards.push(...description.Shards);
    start = description.LastEvaluatedShardId;
  } while (start);
  return shards.filter((s) => !known.has(s.ShardId) && (closed || !s.SequenceNumberRange.EndingSequenceNumber));
}

function recordRow(record) {
  const data = record.dynamodb;
  return h("li", { class: "record" },
    h("strong", {}, record.eventName), ` ${cell({ M: data.Keys })} · seq ${data.SequenceNumber} · ` +
      new Date(data.ApproximateCreationDateTime * 1000).toLocaleTimeString(),
    data.NewImage ? pre(toPlain({ M: data.NewImage })) : null,
    data.OldImage && !data.NewImage ? pre(toPlain({ M: data.OldImage })) : null);
}

async function tail(arn, from, list, state, me) {
  const known = new Set();
  const iterators = new Map();
  const add = async (shards, type) => {
    for (const shard of shards) {
      known.add(shard.ShardId);
      const answer = await streamsCall("GetShardIterator", { StreamArn: arn, ShardId: shard.ShardId, ShardIteratorType: type });
      iterators.set(shard.ShardId, answer.ShardIterator);
    }
  };
  await add(await newShards(arn, known, from === "TRIM_HORIZON"), from);
  state.textContent = `Following ${iterators.size} shard${iterators.size === 1 ? "" : "s"}`;
  while (tailing === me) {
    for (const [shard, iterator] of [...iterators]) {
      const answer = await streamsCall("GetRecords", { ShardIterator: iterator });
      for (const record of answer.Records) list.prepend(recordRow(record));
      if (answer.NextShardIterator) iterators.set(shard, answer.NextShardIterator);
      else iterators.delete(shard);  // closed: its children start where it ended
    }
    await add(await newShards(arn, known, false), "TRIM_HORIZON");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function streamPage(name) {
  const table = (await call("DescribeTable", { TableName: name })).Table;
  if (!table.StreamSpecification?.StreamEnabled) {
    page(`Stream of ${name}`, tableNav(name, "stream"), h("p", {}, "This table's stream is off: ",
      h("a", { href: `#/table/${encodeURIComponent(name)}` }, "enable it in the table's settings"), "."));
    return;
  }
  const arn = table.LatestStreamArn;
  const from = select([["LATEST", "new records only"], ["TRIM_HORIZON", "every record still kept"]], { name: "from" });
  const list = h("ol", { class: "records", "aria-live": "polite", "aria-label": "Stream records, newest first" });
  const state = h("p", { role: "status" }, "Stopped");
  const button = h("button", { type: "button", onclick: () => {
    if (tailing) { tailing = null; button.textContent = "Start tail"; state.textContent = "Stopped"; return; }
    const me = tailing = { arn };
    button.textContent = "Stop tail";
    list.replaceChildren();
    tail(arn, from.value, list, state, me).catch((error) => {
      if (error instanceof Stale) return;
      if (tailing === me) tailing = null;
      button.textContent = "Start tail";
      say(error.message, "error");
    });
  } }, "Start tail");
  page(`Stream of ${name}`, tableNav(name, "stream"), h("p", {}, `${table.StreamSpecification.StreamViewType} · ${arn}`),
    field("Start from", from), button, state, list);
}

// ---- credentials ------------------------------------------------------------------------------------------------
function showSignIn(reason) {
  const dialog = document.getElementById("sign-in");
  document.getElementById("sign-in-reason").textContent = reason ? `The server refused the console's call: ${reason}` : "";
  const current = Credentials.get();
  const form = dialog.querySelector("form");
  form.elements.region.value = current.region;
  form.elements.accessKeyId.value = current.given ? current.accessKeyId : "";
  form.elements.sessionToken.value = current.given ? current.sessionToken : "";
  if (!dialog.open) dialog.showModal();
}

function setUpSignIn() {
  const dialog = document.getElementById("sign-in");
  const form = dialog.querySelector("form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const e = form.elements;
    Credentials.set({ accessKeyId: e.accessKeyId.value.trim(), secretAccessKey: e.secretAccessKey.value,
                      sessionToken: e.sessionToken.value.trim(), region: e.region.value.trim() || "us-east-1" });
    e.secretAccessKey.value = "";
    dialog.close();
    updateIdentity();
    route();
  });
  document.getElementById("sign-in-cancel").addEventListener("click", () => dialog.close());
  document.getElementById("sign-in-open").addEventListener("click", () => showSignIn(""));
  document.getElementById("sign-out").addEventListener("click", () => { Credentials.clear(); updateIdentity(); route(); });
}

function updateIdentity() {
  const current = Credentials.get();
  document.getElementById("identity").textContent = current.given
    ? `Signed as ${current.accessKeyId} (${current.region})` : "Unsigned (any key: for a server with --auth off)";
  document.getElementById("sign-out").hidden = !current.given;
}

// ---- navigation ------------------------------------------------------------------------------------------------
// The console's sections. A new section adds its entry here and its page in ROUTES, once the page has something
// real to show (or does so from a file of its own loaded after this one, as advisor.js does).
const NAV = [["#/tables", "Tables"], ["#/create", "Create table"], ["#/partiql", "PartiQL"]];
const ROUTES = {
  tables: () => tablesPage(), create: () => createPage(), partiql: () => partiqlPage(),
  table: (name) => tablePage(name), items: (name) => itemsPage(name), query: (name, key) => queryPage(name, key),
  stream: (name) => streamPage(name),
};

async function route() {
  const [view, argument, extra] = (location.hash.replace(/^#\/?/, "") || "tables").split("/");
  const decoded = (part) => (part === undefined ? undefined : decodeURIComponent(part));
  generation += 1;
  tailing = null;
  const handler = ROUTES[view];
  for (const link of document.querySelectorAll("#nav a")) {
    link.setAttribute("aria-current", link.getAttribute("href") === `#/${view}` ? "page" : "false");
  }
  if (!handler) { page("Not found", h("p", {}, "No such page. ", h("a", { href: "#/tables" }, "Tables"))); return; }
  try { await handler(decoded(argument), decoded(extra)); }
  catch (error) {
    if (error instanceof Stale) return;
    page("Could not load this page", h("p", { class: "problem" }, error.message));
    say(error.message, "error");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("nav").replaceChildren(...NAV.map(([href, label]) => h("li", {}, h("a", { href }, label))));
  setUpSignIn();
  updateIdentity();
  window.addEventListener("hashchange", route);
  route();
});
