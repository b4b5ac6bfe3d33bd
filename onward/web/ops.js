// The operator's view (#/ops): tenants with weight, cap, running, waiting and their share of the last minutes'
// claims; the status view's lag per events-stream shard; dead and quarantined jobs with bulk replay; parked
// records and projection conflicts with their reasons. Each section shows the API's problem when refused.
"use strict";

import {
  $, agoEl, api, clearProblem, el, reconcile, say, setContent, setText, showProblem, state, timeEl,
} from "/web/core.js";

const COLORS = 8;  // tenant colours in the share chart (style.css: .tenant-0 ... .tenant-7), each with a pattern
const ops = { selected: new Set(), replaying: false, tenantsOrder: [] };

export async function pollOps() {
  const [tenants, lag, replayable, parked, conflicts] = await Promise.all([
    api("GET", "/ops/tenants"), api("GET", "/ops/lag"), api("GET", "/ops/replayable?limit=50"),
    api("GET", "/ops/parked?limit=50"), api("GET", "/ops/conflicts?limit=50")]);
  if ([tenants, lag, replayable, parked, conflicts].some((answer) => answer.status === 401)) return tenants;
  section(tenants, "tenants-problem", "listing tenants", renderTenants);
  section(lag, "shards-problem", "reading the lag", renderLag);
  section(replayable, "replayable-problem", "listing dead and quarantined jobs", renderReplayable);
  section(parked, "parked-problem", "listing parked records", renderParked);
  section(conflicts, "conflicts-problem", "listing conflicts", renderConflicts);
  return lag.status === 200 ? lag.data.view : null;
}

function section(answer, problemId, doing, render) {
  const box = $(problemId);
  const content = box.nextElementSibling;
  if (answer.status === 200) {
    clearProblem(box);
    content.hidden = false;
    render(answer.data);
  } else {
    showProblem(box, answer, doing);
    content.hidden = true;
  }
}

// --- tenants ------------------------------------------------------------------------------------------------

function colourOf(tenant) {
  let index = ops.tenantsOrder.indexOf(tenant);
  if (index < 0) index = ops.tenantsOrder.push(tenant) - 1;
  return `tenant-${index % COLORS}`;
}

function renderTenants(answer) {
  state.tenants = answer.tenants.map((tenant) => tenant.tenant_id);
  const rows = answer.tenants;
  reconcile($("tenants").querySelector("tbody"), rows, (row) => row.tenant_id, (row) => el("tr", {},
    el("th", { scope: "row", dataset: { label: "Tenant" } },
       el("span", { className: `swatch ${colourOf(row.tenant_id)}`, "aria-hidden": "true" }),
       el("a", { href: `#/jobs?tenant=${encodeURIComponent(row.tenant_id)}` }, row.tenant_id)),
    el("td", { className: "num", dataset: { label: "Weight" } }), el("td", { className: "num", dataset: { label: "Cap" } }),
    el("td", { className: "num", dataset: { label: "Running" } }), el("td", { className: "num", dataset: { label: "Waiting" } }),
    el("td", { className: "num share", dataset: { label: "Claims, 5 min" } })),
  (tr, row) => {
    const [, weight, cap, running, waiting, share] = tr.cells;
    setText(weight, String(row.weight));
    setText(cap, row.cap === null ? "none" : String(row.cap));
    setText(running, String(row.running));
    setText(waiting, String(row.waiting));
    const total = row.claims.reduce((a, b) => a + b, 0);
    setText(share, row.claim_share === null ? "no claims" : `${Math.round(row.claim_share * 100)} % (${total})`);
  });
  say("tenants-status", rows.length ? "" : "No tenant has submitted a job yet.");
  drawShares(answer);
}

