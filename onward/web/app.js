// Onward status page: no build step, no dependencies. Three views on one page, each at its own URL: the job
// list (#/jobs?filters), one job (#/jobs/<id>) and the operator's (#/ops). It polls the API (statuses from
// the status view, each with how fresh it is) and says when the view is delayed or the API unreachable.
"use strict";

import {
  $, api, isOperator, isPlatformOperator, loadContract, localTime, say, serverNow, setText, state, tick,
} from "/web/core.js";
import { buildJobActions, pollJob, showJob } from "/web/job.js";
import { buildFilterForm, buildPager, focusSearch, offerTenants, pollList, showList } from "/web/list.js";
import { buildOps, pollOps } from "/web/ops.js";
import { pollWebhooks } from "/web/webhooks.js";  // completion webhooks (issue 38)
import { pollPauses } from "/web/pauses.js";  // pause, resume and the drain switch (issue 37)

const POLL_MS = 2000;
const TICK_MS = 1000;
const OPS_EVERY = 2;  // polls: the operator's view reads more (five routes)
const CHART_WINDOW_S = 300;

// The page keeps its state in the hash, never in the query: an address with one (?token=... from a link or
// a bookmark) is replaced in the history by the same address without it.
if (location.search) history.replaceState(history.state, "", location.pathname + location.hash);

const page = {
  route: null,
  polling: false,
  polls: 0,
  timer: null,
  lagSamples: [],  // [{at: server ms, lag: seconds}]
  pending: null,   // {key, body}: a submit with no answer yet; retrying it re-sends the same key
};

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// --- token and who it is --------------------------------------------------------------------------------------

function useToken(event) {
  event.preventDefault();
  state.token = $("token").value.trim();
  $("token").value = "";
  sessionStorage.setItem("onward.token", state.token);
  start();
}

// A refused token is forgotten, so a reload does not send it again.
function forgetToken() {
  clearInterval(page.timer);
  state.token = "";
  state.me = null;
  sessionStorage.removeItem("onward.token");
  $("submit-button").disabled = true;
  say("token-status", "This token was not accepted. Paste another one.");
  say("list-status", "Not signed in.");
  say("whoami", "");
  $("nav-ops").hidden = true;
}

async function start() {
  if (!state.token) return;
  clearInterval(page.timer);
  let answer;
  try {
    answer = await api("GET", "/whoami");
  } catch {
    renderNotice("The API cannot be reached.");
    page.timer = setInterval(start, POLL_MS);
    return;
  }
  if (answer.status === 401) {
    forgetToken();
    return;
  }
  state.me = answer.data;
  say("token-status", "Token set (kept for this tab only).");
  say("whoami", state.me.operator
    ? (state.me.tenant_id ? `Operator of ${state.me.tenant_id}` : "Operator (every tenant)")
    : `Tenant ${state.me.tenant_id}`);
  $("nav-ops").hidden = !isOperator();
  const creates = Boolean(state.me.tenant_id);
  $("submit-button").disabled = !creates;
  $("submit-note").hidden = creates;
  if (isPlatformOperator()) {
    const tenants = await api("GET", "/ops/tenants");
    if (tenants.status === 200) state.tenants = tenants.data.tenants.map((tenant) => tenant.tenant_id);
  }
  offerTenants();
  route(false);
  page.timer = setInterval(poll, POLL_MS);
}

// --- routes ---------------------------------------------------------------------------------------------------

function parseRoute() {
  const [path, query] = (location.hash || "#/jobs").slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const job = /^\/jobs\/([^/]+)$/.exec(path);
  if (job) return { view: "job", jobId: decodeURIComponent(job[1]), params };
  if (path === "/ops") return { view: "ops", params };
  if (path === "/webhooks") return { view: "webhooks", params };
  return { view: "jobs", params };
}

