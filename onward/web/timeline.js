// A job's attempts on one time axis, from its run records (GET /jobs/{id}/runs): each attempt's worker,
// claim, end, lease and outcome; a fenced zombie's late report; attempts whose activity overlapped.
"use strict";

import { duration, el, localTime, utcTitle } from "/web/core.js";
import { runProgress } from "/web/progress.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 640;
const LABEL = 92;
const ROW = 30;
const AXIS = 22;

// What the records say about each attempt (pure): when it was active and which others it overlapped. An
// attempt is active from its claim to its end, or to its late report or refused heartbeat (lease_lost_at): a
// zombie still worked after its run was closed. Overlapping attempts are two workers on one job at once: what
// the intervals show, and what the store recorded on the run (overlapped_with).
export function analyse(runs, nowMs) {
  const attempts = runs.map((run) => {
    const start = Date.parse(run.claimed_at);
    const finished = run.finished_at ? Date.parse(run.finished_at) : null;
    const late = run.late_report_at ? Date.parse(run.late_report_at) : null;
    const lost = run.lease_lost_at ? Date.parse(run.lease_lost_at) : null;
    const end = finished ?? Math.max(nowMs, start);
    return {
      run, start, end, open: finished === null, late,
      activeEnd: Math.max(end, late ?? end, lost ?? end),
      lease: Date.parse(run.lease_expires_at),
      fenced: run.outcome === "fenced" || Boolean(run.late_report),
      overlaps: [],
    };
  });
  for (const [i, earlier] of attempts.entries()) {
    for (const later of attempts.slice(i + 1)) {
      if (later.start < earlier.activeEnd && earlier.start < later.activeEnd) {
        earlier.overlaps.push(later.run.attempt);
        later.overlaps.push(earlier.run.attempt);
      }
    }
  }
  for (const attempt of attempts) {
    for (const other of attempt.run.overlapped_with ?? []) {
      if (!attempt.overlaps.includes(other)) attempt.overlaps.push(other);
    }
  }
  return attempts;
}

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  node.append(...children);
  return node;
}

function title(text) {
  return svg("title", {}, text);
}

export function outcomeOf(attempt) {
  return attempt.run.outcome || (attempt.open ? "running" : "unknown");
}

// The chart: one row per attempt, bars from claim to end, the lease as a tick, a late report as a dot on a
// dashed tail, overlaps as a band across the rows involved.
export function drawTimeline(chart, attempts) {
  if (!attempts.length) {
    chart.replaceChildren();
    chart.setAttribute("viewBox", `0 0 ${WIDTH} 0`);
    chart.hidden = true;
    return;
  }
  chart.hidden = false;
  const height = attempts.length * ROW + AXIS;
  chart.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
  const from = Math.min(...attempts.map((a) => a.start));
  const to = Math.max(...attempts.map((a) => Math.max(a.activeEnd, a.open ? a.lease : a.activeEnd)), from + 1);
  const x = (at) => LABEL + ((at - from) / (to - from)) * (WIDTH - LABEL - 8);
  const nodes = [];
  attempts.forEach((attempt, row) => {
    const y = row * ROW + 6;
    const outcome = outcomeOf(attempt);
    const run = attempt.run;
    nodes.push(svg("text", { x: 4, y: y + 14, class: "label" }, `#${run.attempt} ${run.worker_id}`.slice(0, 16)));
    const left = x(attempt.start);
    nodes.push(svg("rect", { x: left, y, width: Math.max(2, x(attempt.end) - left), height: 18, rx: 2,
                             class: `bar outcome-${outcome}`, "data-attempt": run.attempt },
                   title(`attempt ${run.attempt} (${run.worker_id}): ${outcome}, ` +
                         `${localTime(run.claimed_at)} → ${run.finished_at ? localTime(run.finished_at) : "now"}`)));
    if (attempt.late !== null) {
      nodes.push(svg("line", { x1: x(attempt.end), x2: x(attempt.late), y1: y + 9, y2: y + 9, class: "zombie" }));
      nodes.push(svg("circle", { cx: x(attempt.late), cy: y + 9, r: 4, class: "late-report",
                                 "data-attempt": run.attempt },
                     title(`late report (${run.late_report}) from attempt ${run.attempt} at ` +
                           `${localTime(run.late_report_at)}: fenced, it changed nothing`)));
    }
    if (attempt.lease >= from && attempt.lease <= to) {
      nodes.push(svg("line", { x1: x(attempt.lease), x2: x(attempt.lease), y1: y - 2, y2: y + 20, class: "lease" },
                     title(`lease of attempt ${run.attempt} until ${localTime(run.lease_expires_at)}`)));
    }
  });
  attempts.forEach((attempt, row) => {
    for (const other of attempt.overlaps) {
      const index = attempts.findIndex((a) => a.run.attempt === other);
      if (index <= row) continue;
      const start = Math.max(attempt.start, attempts[index].start);
      const end = Math.min(attempt.activeEnd, attempts[index].activeEnd);
      nodes.push(svg("rect", { x: x(start), y: row * ROW + 2, width: Math.max(3, x(end) - x(start)),
                               height: (index - row) * ROW + 24, class: "overlap" },
                     title(`attempts ${attempt.run.attempt} and ${other} overlapped`)));
    }
  });
  const axisY = attempts.length * ROW + 14;
  nodes.push(svg("text", { x: LABEL, y: axisY, class: "axis" }, localTime(new Date(from).toISOString(), { date: false })));
  nodes.push(svg("text", { x: WIDTH - 4, y: axisY, class: "axis", "text-anchor": "end" },
                 localTime(new Date(to).toISOString(), { date: false })));
  chart.replaceChildren(...nodes);
}