// Stacked columns, one per minute of the window: each tenant's part of that minute's claims.
function drawShares(answer) {
  const chart = $("share-chart");
  const buckets = answer.tenants.length ? answer.tenants[0].claims.length : 0;
  const width = 300, height = 90, top = 4, bottom = 74, gap = 6;
  const columnWidth = buckets ? (width - gap * (buckets + 1)) / buckets : 0;
  const shapes = [];
  for (let bucket = 0; bucket < buckets; bucket += 1) {
    const total = answer.tenants.reduce((sum, tenant) => sum + tenant.claims[bucket], 0);
    const x = gap + bucket * (columnWidth + gap);
    let y = bottom;
    shapes.push(`<rect class="column" x="${x}" y="${top}" width="${columnWidth}" height="${bottom - top}"></rect>`);
    for (const tenant of answer.tenants) {
      const count = tenant.claims[bucket];
      if (!total || !count) continue;
      const h = (count / total) * (bottom - top);
      y -= h;
      shapes.push(`<rect class="part ${colourOf(tenant.tenant_id)}" x="${x}" y="${y.toFixed(1)}" ` +
                  `width="${columnWidth.toFixed(1)}" height="${h.toFixed(1)}"><title>${escapeXml(tenant.tenant_id)}: ` +
                  `${count} of ${total} claims</title></rect>`);
    }
    const label = bucket === buckets - 1 ? "last min" : `-${buckets - bucket} min`;
    shapes.push(`<text x="${x + columnWidth / 2}" y="86" text-anchor="middle">${label}</text>`);
  }
  const key = JSON.stringify(answer.tenants.map((t) => [t.tenant_id, t.claims]));
  if (chart.dataset.key !== key) {
    chart.dataset.key = key;
    chart.innerHTML = shapes.join("");  // numbers and escaped names only
  }
  const shares = answer.tenants.filter((t) => t.claim_share !== null)
    .map((t) => `${t.tenant_id} ${Math.round(t.claim_share * 100)} % (${t.claims.reduce((a, b) => a + b, 0)} claims)`);
  const window = answer.window;
  say("share-summary", (shares.length ? `Share of claims over the last ${Math.round(buckets * window.bucket_s / 60)} ` +
                        `minutes: ${shares.join(", ")}.` : "No claims in the last minutes.") +
                       (window.complete ? "" : ` Counted from the first ${window.examined} outbox entries only.`));
  $("share-legend").replaceChildren(...answer.tenants.map((tenant) => el("li", {},
    el("span", { className: `swatch ${colourOf(tenant.tenant_id)}`, "aria-hidden": "true" }), tenant.tenant_id)));
}

function escapeXml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// --- lag per shard ------------------------------------------------------------------------------------------

function renderLag(answer) {
  reconcile($("shards").querySelector("tbody"), answer.shards, (row) => row.shard_id, (row) => el("tr", {},
    el("th", { scope: "row", className: "mono", dataset: { label: "Shard" } }, row.shard_id),
    el("td", { dataset: { label: "Confirmed through" } }), el("td", { className: "num", dataset: { label: "Lag" } }),
    el("td", { dataset: { label: "Bounded by" } }), el("td", { dataset: { label: "Last heartbeat" } })),
  (tr, row) => {
    const [, through, lagCell, bounded, heartbeat] = tr.cells;
    setContent(through, String(row.confirmed_through), row.confirmed_through ? timeEl(row.confirmed_through) : "never");
    setText(lagCell, row.lag_s === null ? "unknown" : `${row.lag_s.toFixed(1)} s`);
    lagCell.className = `num ${row.stale ? "stale" : ""}`;
    setText(bounded, row.bounded_by === "parents" ? `its parents (${row.parents.join(", ")})`
      : row.bounded_by === "own" ? "its own watermark" : "unknown: not projected yet");
    setContent(heartbeat, String(row.processed_at), row.processed_at ? agoEl(row.processed_at) : "none");
  });
  const view = answer.view;
  say("shards-status", answer.shards.length
    ? `The whole view: ${view.view_lag_s === null ? "lag unknown" : `${view.view_lag_s.toFixed(1)} s behind`}` +
      `${view.stale ? ` (over ${view.stale_after_s} s: delayed)` : ""}.`
    : "No shard bounds the view yet.");
  const relay = answer.relay;
  const said = !relay ? ["Relay: no heartbeat passed on yet."]
    : relay.confirmed_through
      ? ["Relay (outbox stream to events stream): confirmed through ", timeEl(relay.confirmed_through),
         ` (${relay.lag_s.toFixed(1)} s behind).`]
      : ["Relay (outbox stream to events stream): no full heartbeat passed on yet."];
  setContent($("relay-lag"), JSON.stringify(relay), ...said);
}

