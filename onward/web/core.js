// What every view of the status page shares: the state, the API call, the contract read from /openapi.json,
// time and problem formatting, and small DOM helpers that change only what changed (so polling never
// rebuilds what the viewer is looking at, reading or focused on).
"use strict";

export const state = {
  token: sessionStorage.getItem("onward.token") || "",
  me: null,            // the credential: {tenant_id, operator} (GET /whoami)
  contract: { types: [], states: [], terminal: [], replayable: [], waiting: [] },
  view: null,          // the last ViewLag the API answered
  skewMs: 0,           // server clock minus this browser's clock
  lastPollOk: null,    // Date.now() of the last answered poll
  tenants: [],         // tenant ids an operator bound to no tenant may pick
};

export const $ = (id) => document.getElementById(id);
export const serverNow = () => Date.now() + state.skewMs;
export const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

// One API call. Network failures throw; every HTTP answer (problem details included) is returned.
export async function api(method, path, { body, headers } = {}) {
  const response = await fetch(path, {
    method,
    headers: {
      Authorization: `Bearer ${state.token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  return { status: response.status, ok: response.ok, data };
}

// The lists the page needs, from the API's own document: job types, statuses, which are final, which an
// operator may replay. The page keeps no copy of the state machine.
export async function loadContract() {
  try {
    const schemas = (await (await fetch("/openapi.json")).json()).components.schemas;
    state.contract = {
      types: schemas.NewJob.properties.type.examples || [],
      states: schemas.JobState.enum || [],
      terminal: schemas.JobState["x-terminal"] || [],
      replayable: schemas.JobState["x-replayable"] || [],
      waiting: schemas.JobState["x-waiting"] || [],
    };
  } catch {
    // without the document the page still works: filters offer fewer choices, the API still refuses well
  }
  return state.contract;
}

// --- text -----------------------------------------------------------------------------------------------

// The API's problem details as a person reads them: title and detail, then each validation error's place.
export function problemText(answer) {
  const data = answer.data || {};
  if (!data.title) return `HTTP ${answer.status}`;
  const errors = Array.isArray(data.errors) ? data.errors : [];
  const places = errors.map((e) => `${(e.loc || []).join(".") || "body"}: ${e.msg}`);
  return errors.length ? `${data.title}: ${places.join("; ")}` : `${data.title}: ${data.detail || ""}`;
}

// A problem box: the API's title, status and detail, and each error's place, as it answered them.
export function showProblem(box, answer, doing) {
  const data = answer.data || {};
  const parts = [el("strong", {}, data.title || `HTTP ${answer.status}`),
                 ` (HTTP ${answer.status}${doing ? `, ${doing}` : ""})`];
  if (data.detail) parts.push(": ", el("span", { className: "problem-detail" }, data.detail));
  const errors = Array.isArray(data.errors) ? data.errors : [];
  const list = errors.length
    ? [el("ul", {}, ...errors.map((e) => el("li", {}, `${(e.loc || []).join(".") || "body"}: ${e.msg}`)))] : [];
  const key = JSON.stringify([answer.status, data]);
  if (box.dataset.shown !== key) {  // an alert is announced on each change: only change what changed
    box.replaceChildren(el("p", {}, ...parts), ...list);
    box.dataset.shown = key;
    box.dataset.problemType = data.type || "";
  }
  box.hidden = false;
}

export function showTrouble(box, text) {
  if (box.dataset.shown !== text) {
    box.replaceChildren(el("p", {}, text));
    box.dataset.shown = text;
  }
  box.hidden = false;
}

export function clearProblem(box) {
  box.hidden = true;
  box.dataset.shown = "";
}

// --- time: shown in the viewer's zone, the UTC value on hover -------------------------------------------------

const pad = (n, width = 2) => String(n).padStart(width, "0");

export function localTime(isoTime, { date = true } = {}) {
  const d = new Date(Date.parse(isoTime));
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return date ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}` : time;
}

export function utcTitle(isoTime) {
  return `${isoTime.replace("T", " ").replace("Z", "")} UTC`;
}

export function ago(isoTime) {
  const seconds = Math.max(0, Math.round((serverNow() - Date.parse(isoTime)) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 90_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

// A <time> showing `isoTime` in the viewer's zone (or as `text`), its UTC value in the title.
export function timeEl(isoTime, text, options) {
  const node = el("time", { dateTime: isoTime, title: utcTitle(isoTime) },
                  text === undefined ? localTime(isoTime, options) : text);
  return node;
}

// Keep a <time> showing how long ago it was (the ticking clock updates only its text).
export function agoEl(isoTime, prefix = "") {
  const node = timeEl(isoTime, `${prefix}${ago(isoTime)}`);
  node.dataset.ago = prefix;
  node.title = `${localTime(isoTime)} (${ZONE}) · ${utcTitle(isoTime)}`;
  return node;
}

export function tick(root = document) {
  for (const node of root.querySelectorAll("time[data-ago]")) {
    setText(node, `${node.dataset.ago}${ago(node.dateTime)}`);
  }
}

// --- DOM ------------------------------------------------------------------------------------------------------

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("aria-") || name === "role" || name === "for") node.setAttribute(name, value);
    else node[name] = value;
  }
  node.append(...children.filter((child) => child !== null && child !== undefined && child !== false));
  return node;
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// Replace a node's children only when what they say changed (keyed by `key`).
export function setContent(node, key, ...children) {
  if (node.dataset.key === key) return;
  node.dataset.key = key;
  node.replaceChildren(...children);
}

// Make `body`'s rows those of `items`, in order: rows are found by `key(item)`, made once by `create(item)`
// and brought up to date by `update(row, item)`; a row is moved only when the order changed, so a focused
// control in it keeps its focus while the list is polled.
export function reconcile(body, items, key, create, update) {
  const existing = new Map([...body.children].map((row) => [row.dataset.key, row]));
  const wanted = items.map((item) => {
    const id = key(item);
    let row = existing.get(id);
    if (row) existing.delete(id);
    else { row = create(item); row.dataset.key = id; }
    update(row, item);
    return row;
  });
  for (const row of existing.values()) row.remove();
  wanted.forEach((row, index) => {
    if (body.children[index] !== row) body.insertBefore(row, body.children[index] || null);
  });
}

export function say(id, text) { setText($(id), text); }

export function isOperator() { return Boolean(state.me && state.me.operator); }
export function isPlatformOperator() { return isOperator() && state.me.tenant_id === null; }
export function isTerminal(status) { return state.contract.terminal.includes(status); }
export function isReplayable(status) { return state.contract.replayable.includes(status); }
export function isWaiting(status) { return state.contract.waiting.includes(status); }
