// The MCP gateway's status page: reads the admin JSON endpoints every few seconds.
// The admin token is kept in sessionStorage (this tab only) and sent only in the Authorization
// header to this origin. Everything a backend or a tenant named is inserted as text, never as HTML.
"use strict";

const POLL_MS = 3000;
const SEARCH_DELAY_MS = 250;
const TOKEN_KEY = "mcpgw.admin.token";
const VIEWS = ["backends", "tenants", "catalogue", "reloads"];

const $ = (id) => document.getElementById(id);
const state = {token: sessionStorage.getItem(TOKEN_KEY), view: "backends", timer: null, polling: false,
               catalogueVersion: null, catalogueShown: false, searchTimer: null, searchSeq: 0};

// ---------------------------------------------------------------- building the DOM, as text only

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function cell(label, field, ...children) {
  return el("td", {"data-label": label, "data-field": field}, ...children);
}

function badge(text, kind) {
  return el("span", {class: `badge ${kind}`}, text);
}

function sparkline(series) {
  const values = series.map((v) => (typeof v === "number" ? v : 0));
  if (values.length < 2) return null;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const width = 80, height = 20, top = Math.max(...values) || 1;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("aria-hidden", "true");
  const line = document.createElementNS(ns, "polyline");
  const step = width / (values.length - 1);
  line.setAttribute("points", values.map((v, i) => `${(i * step).toFixed(1)},${(height - 1 - (v / top) * (height - 2)).toFixed(1)}`).join(" "));
  svg.append(line);
  return svg;
}

// ---------------------------------------------------------------- numbers and times

function count(value) {
  return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en");
}

function rate(value) {
  if (value === null || value === undefined) return "–";
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ms`;
}

function percent(value) {
  if (value === null || value === undefined) return "–";
  return `${(value * 100).toFixed(value < 0.1 ? 1 : 0)} %`;
}

function ago(epochSeconds) {
  if (!epochSeconds) return "never";
  const seconds = Math.max(0, Date.now() / 1000 - epochSeconds);
  return `${duration(seconds)} ago`;
}

function duration(seconds) {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86400)} d ${Math.floor((seconds % 86400) / 3600)} h`;
}

function clock(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleString("en-GB", {hour12: false});
}

function plural(n, kinds) {
  return `${count(n)} ${n === 1 ? kinds.slice(0, -1) : kinds}`;
}

function used(now, limit) {
  return el("span", {class: now >= limit ? "full" : null}, `${count(now)} / ${count(limit)}`);
}

// ---------------------------------------------------------------- talking to the gateway

class Refused extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, {method = "GET", token = state.token} = {}) {
  const response = await fetch(path, {method, cache: "no-store", credentials: "omit",
                                      headers: {Authorization: `Bearer ${token}`, Accept: "application/json"}});
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  if (!response.ok) {
    const message = body && body.error && typeof body.error.message === "string" ? body.error.message : response.statusText;
    throw new Refused(response.status, message);
  }
  return body;
}

function windowQuery() {
  return `window=${encodeURIComponent($("window").value)}`;
}

// ---------------------------------------------------------------- signing in and out

function showLogin(message) {
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  stopPolling();
  $("app").hidden = true;
  $("signout").hidden = true;
  $("summary").textContent = "";
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").value = "";
  $("token").focus();
}

async function signIn(token) {
  try {
    const status = await api("status", {token});
    state.token = token;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("app").hidden = false;
    $("signout").hidden = false;
    renderStatus(status);
    showView(viewFromHash(), false);
    startPolling();
  } catch (error) {
    showLogin(refusal(error));
  }
}

function refusal(error) {
  if (error instanceof Refused) {
    const why = error.status === 401 ? "the token is missing, expired or not valid here"
      : error.status === 403 ? "the token lacks the admin scope" : `HTTP ${error.status}`;
    return `Refused: ${why} (${error.message}).`;
  }
  return `The gateway could not be reached (${error.message}).`;
}

// ---------------------------------------------------------------- views