// --- dead and quarantined, bulk replay ------------------------------------------------------------------------

function renderReplayable(answer) {
  const jobs = answer.tenants.flatMap((group) => group.jobs.map((job) => ({ ...job, tenant_id: group.tenant_id })));
  const shown = new Set(jobs.map((job) => job.job_id));
  for (const jobId of ops.selected) if (!shown.has(jobId)) ops.selected.delete(jobId);
  reconcile($("replayable").querySelector("tbody"), jobs, (job) => job.job_id, (job) => {
    const box = el("input", { type: "checkbox", value: job.job_id, "aria-label": `Select job ${job.job_id}` });
    box.addEventListener("change", () => {
      if (box.checked) ops.selected.add(job.job_id); else ops.selected.delete(job.job_id);
      renderSelection();
    });
    return el("tr", { dataset: { jobId: job.job_id } },
      el("td", { className: "pick", dataset: { label: "Select" } }, box),
      el("td", { dataset: { label: "Tenant" } }, job.tenant_id),
      el("td", { className: "job", dataset: { label: "Job" } },
         el("a", { href: `#/jobs/${job.job_id}`, title: job.job_id, "aria-label": `Job ${job.job_id}` },
            job.job_id.slice(0, 12))),
      el("td", { dataset: { label: "Type" } }, job.type),
      el("td", { className: "status-cell", dataset: { label: "Status" } },
         el("span", { className: `status status-${job.status}` }, job.status), el("span", { className: "reason" })),
      el("td", { className: "updated", dataset: { label: "Ended" } }));
  }, (tr, job) => {
    tr.cells[0].firstChild.checked = ops.selected.has(job.job_id);
    setText(tr.querySelector(".reason"), job.error ? `${job.error.error_type}: ${job.error.message}` : "");
    setContent(tr.cells[5], job.freshness.as_of, agoEl(job.freshness.as_of));
  });
  const more = answer.tenants.some((group) => group.cursor);
  say("replayable-status", jobs.length
    ? `${jobs.length} job${jobs.length === 1 ? "" : "s"} to review, newest first${more ? "; more in the tenants' lists" : ""}.`
    : "No dead or quarantined jobs.");
  renderSelection();
}

function renderSelection() {
  for (const box of document.querySelectorAll("#replayable tbody input[type=checkbox]")) {
    box.checked = ops.selected.has(box.value);
  }
  const count = ops.selected.size;
  const button = $("replay-selected");
  setText(button, `Replay selected (${count})`);
  button.disabled = !count || ops.replaying;
  const boxes = [...document.querySelectorAll("#replayable tbody input[type=checkbox]")];
  $("select-all").disabled = !boxes.length;
  setText($("select-all"), boxes.length && boxes.every((box) => box.checked) ? "Select none" : "Select all");
}

