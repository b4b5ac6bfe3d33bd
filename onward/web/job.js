// One job's page (#/jobs/<id>, a URL to share): its status with freshness, what it was created with, why it
// waits (while queued or retry_wait), its result or error, the attempt timeline from its run records, and
// cancel / (operators) replay with their answers.
"use strict";

import {
  $, agoEl, api, clearProblem, el, isOperator, isReplayable, isWaiting, say, serverNow, setContent, setText,
  showProblem, timeEl,
} from "/web/core.js";
import { renderProgress } from "/web/progress.js";
import { analyse, attemptItem, drawTimeline, summary } from "/web/timeline.js";
import { tagLinks, tagsKey } from "/web/tags.js";
import { renderPolicy } from "/web/policy.js";

// An explanation reads the last minutes' claims of every tenant: asked again only this often (or when the
// status moves), not on every poll.
const EXPLAIN_EVERY_MS = 10_000;
const WAITING_TEXT = ["job-waiting-reason", "job-waiting-eta", "job-waiting-basis"];

const RUNS_SOURCE = "From the job's run records (the job table): they can be a moment ahead of the status above.";

const job = { id: null, params: null, status: null, explained: null };

export function showJob(jobId) {
  if (job.id === jobId) return;
  job.id = jobId;
  job.params = null;
  job.status = null;
  job.explained = null;
  setText($("job-title-id"), jobId);
  for (const id of ["job-updated", "job-freshness", "job-result", "job-params", "job-created", "job-run-at",
                    "job-trace", ...WAITING_TEXT]) {
    $(id).replaceChildren();
    delete $(id).dataset.key;  // setContent's memory of what it showed: another job's
  }
  renderProgress(null);
  $("job-body").hidden = true;
  $("job-waiting").hidden = true;
  clearProblem($("job-problem"));
  clearProblem($("job-waiting-problem"));
  say("job-action-status", "");
  say("job-state", "Loading…");
  $("attempts").replaceChildren();
  drawTimeline($("timeline-chart"), []);
}

export function currentJob() {
  return job.id;
}

export async function pollJob() {
  // An archived job does not change (a replay brings it back to the tables: reload to see it); on AWS each
  // read of it is an Athena query, so it is read once, not every poll.
  if (job.status && job.status.archived) return null;
  const jobId = job.id;
  const [status, runs, params] = await Promise.all([
    api("GET", `/jobs/${jobId}`),
    api("GET", `/jobs/${jobId}/runs`),
    job.params ? Promise.resolve(null) : api("GET", `/jobs/${jobId}/params`),
  ]);
  if (jobId !== job.id) return null;
  if (status.status === 401) return status;
  if (status.status !== 200) {
    showProblem($("job-problem"), status, "reading the job");
    $("job-body").hidden = true;
    say("job-state", "");
    return null;
  }
  clearProblem($("job-problem"));
  $("job-body").hidden = false;
  if (params && params.status === 200) job.params = params.data;  // an archived job's: a 404, its status has them
  renderStatus(status.data);
  renderParams();
  await pollExplanation(status.data);
  if (status.data.archived) {  // its runs came with it
    clearProblem($("runs-problem"));
    renderRuns(status.data.runs);
    return null;
  }
  if (jobId !== job.id) return null;
  if (runs.status === 200) {
    clearProblem($("runs-problem"));
    renderRuns(runs.data.runs);
  } else if (runs.status !== 401) {
    showProblem($("runs-problem"), runs, "reading the attempts");
  }
  return status.data.visible ? null : status.data.view;
}

