// The operator dashboard: tasks by status, live (server-sent events read through fetch, so
// the admin token travels in the Authorization header, never in a URL), filters, one
// task's detail, cancel. Every text from the server is set as text, never as markup.
"use strict";

// The statuses, in lifecycle order, and the terminal ones come from the server (summary).
let STATUSES = [];
let TERMINAL = new Set();
const LABEL = new Proxy({}, { get: (_, status) => String(status).replaceAll("_", " ") });
const PAGE = 50;
const AGE = { s: 1, m: 60, h: 3600, d: 86400 };
const AGE_UNIT = { s: "second", m: "minute", h: "hour", d: "day" };

// An age select's choices, from its data-ages ("5m 1h": the admin API's NUMBER+s|m|h|d).
function ageChoices(select) {
  const choices = select.dataset.ages.split(" ").map((age) => {
    const n = Number(age.slice(0, -1));
    const text = `${n} ${AGE_UNIT[age.slice(-1)]}${n === 1 ? "" : "s"}`;
    return el("option", { value: age, text });
  });
  select.replaceChildren(el("option", { value: "", text: "any age" }), ...choices);
}

const state = { token: null, tasks: new Map(), cursor: null, selected: null, tools: new Set(),
  filters: { statuses: new Set(), requestor: "", tool: "", newer: "", older: "" },
  stream: null, summaryTimer: null, epoch: 0 };

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function badge(status) {
  return el("span", { class: `badge ${status}`, text: LABEL[status] || status });
}

function ago(iso) {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 1) return "just now";
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${Math.floor(s % 60)}s ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