export function buildOps(onChange) {
  $("select-all").addEventListener("click", () => {
    const boxes = [...document.querySelectorAll("#replayable tbody input[type=checkbox]")];
    const all = boxes.every((box) => box.checked);
    for (const box of boxes) {
      box.checked = !all;
      if (box.checked) ops.selected.add(box.value); else ops.selected.delete(box.value);
    }
    renderSelection();
  });
  $("replay-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const jobIds = [...ops.selected];
    if (!jobIds.length) return;
    ops.replaying = true;
    renderSelection();
    const results = $("replay-results");
    say("replay-summary", `Replaying ${jobIds.length} job${jobIds.length === 1 ? "" : "s"}…`);
    try {
      const answer = await api("POST", "/ops/replay", { body: { job_ids: jobIds } });
      if (answer.status === 200) {
        say("replay-summary", `Replayed ${answer.data.replayed} of ${jobIds.length}:`);
        results.replaceChildren(...answer.data.results.map((result) => el("li",
          { className: result.status === 202 ? "ok" : "refused", dataset: { jobId: result.job_id } },
          el("a", { href: `#/jobs/${result.job_id}`, className: "mono" }, result.job_id.slice(0, 12)), ": ",
          result.status === 202 ? `queued again as version ${result.job.version} (HTTP 202)`
            : `${result.problem.title} (HTTP ${result.status}): ${result.problem.detail}`)));
        for (const result of answer.data.results) if (result.status === 202) ops.selected.delete(result.job_id);
      } else {
        const data = answer.data || {};
        say("replay-summary", `Nothing replayed: ${data.title || "HTTP"} (HTTP ${answer.status}): ${data.detail || ""}`);
        results.replaceChildren();
      }
    } catch {
      say("replay-summary", "Network error: the replay may or may not have reached the API; the list shows what happened.");
    } finally {
      ops.replaying = false;
      renderSelection();
    }
    onChange();
  });
}

// --- parked records and conflicts ------------------------------------------------------------------------------

function renderParked(answer) {
  reconcile($("parked").querySelector("tbody"), answer.records, (r) => `${r.source}#${r.shard_id}#${r.sequence_number}`,
    (record) => el("tr", {},
      el("td", { dataset: { label: "Source" } }, record.source),
      el("td", { className: "mono", dataset: { label: "Shard" } }, record.shard_id),
      el("td", { className: "mono wrap", dataset: { label: "Sequence" } }, record.sequence_number),
      el("td", { dataset: { label: "Parked" } }, timeEl(record.parked_at)),
      el("td", { className: "job", dataset: { label: "Job" } },
         record.job_id ? el("code", { title: record.job_id }, record.job_id.slice(0, 12)) : "unknown"),
      el("td", { dataset: { label: "Kind" } }, parkedKind(record)),
      el("td", { className: "reason-cell", dataset: { label: "Reason" } }, record.reason),
      el("td", { className: "num", dataset: { label: "Size" } },
         `${record.raw_size.toLocaleString()} B${record.raw_truncated ? " (cut)" : ""}`),
      el("td", { dataset: { label: "Starts with" } }, el("code", { className: "preview" }, record.preview))),
    () => {});
  say("parked-status", answer.records.length
    ? `${answer.records.length} parked record${answer.records.length === 1 ? "" : "s"}${answer.more ? " (more kept)" : ""}.`
    : "No parked records.");
}

// A poison record failed its consumer on every delivery; an unreadable one was parked at once. Either is replayed
// through the outbox by `onward redrive` once fixed, which marks it.
function parkedKind(record) {
  const kind = record.failures ? `poison (failed ${record.failures} deliveries)` : "unreadable";
  return record.redriven_at ? el("span", {}, `${kind}; redriven `, timeEl(record.redriven_at)) : kind;
}

function renderConflicts(answer) {
  reconcile($("conflicts").querySelector("tbody"), answer.conflicts, (c) => `${c.job_id}#${c.version}#${c.detected_at}`,
    (conflict) => el("tr", {},
      el("td", { className: "job", dataset: { label: "Job" } }, el("code", { title: conflict.job_id }, conflict.job_id.slice(0, 12))),
      el("td", { dataset: { label: "Tenant" } }, conflict.tenant_id || "unknown"),
      el("td", { className: "num", dataset: { label: "Version" } }, String(conflict.version)),
      el("td", { dataset: { label: "Detected" } }, conflict.detected_at ? timeEl(conflict.detected_at) : ""),
      el("td", { className: "reason-cell", dataset: { label: "Reason" } }, conflict.reason)),
    () => {});
  say("conflicts-status", answer.conflicts.length
    ? `${answer.conflicts.length} conflict${answer.conflicts.length === 1 ? "" : "s"} kept apart${answer.more ? " (more kept)" : ""}.`
    : "No projection conflicts.");
}
