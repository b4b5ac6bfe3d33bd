// A running attempt's progress (issue 38): the status's `progress` as a bar in the job's facts, and the
// latest update written on each attempt's run record in its item of the attempts list.
"use strict";

import { $, agoEl, el, setContent } from "/web/core.js";

function percent(fraction) {
  return `${Math.round(fraction * 100)}%`;
}

// The facts row: shown while the status carries progress (running, and reported), hidden otherwise.
export function renderProgress(answer) {
  const progress = answer && answer.visible && !answer.archived ? answer.progress : null;
  $("job-progress-label").hidden = !progress;
  $("job-progress").hidden = !progress;
  if (!progress) {
    setContent($("job-progress"), "none");
    return;
  }
  setContent($("job-progress"), JSON.stringify(progress),
             el("progress", { id: "job-progress-bar", max: 1, value: progress.fraction,
                              "aria-label": `progress of attempt ${progress.attempt}` }),
             " ", el("span", { id: "job-progress-text" },
                     `${percent(progress.fraction)}${progress.message ? ` · ${progress.message}` : ""}`),
             el("span", { className: "muted" }, ` · attempt ${progress.attempt}, reported `, agoEl(progress.at)));
}

// An attempt item's line for its run record's latest progress update, if it has one.
export function runProgress(run) {
  if (!run.progress) return [];
  const { fraction, message } = run.progress;
  return [el("p", { className: "attempt-progress" }, run.finished_at ? "Last progress" : "Progress",
             el("progress", { max: 1, value: fraction }), ` ${percent(fraction)}${message ? `: ${message}` : ""}`)];
}