function seconds(s) {
  if (s === null || s === undefined) return "";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

// ------------------------------------------------------------------ the API
class Unauthorized extends Error {}

async function api(path, options = {}) {
  const res = await fetch(path, { ...options, cache: "no-store",
    headers: { ...(options.headers || {}), Authorization: `Bearer ${state.token}` } });
  if (res.status === 401) throw new Unauthorized("the token was refused");
  const body = await res.json().catch(() => ({}));
  if (!res.ok && res.status !== 404) throw new Error(body.error || `HTTP ${res.status}`);
  return { status: res.status, body };
}

function filterParams() {
  const p = new URLSearchParams();
  const f = state.filters;
  for (const s of f.statuses) p.append("status", s);
  if (f.requestor) p.set("requestor", f.requestor);
  if (f.tool) p.set("tool", f.tool);
  if (f.newer) p.set("newer_than", f.newer);
  if (f.older) p.set("older_than", f.older);
  return p;
}

function matches(task) {
  const f = state.filters;
  if (f.statuses.size && !f.statuses.has(task.status)) return false;
  if (f.requestor && task.requestor !== f.requestor) return false;
  if (f.tool && task.tool !== f.tool) return false;
  const age = (Date.now() - Date.parse(task.createdAt)) / 1000;
  if (f.newer && age > parseAge(f.newer)) return false;
  if (f.older && age < parseAge(f.older)) return false;
  return true;
}

function parseAge(text) {
  const m = /^(\d+(?:\.\d+)?)([smhd]?)$/.exec(text);
  return m ? Number(m[1]) * AGE[m[2] || "s"] : 0;
}

// ------------------------------------------------------------------ the list
async function loadList(reset) {
  const epoch = reset ? ++state.epoch : state.epoch;
  const p = filterParams();
  p.set("limit", String(PAGE));
  if (!reset && state.cursor) p.set("cursor", state.cursor);
  try {
    const { body } = await api(`api/tasks?${p}`);
    if (epoch !== state.epoch) return;
    if (reset) state.tasks.clear();
    for (const t of body.tasks) state.tasks.set(t.taskId, t);
    state.cursor = body.nextCursor;
    $("problem").hidden = true;
    renderRows();
  } catch (err) {
    handleError(err);
  }
  scheduleSummary(0);
}

function sortedTasks() {
  return [...state.tasks.values()].sort((a, b) =>
    a.createdAt === b.createdAt ? (a.taskId < b.taskId ? 1 : -1) : (a.createdAt < b.createdAt ? 1 : -1));
}

function row(task) {
  return el("tr", { "data-id": task.taskId, "data-status": task.status,
    class: task.taskId === state.selected ? "selected" : null, onclick: () => select(task.taskId) },
  el("td", { class: "id", title: task.taskId, text: task.taskId }),
  el("td", {}, badge(task.status)),
  el("td", { text: task.tool || "—" }),
  el("td", { class: "mono", text: task.requestor }),
  el("td", { class: "when", "data-ts": task.createdAt, text: ago(task.createdAt) }),
  el("td", { class: "when", "data-ts": task.lastUpdatedAt, text: ago(task.lastUpdatedAt) }),
  el("td", { class: "msg", title: task.statusMessage || "", text: task.statusMessage || "" }));
}

function renderRows(flashId) {
  const tasks = sortedTasks().filter(matches);
  $("rows").replaceChildren(...tasks.map(row));
  $("empty").hidden = tasks.length > 0;
  $("more").hidden = !state.cursor;
  $("shown").textContent = `· ${tasks.length} shown`;
  $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  if (flashId) {
    const tr = document.querySelector(`tr[data-id="${CSS.escape(flashId)}"]`);
    if (tr) { tr.classList.add("flash"); requestAnimationFrame(() => setTimeout(() => tr.classList.remove("flash"), 60)); }
  }
  for (const t of tasks) if (t.tool) state.tools.add(t.tool);
  $("tools").replaceChildren(...[...state.tools].sort().map((t) => el("option", { value: t })));
}

function upsert(task) {
  const known = state.tasks.has(task.taskId);
  const old = state.tasks.get(task.taskId);
  if (old && old.version > task.version) return;
  if (!known && !matches(task)) return;
  state.tasks.set(task.taskId, task);
  renderRows(task.taskId);
  if (task.taskId === state.selected) select(task.taskId, true);
}

// ------------------------------------------------------------------ status tiles
function scheduleSummary(delay) {
  if (state.summaryTimer) return;
  state.summaryTimer = setTimeout(async () => {
    state.summaryTimer = null;
    const p = filterParams();
    p.delete("status");
    try {
      const { body } = await api(`api/summary?${p}`);
      renderTiles(body);
    } catch (err) {
      handleError(err);
    }
  }, delay);
}

function learnStatuses(summary) {
  if (STATUSES.length) return;
  STATUSES = summary.statuses;
  TERMINAL = new Set(summary.terminal);
  $("status-filter").append(...STATUSES.map((s) => el("label", { class: "chip", "data-status": s },
    el("input", { type: "checkbox", value: s }), LABEL[s])));
  renderRows();
}

function renderTiles(summary) {
  learnStatuses(summary);
  const more = summary.complete ? "" : "+";
  const tile = (status, label, n) => el("button", { type: "button", class: "tile", "data-status": status,
    "aria-pressed": status === "all" ? String(state.filters.statuses.size === 0) : String(state.filters.statuses.has(status)),
    onclick: () => setStatusFilter(status) },
  el("span", { class: "n", text: `${n.toLocaleString()}${more}` }), el("span", { class: "label", text: label }));
  $("tiles").replaceChildren(tile("all", "all tasks", summary.total),
    ...STATUSES.map((s) => tile(s, LABEL[s], summary.counts[s] || 0)));
}

function setStatusFilter(status) {
  state.filters.statuses = status === "all" ? new Set() : new Set([status]);
  for (const box of document.querySelectorAll("#status-filter input")) box.checked = state.filters.statuses.has(box.value);
  loadList(true);
}

// ------------------------------------------------------------------ one task
async function select(id, quiet) {
  state.selected = id;
  for (const tr of document.querySelectorAll("#rows tr")) tr.classList.toggle("selected", tr.dataset.id === id);
  try {
    const { status, body } = await api(`api/tasks/${encodeURIComponent(id)}`);
    if (state.selected !== id) return;
    if (status === 404) return renderGone(id);
    renderDetail(body);
  } catch (err) {
    if (!quiet) handleError(err);
  }
}

function json(value) { return el("pre", { text: JSON.stringify(value, null, 2) }); }

function renderDetail(t) {
  const timing = TERMINAL.has(t.status) ? ["Duration", seconds(t.durationS)] : ["Running for", seconds(t.ageS)];
  const facts = [["Requestor", t.requestor], ["Tool", t.tool || "—"], ["Face", t.face], ["Method", t.method],
    ["Created", `${new Date(t.createdAt).toLocaleString()} (${ago(t.createdAt)})`],
    ["Updated", `${new Date(t.lastUpdatedAt).toLocaleString()} (${ago(t.lastUpdatedAt)})`], timing,
    ["Expires", t.expiresAt ? new Date(t.expiresAt).toLocaleString() : "never"],
    ["Poll interval", t.pollIntervalMs === null ? "—" : `${t.pollIntervalMs} ms`], ["Version", String(t.version)]];
  const parts = [
    el("div", { class: "detail-head" }, badge(t.status),
      el("button", { class: "close", type: "button", title: "Close", text: "×", onclick: closeDetail })),
    el("h3", { class: "mono", text: t.taskId }),
    el("p", { class: "message", text: t.statusMessage || (TERMINAL.has(t.status) ? "Finished." : "Working, no message.") }),
    el("dl", {}, ...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])),
  ];
  if (t.inputRequests && t.inputRequests.length) {
    parts.push(el("h4", { text: `Waiting for the requestor (${t.inputRequests.length})` }),
      el("ul", { class: "inputs" }, ...t.inputRequests.map((i) => el("li", {},
        el("strong", { class: "mono", text: i.method }),
        el("div", { text: (i.params && i.params.message) || "" }), json(i.params)))));
  }
  if (t.result) parts.push(el("h4", { text: t.result.isError ? "Result (isError)" : "Result" }), json(t.result));
  if (t.error) parts.push(el("h4", { text: "Error" }), json(t.error));
  const cancel = el("button", { class: "danger", type: "button", id: "cancel", disabled: TERMINAL.has(t.status),
    text: TERMINAL.has(t.status) ? `Already ${LABEL[t.status]}` : "Cancel task", onclick: () => cancelTask(t.taskId) });
  parts.push(el("div", { class: "detail-actions" }, cancel, el("span", { class: "muted small", id: "cancel-note" })));
  $("detail").replaceChildren(...parts);
  $("detail").hidden = false;
  document.querySelector(".layout").classList.add("with-detail");
}