function renderStatus(answer) {
  job.status = answer;
  renderProgress(answer);
  if (!answer.archived) say("runs-source", RUNS_SOURCE);
  $("job-archived").hidden = !answer.archived;
  if (answer.archived) {
    renderArchived(answer);
    return;
  }
  if (!answer.visible) {
    say("job-state", "not shown yet");
    $("job-state").className = "status";
    setContent($("job-updated"), "pending", answer.detail);
    setContent($("job-freshness"), `pending ${answer.view.stale}`,
               answer.view.view_lag_s === null ? "The view's lag is unknown." : `The view is ${answer.view.view_lag_s} s behind.`);
    setContent($("job-result"), "pending");
    renderActions(null);
    return;
  }
  say("job-state", answer.status + (answer.cancel_requested && !answer.terminal ? " (cancel requested)" : "") +
                   (answer.terminal ? " · final" : ""));
  $("job-state").className = `status status-${answer.status}`;
  const asOf = answer.freshness.as_of;
  setContent($("job-updated"), asOf, agoEl(asOf), " (", timeEl(asOf), ")");
  const fresh = answer.freshness;
  const freshness = fresh.stale
    ? (fresh.watermark ? ["May be out of date: the view is confirmed only up to ", timeEl(fresh.watermark), "."]
      : ["May be out of date: the view has confirmed nothing yet."])
    : ["Confirmed current up to ", timeEl(fresh.watermark), ` (the view is at most ${fresh.view_lag_s} s behind).`];
  setContent($("job-freshness"), JSON.stringify([fresh.stale, fresh.watermark]), ...freshness);
  setText($("job-version"), `${answer.version} (attempt ${answer.attempt})`);
  renderResult(answer);
  renderActions(answer);
  renderTrace(answer);
}

// trace context (issue 38): the job's trace id, a link to the tracing UI when the deployment names one
// (ONWARD_TRACE_URL: the API answers it as trace_url).
function renderTrace(answer) {
  const traceId = answer.trace_id;
  const url = answer.trace_url;
  setContent($("job-trace"), JSON.stringify([traceId, url]),
             !traceId ? "none"
               : url ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer",
                                 title: "Open the trace in the tracing UI" }, el("code", {}, traceId))
                 : el("code", {}, traceId));
}

// A job whose rows have expired, answered from the run-history archive: final, never to change (unless replayed
// by an operator through the API, which is not offered here), with no cancel and no replay.
function renderArchived(answer) {
  say("job-state", `${answer.status} · final`);
  $("job-state").className = `status status-${answer.status}`;
  setContent($("job-updated"), answer.updated_at, agoEl(answer.updated_at), " (", timeEl(answer.updated_at), ")");
  setContent($("job-freshness"), `archived ${answer.archived_at}`,
             "From the run-history archive (its rows have expired), archived ", timeEl(answer.archived_at), ".");
  setText($("job-version"), `${answer.version} (attempt ${answer.attempt})`);
  job.params = { type: answer.type, created_at: answer.created_at, run_at: answer.run_at, params: answer.params,
                 max_attempts: answer.max_attempts, priority: answer.priority, timeout_s: null };
  renderParams();
  say("runs-source", "From the run-history archive: the attempts as they were when the job was archived.");
  renderResult(answer);
  renderActions(null);
}

// Why a waiting job waits (GET /jobs/{id}/explain), shown while the status is one of the contract's waiting ones.
async function pollExplanation(answer) {
  if (!answer.visible || !isWaiting(answer.status)) {
    $("job-waiting").hidden = true;
    job.explained = null;
    return;
  }
  const last = job.explained;
  if (!last || last.version !== answer.version || Date.now() - last.at >= EXPLAIN_EVERY_MS) {
    const jobId = job.id;
    const reply = await api("GET", `/jobs/${jobId}/explain`);
    if (jobId !== job.id) return;
    job.explained = { version: answer.version, at: Date.now(), reply };
  }
  renderExplanation(job.explained.reply);
  $("job-waiting").hidden = false;
}

function renderExplanation(reply) {
  if (reply.status !== 200) {
    showProblem($("job-waiting-problem"), reply, "explaining the wait");
    for (const id of WAITING_TEXT) setContent($(id), "none");
    return;
  }
  clearProblem($("job-waiting-problem"));
  const answer = reply.data;
  const details = answer.details;
  $("job-waiting").dataset.reason = answer.reason;
  setContent($("job-waiting-reason"), JSON.stringify([answer.reason, answer.until, details]), ...reasonText(answer));
  setContent($("job-waiting-eta"), JSON.stringify([answer.eta, details && details.ahead_at_least]),
             ...etaText(answer));
  setContent($("job-waiting-basis"), answer.decided_at, ...(details ? [
    "Decided ", agoEl(answer.decided_at), ` from the job table and its tenant's counters: ${details.running} running` +
    `, ${details.waiting} waiting, weight ${details.weight}; ${claimsText(details)}.`,
  ] : ["Decided ", agoEl(answer.decided_at), " from the job table."]));
}

