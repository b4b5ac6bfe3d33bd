// Onward status page: no build step, no dependencies. It polls GET /jobs (statuses from the status view,
// with the view's lag bound) and never shows a status without saying how fresh it is.
"use strict";

const POLL_MS = 2000;
const TICK_MS = 1000;
const CHART_WINDOW_S = 300;

const state = {
  token: sessionStorage.getItem("onward.token") || "",
  jobs: [],
  view: null,          // the last ViewLag the API answered
  skewMs: 0,           // server clock minus this browser's clock
  lastPollOk: null,    // Date.now() of the last answered poll
  lagSamples: [],      // [{at: server ms, lag: seconds}]
  pending: null,       // {key, body}: a submit with no answer yet; retrying it re-sends the same key
  pollTimer: null,
};

const $ = (id) => document.getElementById(id);
const say = (id, text) => { $(id).textContent = text; };
const serverNow = () => Date.now() + state.skewMs;

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function api(method, path, { body, headers } = {}) {
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
  return { status: response.status, data };
}

// The API's problem details as a person reads them: title and detail, then each validation error's place.
function problemText(answer) {
  const data = answer.data || {};
  if (!data.title) return `HTTP ${answer.status}`;
  const errors = Array.isArray(data.errors) ? data.errors : [];
  const places = errors.map((e) => `${(e.loc || []).join(".") || "body"}: ${e.msg}`);
  return errors.length ? `${data.title}: ${places.join("; ")}` : `${data.title}: ${data.detail || ""}`;
}