function viewFromHash() {
  const name = location.hash.replace("#", "");
  return VIEWS.includes(name) ? name : "backends";
}

function showView(name, focus) {
  state.view = name;
  for (const view of VIEWS) {
    $(`view-${view}`).hidden = view !== name;
    const link = document.querySelector(`a[data-view="${view}"]`);
    if (view === name) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  if (focus) $(`${name}-title`).focus();
  state.catalogueShown = false;  // listed again when shown; then only when the catalogue changes or a filter does
  poll();
}

// ---------------------------------------------------------------- polling

function startPolling() {
  stopPolling();
  state.timer = setInterval(poll, POLL_MS);
}

function stopPolling() {
  if (state.timer !== null) clearInterval(state.timer);
  state.timer = null;
}

async function poll() {
  if (!state.token || state.polling || document.hidden) return;
  state.polling = true;
  try {
    const [status] = await Promise.all([api("status"), refreshView()]);
    renderStatus(status);
    $("problem").hidden = true;
    $("updated").textContent = `updated ${new Date().toLocaleTimeString("en-GB", {hour12: false})}`;
  } catch (error) {
    if (error instanceof Refused && (error.status === 401 || error.status === 403)) {
      showLogin(refusal(error));
    } else {
      $("problem").textContent = `${refusal(error)} Retrying every ${POLL_MS / 1000} s; the figures below are from before.`;
      $("problem").hidden = false;
    }
  } finally {
    state.polling = false;
  }
}

async function refreshView() {
  if (state.view === "backends") renderBackends(await api(`backends?${windowQuery()}`));
  else if (state.view === "tenants") renderTenants(await api(`tenants?${windowQuery()}`));
  else if (state.view === "catalogue") { if (!state.catalogueShown) await refreshCatalogue(false); }
  else renderReloads(...await Promise.all([api("reloads"), api("replicas")]));
}

// ---------------------------------------------------------------- the summary bar

function renderStatus(status) {
  const gateway = status.gateway, backends = status.backends;
  const ready = gateway.ready ? badge("ready", "up") : badge("not ready", "down");
  ready.title = gateway.not_ready.join("; ");
  $("summary").replaceChildren(...[
    ready, " ",
    el("span", {}, `v${gateway.version}`), " · ",
    el("span", {title: "this replica"}, `replica ${gateway.replica} on ${gateway.host}`), " · ",
    el("span", {}, `config ${gateway.config_version}`), " · ",
    el("span", {}, `up ${duration(gateway.uptime_seconds)}`), " · ",
    el("span", {}, `${backends.up} up, ${backends.degraded} degraded, ${backends.down} down`),
    ...(status.store.kind === "redis" ? [" · ", status.store.up ? badge("Redis up", "up") : badge("Redis down", "down")] : []),
  ]);
  if (state.catalogueVersion !== null && gateway.catalogue_version !== state.catalogueVersion && state.view === "catalogue") {
    refreshCatalogue(false);
  }
  state.catalogueVersion = gateway.catalogue_version;
}

// ---------------------------------------------------------------- backends

const STATE_KIND = {up: "up", degraded: "warn", down: "down", pending: "idle"};

function renderBackends(body) {
  const rows = body.backends.map((b) => {
    const t = b.traffic;
    const items = ["tools", "prompts", "resources", "templates"].filter((k) => b[k]).map((k) => plural(b[k], k));
    const detail = [b.status !== "ok" ? `list ${b.status}` : null, b.circuit !== "closed" ? `circuit ${b.circuit.replace("_", " ")}` : null,
                    b.transport === "stdio" ? (b.pid ? `pid ${b.pid}` : "process not running") : null].filter(Boolean);
    return el("tr", {"data-backend": b.name},
      el("th", {scope: "row", "data-label": "Backend"}, b.name, " ", el("span", {class: "muted"}, b.transport)),
      cell("State", "state", badge(b.state, STATE_KIND[b.state] || "idle"), detail.length ? el("span", {class: "muted detail"}, detail.join(", ")) : null),
      cell("Era", "era", b.era ? `${b.era === "2026" ? "2026" : "handshake"} (${b.protocol_version})` : "unknown yet"),
      cell("Items", "items", items.length ? items.join(", ") : "none"),
      cell("Calls/s", "calls_per_second", el("span", {"data-value": t.calls_per_second ?? ""}, rate(t.calls_per_second)),
           sparkline(t.series), el("span", {class: "muted detail", "data-value": t.calls}, `${count(t.calls)} calls`)),
      cell("p50", "p50_ms", el("span", {"data-value": t.p50_ms ?? ""}, ms(t.p50_ms))),
      cell("p95", "p95_ms", el("span", {"data-value": t.p95_ms ?? ""}, ms(t.p95_ms))),
      cell("Failures", "error_rate", el("span", {"data-value": t.error_rate ?? "", class: t.failed > 0 ? "bad" : null}, percent(t.error_rate)),
           el("span", {class: "muted detail", "data-value": t.failed}, `${count(t.failed)} failed`),
           t.tool_errors ? el("span", {class: "muted detail"}, `${count(t.tool_errors)} tool errors`) : null),
      cell("Restarts", "restarts", b.transport === "stdio" ? count(t.totals.restarts) : "–"),
      cell("Last refresh", "last_refresh", ago(b.last_refresh),
           b.last_error ? el("span", {class: "bad detail"}, b.last_error) : null),
    );
  });
  $("backends-table").tBodies[0].replaceChildren(...rows);
  const states = body.backends.reduce((acc, b) => ({...acc, [b.state]: (acc[b.state] || 0) + 1}), {});
  $("backend-counts").textContent = Object.entries(states).map(([s, n]) => `${n} ${s}`).join(", ") + ` · catalogue ${body.catalogue_version}`;
  announceDown(body.backends);
}

let wasDown = new Set();
function announceDown(backends) {
  const down = new Set(backends.filter((b) => b.state === "down").map((b) => b.name));
  const fresh = [...down].filter((name) => !wasDown.has(name));
  if (fresh.length) $("announce").textContent = `Backend down: ${fresh.join(", ")}`;
  wasDown = down;
}

async function refreshCatalogueNow() {
  $("refresh-result").textContent = "Refreshing…";
  try {
    const body = await api("catalogue/refresh", {method: "POST"});
    $("refresh-result").textContent = `Refreshed: ${body.tools} tools, catalogue ${body.catalogue_version}.`;
    poll();
  } catch (error) {
    $("refresh-result").textContent = error instanceof Refused ? error.message : refusal(error);
  }
}

// ---------------------------------------------------------------- tenants

function renderTenants(body) {
  const rows = body.tenants.map((t) => {
    const w = t.traffic, rl = t.rate_limit;
    return el("tr", {"data-tenant": t.name},
      el("th", {scope: "row", "data-label": "Tenant"}, t.name),
      cell("Sessions", "sessions", used(t.sessions, t.limits.sessions)),
      cell("GET streams", "get_streams", used(t.get_streams, t.limits.streams)),
      cell("Listen streams", "listen_streams", used(t.listen_streams, t.limits.streams)),
      cell("In flight", "in_flight", used(t.in_flight, t.limits.in_flight)),
      cell("Requests/s", "requests_per_second", el("span", {"data-value": w.requests_per_second ?? ""}, rate(w.requests_per_second)),
           el("span", {class: "muted detail"}, rl ? `limit ${rate(rl.requests_per_second)}/s, burst ${rl.burst}` : "no rate limit")),
      cell("Rate-limited", "rate_limited", el("span", {"data-value": w.rate_limited, class: w.rate_limited ? "bad" : null}, count(w.rate_limited)),
           el("span", {class: "muted detail", "data-value": w.totals.rate_limited}, `${count(w.totals.rate_limited)} since start`)),
      cell("Denied", "denied", el("span", {"data-value": w.denied, class: w.denied ? "bad" : null}, count(w.denied)),
           el("span", {class: "muted detail", "data-value": w.totals.denied}, `${count(w.totals.denied)} since start`)),
      cell("Failed", "failed", el("span", {"data-value": w.failed, class: w.failed ? "bad" : null}, count(w.failed)),
           el("span", {class: "muted detail"}, `of ${count(w.requests)} requests`)),
    );
  });
  $("tenants-table").tBodies[0].replaceChildren(...rows);
  fillTenantChoice(body.tenants.map((t) => t.name));
}

function fillTenantChoice(names) {
  const select = $("catalogue-tenant");
  const current = [...select.options].map((o) => o.value);
  if (current.join("\n") === names.join("\n")) return;
  const chosen = select.value;
  select.replaceChildren(...names.map((name) => el("option", {value: name}, name)));
  if (names.includes(chosen)) select.value = chosen;
}

// ---------------------------------------------------------------- catalogue

async function refreshCatalogue(fromInput) {
  if (!$("catalogue-tenant").options.length) fillTenantChoice((await api(`tenants?${windowQuery()}`)).tenants.map((t) => t.name));
  const tenant = $("catalogue-tenant").value;
  if (!tenant) { $("catalogue-count").textContent = "No tenant is configured."; return; }
  const seq = ++state.searchSeq;
  const query = new URLSearchParams({tenant, kind: $("catalogue-kind").value, q: $("catalogue-query").value.trim()});
  for (const field of ["subject", "groups", "scopes"]) {
    const value = $(`caller-${field}`).value.trim();
    if (value) query.set(field, value);
  }
  const body = await api(`catalogue?${query}`);
  if (seq !== state.searchSeq) return;  // a newer search has been sent meanwhile
  const rows = body.items.map((item) => el("tr", {"data-item": item.name},
    el("th", {scope: "row", "data-label": "Name"}, el("code", {}, item.name), item.title ? el("span", {class: "muted detail"}, item.title) : null),
    cell("Kind", "kind", item.kind === "templates" ? "template" : item.kind.slice(0, -1)),
    cell("Backend", "backend", item.backend),
    cell("Original", "original", el("code", {}, item.original)),
    cell("Listed by", "rule", !item.rule ? "tenant" : item.conditional ? `rule ${item.rule}, if the call meets its condition`
         : item.rule === "default" ? "the default" : `rule ${item.rule}`),
    cell("Description", "description", item.description || ""),
  ));
  $("catalogue-table").tBodies[0].replaceChildren(...rows);
  state.catalogueShown = true;
  const shown = body.items.length < body.total ? `${body.items.length} of ${body.total}` : `${body.total}`;
  const caller = body.caller ? ` as ${body.caller.subject || "a caller"}` +
    (body.caller.groups.length ? ` in ${body.caller.groups.join(", ")}` : "") : "";
  $("catalogue-count").textContent = `${shown} ${body.total === 1 ? "item" : "items"} for ${body.tenant}${caller}` +
    (body.query ? ` matching “${body.query}”` : "") + ` · catalogue ${body.catalogue_version}`;
  if (fromInput) $("updated").textContent = `updated ${new Date().toLocaleTimeString("en-GB", {hour12: false})}`;
}

function searchSoon() {
  clearTimeout(state.searchTimer);
  state.searchTimer = setTimeout(() => refreshCatalogue(true).catch(showProblem), SEARCH_DELAY_MS);
}

function showProblem(error) {
  if (error instanceof Refused && (error.status === 401 || error.status === 403)) { showLogin(refusal(error)); return; }
  $("problem").textContent = refusal(error);
  $("problem").hidden = false;
}

// ---------------------------------------------------------------- reloads and replicas

function renderReloads(history, seen) {
  $("config-version").textContent = `config ${history.config_version} on replica ${history.replica}`;
  $("replicas-note").textContent = seen.store === "memory" ? "No shared store: this process is the only replica."
    : seen.store_answered ? `${seen.replicas.length} replica(s) heard from through Redis` +
      (seen.config_versions > 1 ? `, with ${seen.config_versions} different configs: one missed a reload.` : ", all on one config.")
    : "Redis does not answer: only this replica is known.";
  $("replicas-table").tBodies[0].replaceChildren(...seen.replicas.map((r) => el("tr", {"data-replica": r.replica},
    el("th", {scope: "row", "data-label": "Replica"}, r.replica, r.self ? el("span", {class: "muted"}, " (this one)") : null),
    cell("Host", "host", `${r.host} (pid ${r.pid})`),
    cell("Up for", "uptime", duration(r.uptime_seconds || 0)),
    cell("Config", "config_version", el("code", {class: r.config_version !== history.config_version ? "bad" : null}, r.config_version)),
    cell("Catalogue", "catalogue_version", el("code", {}, String(r.catalogue_version).slice(0, 12))),
    cell("Sessions", "sessions", count(r.sessions)),
    cell("In flight", "in_flight", count(r.in_flight)),
    cell("Seen", "seen", ago(r.seen_at)),
  )));
  $("reloads-table").tBodies[0].replaceChildren(...history.reloads.map(reloadRow));
}

function reloadRow(entry) {
  const applied = entry.status === "applied";
  const versions = entry.config_version || {};
  return el("tr", {"data-reload": entry.id},
    el("th", {scope: "row", "data-label": "When"}, clock(entry.at)),
    cell("Replica", "replica", entry.replica),
    cell("Trigger", "trigger", entry.trigger),
    cell("By", "by", entry.by ? `${entry.by.subject} (${entry.by.tenant})` : "–"),
    cell("Outcome", "status", badge(applied ? "applied" : "rejected", applied ? "up" : "down"),
         entry.reason ? el("span", {class: "bad detail"}, entry.reason) : null),
    cell("What changed", "changed", changes(entry)),
    cell("Config", "config", versions.before && versions.before !== versions.after ? `${versions.before} → ${versions.after}` : (versions.after || "")),
  );
}

function changes(entry) {
  if (entry.trigger === "start") return "started";
  if (entry.status !== "applied") return "nothing (the old config goes on)";
  const b = entry.backends || {}, lines = [];
  for (const [what, names] of [["added", b.added], ["removed", b.removed], ["replaced", b.replaced]]) {
    if (names && names.length) lines.push(`backends ${what}: ${names.join(", ")}`);
  }
  if (entry.tenants_changed && entry.tenants_changed.length) lines.push(`tenants: ${entry.tenants_changed.join(", ")}`);
  const keys = entry.changed || [];
  if (keys.length) lines.push(`keys: ${keys.join(", ")}`);
  return lines.length ? el("ul", {class: "plain"}, lines.map((line) => el("li", {}, line))) : "nothing";
}

async function reloadNow() {
  $("reload-result").textContent = "Reloading…";
  try {
    const body = await api("reload", {method: "POST"});
    $("reload-result").textContent = `Applied: config ${body.config_version}.`;
  } catch (error) {
    $("reload-result").textContent = error instanceof Refused ? `Rejected: ${error.message}` : refusal(error);
  }
  poll();
}

// ---------------------------------------------------------------- wiring

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (token) signIn(token); else $("login-error").textContent = "Paste a token first.";
  });
  $("signout").addEventListener("click", () => showLogin("Signed out."));
  window.addEventListener("hashchange", () => { if (state.token) showView(viewFromHash(), true); });
  $("window").addEventListener("change", poll);
  $("refresh").addEventListener("click", refreshCatalogueNow);
  $("reload").addEventListener("click", reloadNow);
  for (const id of ["catalogue-tenant", "catalogue-kind"]) $(id).addEventListener("change", () => refreshCatalogue(true).catch(showProblem));
  for (const id of ["catalogue-query", "caller-subject", "caller-groups", "caller-scopes"]) $(id).addEventListener("input", searchSoon);
  $("catalogue-form").addEventListener("submit", (event) => { event.preventDefault(); refreshCatalogue(true).catch(showProblem); });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  if (state.token) signIn(state.token); else showLogin("");
});