function route(navigated) {
  const next = parseRoute();
  const changed = !page.route || page.route.view !== next.view;
  page.route = next;
  for (const view of ["jobs", "job", "ops", "webhooks"]) $(`view-${view}`).hidden = view !== next.view;
  for (const link of document.querySelectorAll("#views a")) {
    if (link.dataset.view === next.view || (next.view === "job" && link.dataset.view === "jobs")) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
  if (next.view === "jobs") showList(next.params);
  if (next.view === "job") showJob(next.jobId);
  document.title = { jobs: "Onward · jobs", job: `Onward · job ${next.jobId || ""}`, ops: "Onward · operator",
    webhooks: "Onward · webhooks" }[next.view];
  if (navigated && (changed || next.view === "job")) {
    $({ jobs: "jobs-heading", job: "job-heading", ops: "ops-heading", webhooks: "webhooks-heading" }[next.view]).focus();
  }
  if (state.me) poll(true);
}

// --- polling ----------------------------------------------------------------------------------------------------

async function poll(now = false) {
  if (!state.me || (page.polling && !now)) return;
  page.polling = true;
  const polls = page.polls;
  page.polls += 1;
  try {
    let view = null;
    const current = page.route.view;
    if (current === "jobs") view = await pollList();
    else if (current === "job") view = await pollJob();
    else if (current === "webhooks") view = await pollWebhooks();
    else if (now || polls % OPS_EVERY === 0) view = await pollOps();
    if (view && view.status === 401) {
      forgetToken();
      return;
    }
    if (!view) {
      const lag = await api("GET", "/view");
      if (lag.status === 401) {
        forgetToken();
        return;
      }
      view = lag.status === 200 ? lag.data : null;
    }
    if (polls % OPS_EVERY === 0) await pollPauses();  // (issue 37: the paused banner)
    state.lastPollOk = Date.now();
    if (view) takeView(view);
    renderNotice(null);
  } catch {
    renderNotice("The API cannot be reached.");
  } finally {
    page.polling = false;
  }
}

function takeView(view) {
  state.view = view;
  renderReplication(view.replication || null);
  state.skewMs = Date.parse(view.measured_at) - Date.now();
  if (view.view_lag_s !== null) page.lagSamples.push({ at: Date.parse(view.measured_at), lag: view.view_lag_s });
  const oldest = serverNow() - CHART_WINDOW_S * 1000;
  page.lagSamples = page.lagSamples.filter((sample) => sample.at >= oldest);
  renderChart();
}

function renderNotice(unreachable) {
  const notice = $("delay-notice");
  const view = state.view;
  let text = null;
  if (unreachable) {
    const since = state.lastPollOk ? ` Last answer at ${localTime(new Date(state.lastPollOk).toISOString(), { date: false })}.` : "";
    text = `${unreachable}${since} Statuses below may be out of date.`;
  } else if (view && view.stale && !onlyUnreconciled(view)) {
    text = view.watermark
      ? `Updates delayed: last confirmed at ${localTime(view.watermark, { date: false })} (expected within ` +
        `${view.stale_after_s} s). Statuses below may be out of date.`
      : "Updates delayed: the status view has not confirmed anything yet.";
  }
  notice.hidden = text === null;
  // An alert is announced on every change: only change it when what it says changes (no ticking numbers).
  setText(notice, text || "");
}

function renderChart() {
  const svg = $("lag-chart");
  const width = 300, height = 80, top = 8, bottom = 70;
  const threshold = state.view ? state.view.stale_after_s : 30;
  const highest = Math.max(threshold * 1.25, ...page.lagSamples.map((s) => s.lag));
  const now = serverNow();
  const x = (at) => width - ((now - at) / 1000 / CHART_WINDOW_S) * width;
  const y = (lag) => bottom - (lag / highest) * (bottom - top);
  const points = page.lagSamples.map((s) => `${x(s.at).toFixed(1)},${y(s.lag).toFixed(1)}`).join(" ");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.innerHTML =
    `<line class="threshold" x1="0" x2="${width}" y1="${y(threshold)}" y2="${y(threshold)}"></line>` +
    `<text x="2" y="${y(threshold) - 2}">delay threshold ${threshold} s</text>` +
    `<text x="2" y="78">-5 min</text><text x="${width - 18}" y="78">now</text>` +
    `<polyline class="line" points="${points}"></polyline>`;
  const latest = page.lagSamples.at(-1);
  say("lag-summary", latest
    ? `Projection lag now ${latest.lag.toFixed(1)} s; highest in the last 5 minutes ` +
      `${Math.max(...page.lagSamples.map((s) => s.lag)).toFixed(1)} s; delay threshold ${threshold} s.`
    : "No measurement yet.");
}

// --- submitting a job -------------------------------------------------------------------------------------------

async function submitJob(event) {
  event.preventDefault();
  let params;
  try {
    params = JSON.parse($("job-params-input").value || "{}");
  } catch (error) {
    say("submit-status", `Params are not valid JSON: ${error.message}`);
    return;
  }
  const body = { type: $("job-type").value.trim(), params };
  const attempts = $("job-attempts").value.trim();
  if (attempts !== "") body.max_attempts = Number(attempts);  // empty: the API's default, never 0
  const retry = page.pending !== null && JSON.stringify(page.pending.body) === JSON.stringify(body);
  page.pending = { key: retry ? page.pending.key : newKey(), body };
  $("submit-button").disabled = true;
  say("submit-status", retry ? "Retrying with the same Idempotency-Key…" : "Submitting…");
  try {
    const answer = await api("POST", "/jobs", { body, headers: { "Idempotency-Key": page.pending.key } });
    if (answer.status === 202 || answer.status === 200) {
      page.pending = null;
      const link = `#/jobs/${answer.data.job_id}`;
      $("submit-status").replaceChildren(
        answer.status === 202 ? "Job " : "Job ",
        Object.assign(document.createElement("a"), { href: link, textContent: answer.data.job_id }),
        answer.status === 202 ? " queued." : " was already submitted; nothing new was created.");
      poll(true);
    } else if (answer.status >= 500) {
      say("submit-status", `${problemLine(answer)} Press Submit to retry: the same Idempotency-Key is sent, ` +
                           "so the job is created at most once.");
    } else {
      page.pending = null;
      say("submit-status", `Not submitted. ${problemLine(answer)}`);
    }
  } catch {
    say("submit-status", "Network error: the job may or may not have been created. Press Submit to retry " +
                         "safely: the same Idempotency-Key is sent, so it is created at most once.");
  } finally {
    $("submit-button").disabled = false;
  }
}

function problemLine(answer) {
  const data = answer.data || {};
  if (!data.title) return `HTTP ${answer.status}.`;
  const errors = Array.isArray(data.errors) ? data.errors : [];
  const places = errors.map((e) => `${(e.loc || []).join(".") || "body"}: ${e.msg}`);
  return errors.length ? `${data.title}: ${places.join("; ")}` : `${data.title}: ${data.detail || ""}`;
}

// --- start ------------------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", async () => {
  $("token-form").addEventListener("submit", useToken);
  $("submit-form").addEventListener("submit", submitJob);
  buildPager();
  buildJobActions(() => poll(true));
  buildOps(() => poll(true));
  window.addEventListener("hashchange", () => route(true));
  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      if (page.route.view !== "jobs") location.hash = "#/jobs";
      focusSearch();
    }
  });
  setInterval(() => tick(), TICK_MS);
  const contract = await loadContract();
  $("job-types").replaceChildren(...contract.types.map((name) => Object.assign(document.createElement("option"),
                                                                               { value: name })));
  buildFilterForm();
  route(false);
  if (!state.token) say("list-status", "Paste a token to see your jobs.");
  start();
});

// After a failover (issue 39): what this Region's view may not have seen of the home it lost
// (docs/regional-recovery.md, "The status page in the new Region").
function onlyUnreconciled(view) {
  // stale only because the lost home's writes are not reconciled: the replication banner says so, not "delayed"
  return Boolean(view.replication) && !view.replication.reconciled && view.view_lag_s !== null &&
    view.view_lag_s <= view.stale_after_s;
}

function replicationText(replication) {
  if (!replication) return null;
  const home = replication.home_lost || "the previous home Region";
  const since = replication.may_miss_after
    ? ` after ${localTime(replication.may_miss_after, { date: false })}` : "";
  const fenced = replication.fenced_at ? ` at ${localTime(replication.fenced_at, { date: false })}` : "";
  return replication.reconciled
    ? `Failed over from ${home}${fenced} (epoch ${replication.epoch}). Updates from ${home}${since} may have ` +
      "been lost: they did not reach this Region."
    : `Failed over from ${home}${fenced} (epoch ${replication.epoch}). Updates from ${home}${since} may be ` +
      "missing; reconciling.";
}

function renderReplication(replication) {
  const notice = $("replication-notice");
  const text = replicationText(replication);
  notice.hidden = text === null;
  setText(notice, text || "");
}