function renderGone(id) {
  $("detail").replaceChildren(el("div", { class: "detail-head" }, el("strong", { text: "Task gone" }),
    el("button", { class: "close", type: "button", text: "×", onclick: closeDetail })),
  el("p", { class: "mono", text: id }), el("p", { class: "muted", text: "It expired or was deleted." }));
  $("detail").hidden = false;
}

function closeDetail() {
  state.selected = null;
  $("detail").hidden = true;
  document.querySelector(".layout").classList.remove("with-detail");
  for (const tr of document.querySelectorAll("#rows tr.selected")) tr.classList.remove("selected");
}

async function cancelTask(id) {
  if (!window.confirm(`Cancel task ${id}? Its work is stopped wherever it runs.`)) return;
  try {
    const { body } = await api(`api/tasks/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    if (body.task) { upsert(body.task); renderDetail(body.task); }
    $("cancel-note").textContent = body.moved ? "Cancelled." : "It had already ended.";
  } catch (err) {
    handleError(err);
  }
}

// ------------------------------------------------------------------ live updates
async function stream() {
  const mine = {};
  state.stream = mine;
  let delay = 500;
  while (state.stream === mine && state.token) {
    try {
      const res = await fetch("api/events", { cache: "no-store", headers: { Authorization: `Bearer ${state.token}` } });
      if (res.status === 401) throw new Unauthorized("the token was refused");
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setLive("on", "live");
      delay = 500;
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || state.stream !== mine) break;
        buffer += decoder.decode(value, { stream: true });
        let at;
        while ((at = buffer.indexOf("\n\n")) >= 0) {
          onMessage(buffer.slice(0, at));
          buffer = buffer.slice(at + 2);
        }
      }
    } catch (err) {
      if (err instanceof Unauthorized) return handleError(err);
    }
    if (state.stream !== mine) return;
    setLive("retry", "reconnecting…");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 8000);
    loadList(true);
  }
}

function onMessage(chunk) {
  const data = chunk.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
  if (!data) return;
  const event = JSON.parse(data);
  if (event.kind === "created" || event.kind === "status") {
    upsert(event.task);
    scheduleSummary(400);
  } else if (event.kind === "expired") {
    state.tasks.delete(event.taskId);
    renderRows();
    if (state.selected === event.taskId) renderGone(event.taskId);
    scheduleSummary(400);
  } else if (event.kind === "resync") {
    loadList(true);
  }
}

function setLive(mode, text) {
  $("live").dataset.state = mode;
  $("live-text").textContent = text;
}

// ------------------------------------------------------------------ sign-in, filters, clock
function handleError(err) {
  if (err instanceof Unauthorized) {
    signOut(`The token was refused: use this server's admin token.`);
    return;
  }
  $("problem").textContent = `Could not reach the server: ${err.message}`;
  $("problem").hidden = false;
}

// `name`'s value in the address's fragment (`#token=...`), percent-decoded only: not
// URLSearchParams, whose form decoding turns a base64 token's `+` into a space.
function fragmentParam(name) {
  for (const part of location.hash.slice(1).split("&")) {
    const at = part.indexOf("=");
    if (at < 0 || part.slice(0, at) !== name) continue;
    const raw = part.slice(at + 1);
    try { return decodeURIComponent(raw); } catch { return raw; }  // a stray `%`: as given
  }
  return null;
}

function signIn(token) {
  state.token = token;
  sessionStorage.setItem("mcp-tasks-admin-token", token);
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  loadList(true);
  stream();
}

function signOut(message) {
  state.token = null;
  state.stream = null;
  sessionStorage.removeItem("mcp-tasks-admin-token");
  setLive("off", "offline");
  $("app").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("login-error").hidden = !message;
  $("token").focus();
}

function readFilters() {
  const f = state.filters;
  f.statuses = new Set([...document.querySelectorAll("#status-filter input:checked")].map((b) => b.value));
  f.requestor = $("f-requestor").value.trim();
  f.tool = $("f-tool").value.trim();
  f.newer = $("f-newer").value;
  f.older = $("f-older").value;
}

function setup() {
  for (const select of document.querySelectorAll("select[data-ages]")) ageChoices(select);
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); readFilters(); loadList(true); });
  $("reset").addEventListener("click", () => { $("filters").reset(); readFilters(); loadList(true); });
  $("more").addEventListener("click", () => loadList(false));
  $("logout").addEventListener("click", () => signOut());
  $("login-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("token").value.trim()); });
  setInterval(() => {
    for (const td of document.querySelectorAll("td[data-ts]")) td.textContent = ago(td.dataset.ts);
  }, 1000);
  const fromHash = fragmentParam("token");
  if (fromHash) history.replaceState(null, "", location.pathname + location.search);
  const token = fromHash || sessionStorage.getItem("mcp-tasks-admin-token");
  if (token) signIn(token); else signOut();
}

document.addEventListener("DOMContentLoaded", setup);