const minutes = (details) => Math.round(details.window_s / 60);

// Its tenant's claims of the window; every tenant's only in an operator's answer (a tenant's has null there).
function claimsText(details) {
  const own = Math.round(details.claims_per_minute * details.window_s / 60);
  const every = details.platform_claims === null ? "" : ` (${details.platform_claims} of every tenant)`;
  return `its tenant started ${own} jobs in the last ${minutes(details)} minutes${every}`;
}

function aheadText(details) {
  if (details.ahead_at_least) return `at least ${details.ahead} jobs of its tenant go before it`;
  if (details.ahead === 0) return "no job of its tenant goes before it";
  return details.ahead === 1 ? "1 job of its tenant goes before it" : `${details.ahead} jobs of its tenant go before it`;
}

function reasonText(answer) {
  const details = answer.details;
  switch (answer.reason) {
    case "scheduled":
      return ["Scheduled: it starts no earlier than ", timeEl(answer.until), ", as asked."];
    case "backoff":
      return ["Backing off after a failed attempt: the next attempt at ", timeEl(answer.until), " at the earliest."];
    case "tenant_at_cap":
      return [`Its tenant is at its cap: ${details.running} of ${details.cap} jobs running at once, so one must ` +
              `end before this one starts; ${aheadText(details)}.`];
    case "waiting_for_share": {
      const share = details.share === null ? "" : `, and its tenant started ${Math.round(details.share * 100)}% ` +
                    `of the jobs of the last ${minutes(details)} minutes`;
      return [`Waiting for its tenant's share of the workers: ${aheadText(details)}${share}.`];
    }
    case "rate_limited":  // rate limits (issue 37)
      return ["Rate limited until ", timeEl(answer.until), ": it holds the token of its rate limits for then " +
              "(its key's, its type's or its tenant's), and starts then without taking another."];
    case "no_worker":
      return [`No worker started any job of its tenant in the last ${minutes(details)} minutes: nothing is ` +
              "taking its work."];
    case "snoozed":  // snooze (issue 37)
      return ["Snoozed by its handler: it runs again no earlier than ", timeEl(answer.until), " (no attempt charged)."];
    case "paused":  // pause, resume and the drain switch (issue 37)
      return [`Paused: ${answer.detail.replace(/^paused: /, "")}`];
    case "concurrency_limited":  // concurrency keys (issue 37): held until an attempt of its key ends
      return [`Concurrency limited: ${answer.detail.replace(/^concurrency limited: /, "")}`];
    case "running":
      return ["A worker has just taken it: the status above will show it shortly."];
    default:
      return ["It has just ended: the status above will show it shortly."];
  }
}

function etaText(answer) {
  if (answer.eta) {
    const details = answer.details;
    return ["Likely to start around ", timeEl(answer.eta), details.ahead_at_least ? " at the earliest" : "",
            ` (its tenant starts ${details.claims_per_minute} jobs a minute).`];
  }
  if (answer.reason === "no_worker") return ["No estimate of when it starts until a worker takes work."];
  if (answer.details) return [`No estimate of when it starts: its tenant started no job in the last ` +
                              `${minutes(answer.details)} minutes.`];
  return [];
}

function renderResult(answer) {
  const box = $("job-result");
  if (answer.error) {
    setText($("result-heading"), answer.status === "retry_wait" ? "Last error (it will be retried)" : "Error");
    setContent(box, JSON.stringify(answer.error), el("p", { className: "error-text" },
      el("strong", {}, answer.error.error_type), `: ${answer.error.message}`,
      answer.error.message_truncated ? " (cut)" : ""));
  } else if (answer.result) {
    setText($("result-heading"), "Result");
    const result = answer.result;
    setContent(box, JSON.stringify(result), result.inline !== null && result.inline !== undefined
      ? el("pre", { className: "json" }, JSON.stringify(result.inline, null, 2))
      : el("p", {}, `${result.size_bytes.toLocaleString()} bytes: over 1 KiB, not shown here.`));
  } else {
    setText($("result-heading"), "Result");
    setContent(box, `none ${answer.terminal}`, el("p", { className: "muted" },
      answer.terminal ? "No result." : "No result yet."));
  }
}