function ago(isoTime) {
  const seconds = Math.max(0, Math.round((serverNow() - Date.parse(isoTime)) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

function clock(isoTime) {
  return new Date(Date.parse(isoTime)).toLocaleTimeString([], { hour12: false });
}

// --- token -------------------------------------------------------------------------------------------------

function useToken(event) {
  event.preventDefault();
  state.token = $("token").value.trim();
  $("token").value = "";
  sessionStorage.setItem("onward.token", state.token);
  start();
}

// A refused token is forgotten, so a reload does not send it again.
function forgetToken() {
  state.token = "";
  sessionStorage.removeItem("onward.token");
  $("submit-button").disabled = true;
}

function start() {
  if (!state.token) return;
  $("submit-button").disabled = false;
  say("token-status", "Token set (kept for this tab only).");
  clearInterval(state.pollTimer);
  poll();
  state.pollTimer = setInterval(poll, POLL_MS);
}

// --- polling the view --------------------------------------------------------------------------------------

async function poll() {
  let answer;
  try {
    answer = await api("GET", "/jobs?limit=50");
  } catch {
    renderNotice("The API cannot be reached.");
    return;
  }
  if (answer.status === 401) {
    clearInterval(state.pollTimer);
    forgetToken();
    say("token-status", "This token was not accepted. Paste another one.");
    say("list-status", "Not signed in.");
    return;
  }
  if (answer.status !== 200) {
    renderNotice(`The API answered ${problemText(answer)}.`);
    return;
  }
  state.lastPollOk = Date.now();
  state.jobs = answer.data.jobs;
  state.view = answer.data.view;
  state.skewMs = Date.parse(state.view.measured_at) - Date.now();
  if (state.view.view_lag_s !== null) {
    state.lagSamples.push({ at: Date.parse(state.view.measured_at), lag: state.view.view_lag_s });
  }
  const oldest = serverNow() - CHART_WINDOW_S * 1000;
  state.lagSamples = state.lagSamples.filter((sample) => sample.at >= oldest);
  renderJobs();
  renderNotice(null);
  renderChart();
}

// --- rendering ---------------------------------------------------------------------------------------------

function renderNotice(unreachable) {
  const notice = $("delay-notice");
  const view = state.view;
  let text = null;
  if (unreachable) {
    const since = state.lastPollOk ? ` Last answer at ${clock(new Date(state.lastPollOk).toISOString())}.` : "";
    text = `${unreachable}${since} Statuses below may be out of date.`;
  } else if (view && view.stale) {
    text = view.watermark
      ? `Updates delayed: last confirmed at ${clock(view.watermark)} (expected within ` +
        `${view.stale_after_s} s). Statuses below may be out of date.`
      : "Updates delayed: the status view has not confirmed anything yet.";
  }
  notice.hidden = text === null;
  // An alert is announced on every change: only change it when what it says changes (no ticking numbers).
  if (notice.textContent !== (text || "")) notice.textContent = text || "";
}

function renderJobs() {
  const body = $("jobs").querySelector("tbody");
  body.replaceChildren(...state.jobs.map(jobRow));
  const count = state.jobs.length;
  say("list-status", count ? `Showing ${count} job${count === 1 ? "" : "s"}, most recent first.` : "No jobs yet.");
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function jobRow(job) {
  const row = document.createElement("tr");
  row.dataset.jobId = job.job_id;
  // `terminal` comes from the API: the page keeps no copy of the state machine's lists
  const status = cell(job.status + (job.cancel_requested && !job.terminal ? " (cancel requested)" : ""),
                      `status status-${job.status}`);
  if (job.error) {  // why it failed (dead, quarantined, or the last attempt of a job waiting to retry)
    const reason = document.createElement("span");
    reason.className = "reason";
    reason.textContent = `${job.error.error_type}: ${job.error.message}`;
    status.append(document.createElement("br"), reason);
  }
  const updated = cell(`updated ${ago(job.updated_at)}`, "updated");
  updated.dataset.updatedAt = job.updated_at;
  updated.title = `became ${job.status} at ${job.updated_at}`;
  const actions = document.createElement("td");
  if (!job.terminal && !job.cancel_requested) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Cancel";
    button.setAttribute("aria-label", `Cancel job ${job.job_id}`);
    button.addEventListener("click", () => cancel(job.job_id, button));
    actions.append(button);
  }
  row.append(cell(job.job_id.slice(0, 12), "job"), cell(job.type), status, updated,
             cell(String(job.version)), cell(String(job.attempt)), actions);
  row.cells[0].title = job.job_id;
  return row;
}

function tick() {
  for (const td of document.querySelectorAll("td.updated")) {
    td.textContent = `updated ${ago(td.dataset.updatedAt)}`;
  }
}

function renderChart() {
  const svg = $("lag-chart");
  const width = 300, height = 80, top = 8, bottom = 70;
  const threshold = state.view ? state.view.stale_after_s : 30;
  const highest = Math.max(threshold * 1.25, ...state.lagSamples.map((s) => s.lag));
  const now = serverNow();
  const x = (at) => width - ((now - at) / 1000 / CHART_WINDOW_S) * width;
  const y = (lag) => bottom - (lag / highest) * (bottom - top);
  const points = state.lagSamples.map((s) => `${x(s.at).toFixed(1)},${y(s.lag).toFixed(1)}`).join(" ");
  svg.innerHTML =
    `<line class="threshold" x1="0" x2="${width}" y1="${y(threshold)}" y2="${y(threshold)}"></line>` +
    `<text x="2" y="${y(threshold) - 2}">delay threshold ${threshold} s</text>` +
    `<text x="2" y="78">-5 min</text><text x="${width - 18}" y="78">now</text>` +
    `<polyline class="line" points="${points}"></polyline>`;
  const latest = state.lagSamples.at(-1);
  say("lag-summary", latest
    ? `Projection lag now ${latest.lag.toFixed(1)} s; highest in the last 5 minutes ` +
      `${Math.max(...state.lagSamples.map((s) => s.lag)).toFixed(1)} s; delay threshold ${threshold} s.`
    : "No measurement yet.");
}

// --- actions -----------------------------------------------------------------------------------------------

async function submitJob(event) {
  event.preventDefault();
  let params;
  try {
    params = JSON.parse($("job-params").value || "{}");
  } catch (error) {
    say("submit-status", `Params are not valid JSON: ${error.message}`);
    return;
  }
  const body = { type: $("job-type").value.trim(), params };
  const attempts = $("job-attempts").value.trim();
  if (attempts !== "") body.max_attempts = Number(attempts);  // empty: the API's default, never 0
  const retry = state.pending !== null && JSON.stringify(state.pending.body) === JSON.stringify(body);
  state.pending = { key: retry ? state.pending.key : newKey(), body };
  $("submit-button").disabled = true;
  say("submit-status", retry ? "Retrying with the same Idempotency-Key…" : "Submitting…");
  try {
    const answer = await api("POST", "/jobs", { body, headers: { "Idempotency-Key": state.pending.key } });
    if (answer.status === 202 || answer.status === 200) {
      state.pending = null;
      say("submit-status", answer.status === 202
        ? `Job ${answer.data.job_id} queued.`
        : `Job ${answer.data.job_id} was already submitted; nothing new was created.`);
      poll();
    } else if (answer.status >= 500) {
      say("submit-status", `${problemText(answer)} Press Submit to retry: the same Idempotency-Key is sent, ` +
                           "so the job is created at most once.");
    } else {
      state.pending = null;
      say("submit-status", `Not submitted. ${problemText(answer)}`);
    }
  } catch {
    say("submit-status", "Network error: the job may or may not have been created. Press Submit to retry " +
                         "safely: the same Idempotency-Key is sent, so it is created at most once.");
  } finally {
    $("submit-button").disabled = false;
  }
}

async function cancel(jobId, button) {
  button.disabled = true;
  try {
    const answer = await api("POST", `/jobs/${jobId}/cancel`);
    say("submit-status", answer.status === 202
      ? `Job ${jobId}: ${answer.data.status.replace("_", " ")}.`
      : `Job ${jobId}: ${problemText(answer)}`);
  } catch {
    say("submit-status", `Job ${jobId}: network error; the cancel may not have reached the API.`);
    button.disabled = false;
  }
  poll();
}

// The job types this deployment accepts, from the API's own document (no list kept here).
async function offerJobTypes() {
  try {
    const answer = await fetch("/openapi.json");
    const types = (await answer.json()).components.schemas.NewJob.properties.type.examples || [];
    $("job-types").replaceChildren(...types.map((name) => Object.assign(document.createElement("option"),
                                                                           { value: name })));
  } catch {
    // the field still takes any type; the API names the known ones when it refuses one
  }
}

document.addEventListener("DOMContentLoaded", () => {
  offerJobTypes();
  $("token-form").addEventListener("submit", useToken);
  $("submit-form").addEventListener("submit", submitJob);
  setInterval(tick, TICK_MS);
  start();
});