function when(label, isoTime) {
  return [`${label} `, el("time", { dateTime: isoTime, title: utcTitle(isoTime) }, localTime(isoTime))];
}

// The same, as text: one item per attempt (what a screen reader reads, and the details the bars leave out).
export function attemptItem(attempt) {
  const run = attempt.run;
  const outcome = outcomeOf(attempt);
  const facts = [
    el("p", { className: "attempt-head" }, el("strong", {}, `Attempt ${run.attempt}`), " · ",
       el("span", { className: `outcome outcome-${outcome}` }, outcome.replace("_", " ")), ` · worker ${run.worker_id}`),
    el("p", {}, ...when("claimed", run.claimed_at), " · ",
       ...(run.finished_at ? [...when("finished", run.finished_at), ` (${duration(attempt.end - attempt.start)})`]
         : ["still running"]),
       // an archived attempt keeps no lease (GET /jobs/{id}/runs of an archived job)
       ...(run.lease_expires_at ? [" · ", ...when("lease until", run.lease_expires_at)] : [])),
  ];
  if (run.error) {
    facts.push(el("p", { className: "attempt-error" }, `${run.error.error_type}: ${run.error.message}` +
                  (run.error.message_truncated ? " (cut)" : "")));
  }
  if (attempt.fenced) {
    facts.push(el("p", { className: "fenced" }, "Fenced zombie: ",
                  ...(run.late_report_at ? when(`it reported ${run.late_report || "again"} at`, run.late_report_at)
                    : ["it reported"]),
                  ` after its run was closed${run.reclaimed_as ? ` (${run.reclaimed_as.replace("_", " ")})` : ""}; ` +
                  "the report changed nothing."));
  }
  facts.push(...runProgress(run));
  if (attempt.overlaps.length) {
    facts.push(el("p", { className: "overlapping" },
                  `Overlapped attempt${attempt.overlaps.length > 1 ? "s" : ""} ${attempt.overlaps.join(", ")}: ` +
                  "two workers held this job at once (the later one had the lease)."));
  }
  return facts;
}

export function summary(attempts) {
  if (!attempts.length) return "No attempt yet.";
  const parts = attempts.map((a) => `#${a.run.attempt} ${outcomeOf(a).replace("_", " ")}` +
                                    (a.run.error ? ` (${a.run.error.error_type})` : ""));
  const fenced = attempts.filter((a) => a.fenced).length;
  const overlapping = attempts.filter((a) => a.overlaps.length).length;
  return `${attempts.length} attempt${attempts.length === 1 ? "" : "s"}: ${parts.join(", ")}.` +
         (fenced ? ` ${fenced} fenced.` : "") + (overlapping ? ` ${overlapping} overlapping.` : "");
}