function renderParams() {
  const params = job.params;
  if (!params) return;
  setText($("job-kind"), params.type);
  setContent($("job-created"), params.created_at, timeEl(params.created_at));
  setContent($("job-run-at"), String(params.run_at),
             params.run_at ? timeEl(params.run_at) : "as soon as a worker is free");
  setText($("job-limits"), `${params.max_attempts} attempt${params.max_attempts === 1 ? "" : "s"} at most · ` +
                           `priority ${params.priority} · ` +
                           (params.timeout_s ? `timeout ${params.timeout_s} s per attempt`
                                             : "its job type's timeout per attempt"));
  renderPolicy(params);  // retry policy per job type (issue 37)
  // tags (issue 38)
  setContent($("job-tags"), tagsKey(params.tags),
             ...(Object.keys(params.tags || {}).length ? tagLinks(params.tags) : ["none"]));
  if (params.params === null) {  // an archived job's params over 4 KiB: the archive kept only their start
    setContent($("job-params"), "cut", el("p", { className: "muted" }, "Over 4 KiB: not kept whole by the archive."));
    return;
  }
  setContent($("job-params"), JSON.stringify(params.params),
             el("pre", { className: "json" }, JSON.stringify(params.params, null, 2)));
}

function renderActions(answer) {
  const cancel = $("job-cancel");
  const replay = $("job-replay");
  const canCancel = Boolean(answer && !answer.terminal && !answer.cancel_requested);
  const canReplay = Boolean(answer && isOperator() && isReplayable(answer.status));
  if (cancel.hidden === canCancel) cancel.hidden = !canCancel;
  if (replay.hidden === canReplay) replay.hidden = !canReplay;
  $("job-actions").hidden = !canCancel && !canReplay && !$("job-action-status").textContent;
}

export function buildJobActions(onChange) {
  const act = async (action, button) => {
    const jobId = job.id;
    button.disabled = true;
    const status = $("job-action-status");
    const name = action === "cancel" ? "Cancel" : "Replay";
    try {
      const answer = await api("POST", `/jobs/${jobId}/${action}`);
      if (answer.status === 202) {
        setText(status, action === "cancel"
          ? `${name}: ${answer.data.status === "cancelled" ? "cancelled" : "requested; the worker stops at its next lease renewal"} (version ${answer.data.version}).`
          : `${name}: queued again as version ${answer.data.version}.`);
      } else {
        const data = answer.data || {};
        setText(status, `${name} refused: ${data.title || "HTTP"} (HTTP ${answer.status}): ${data.detail || ""}`);
      }
    } catch {
      setText(status, `${name}: network error; it may not have reached the API.`);
    } finally {
      button.disabled = false;
    }
    onChange();
  };
  $("job-cancel").addEventListener("click", () => act("cancel", $("job-cancel")));
  $("job-replay").addEventListener("click", () => act("replay", $("job-replay")));
}

function renderRuns(runs) {
  const attempts = analyse(runs, serverNow());
  drawTimeline($("timeline-chart"), attempts);
  say("timeline-summary", summary(attempts));
  const list = $("attempts");
  const items = attempts.map((attempt) => {
    const key = JSON.stringify([attempt.run, attempt.overlaps, attempt.open ? Math.floor(attempt.end / 1000) : 0]);
    let item = list.querySelector(`li[data-attempt="${attempt.run.attempt}"]`);
    if (!item) item = el("li", { className: "attempt", dataset: { attempt: String(attempt.run.attempt) } });
    item.className = `attempt outcome-${attempt.run.outcome || "running"}${attempt.fenced ? " is-fenced" : ""}` +
                     `${attempt.overlaps.length ? " is-overlapping" : ""}`;
    setContent(item, key, ...attemptItem(attempt));
    return item;
  });
  items.forEach((item, index) => {
    if (list.children[index] !== item) list.insertBefore(item, list.children[index] || null);
  });
  while (list.children.length > items.length) list.lastElementChild.remove();
}
