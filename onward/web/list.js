// The list of jobs: filters (statuses, type, id, and for operators the tenant) that live in the URL
// (#/jobs?status=dead,quarantined&type=demo.fail&id=3fa&tenant=acme&cursor=...), counts by status, newest
// first with paging by the API's cursors. Rows are kept and updated in place while polling.
"use strict";

import {
  $, agoEl, api, clearProblem, el, isOperator, isPlatformOperator, isReplayable, reconcile, say,
  setContent, setText, showProblem, state,
} from "/web/core.js";
import { TAG_FILTER, tagLinks, tagsKey } from "/web/tags.js";

const PAGE_SIZE = 20;
const COUNTS_EVERY = 5;  // polls between counts of a large tenant: a count reads its index entries
const CHEAP_COUNT = 1000;  // index entries a count may read on every poll
const JOB_ID = /^[0-9a-f]{32}$/;

const list = {
  filter: null,        // what the URL asks for
  key: "",             // the filter as one string, to drop answers to an older one
  earlier: [],         // cursors of the pages before this one, to go back
  next: null,          // the cursor of the next (older) page
  polls: 0,
  countsKey: "",
  countsExamined: 0,
};

export function filterOf(params) {
  return {
    status: (params.get("status") || "").split(",").filter(Boolean),
    type: params.get("type") || "",
    id: (params.get("id") || "").trim().toLowerCase(),
    tenant: params.get("tenant") || "",
    cursor: params.get("cursor") || "",
    tag: (params.get("tag") || "").trim(),  // tags (issue 38)
  };
}

export function hashOf(filter) {
  const params = new URLSearchParams();
  if (filter.tenant) params.set("tenant", filter.tenant);
  if (filter.status && filter.status.length) params.set("status", filter.status.join(","));
  if (filter.type) params.set("type", filter.type);
  if (filter.id) params.set("id", filter.id);
  if (filter.tag) params.set("tag", filter.tag);  // tags (issue 38)
  if (filter.cursor) params.set("cursor", filter.cursor);
  const query = params.toString().replaceAll("%2C", ",");
  return `#/jobs${query ? `?${query}` : ""}`;
}

// The tenant this list is of: a tenant's own, or the one an operator bound to no tenant picked.
function listedTenant() {
  return isPlatformOperator() ? list.filter.tenant : "";
}

function apiQuery(extra = {}) {
  const params = new URLSearchParams();
  const tenant = listedTenant();
  if (tenant) params.set("tenant", tenant);
  for (const [name, value] of Object.entries(extra)) if (value) params.set(name, value);
  return params.toString().replaceAll("%2C", ",");
}

// --- the filter form ------------------------------------------------------------------------------------------

export function buildFilterForm() {
  const statuses = $("filter-statuses");
  statuses.replaceChildren(el("legend", {}, "Status"), ...state.contract.states.map((status) => el("label",
    { className: "check" }, el("input", { type: "checkbox", name: "status", value: status }), ` ${status}`)));
  $("filter-type").replaceChildren(el("option", { value: "" }, "Any type"),
                                   ...state.contract.types.map((type) => el("option", { value: type }, type)));
  const form = $("filter-form");
  form.addEventListener("change", (event) => {
    if (event.target.id !== "filter-id" && event.target.id !== "filter-tag") applyFilter();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    applyFilter();
  });
}

export function offerTenants() {
  const select = $("filter-tenant");
  const wanted = ["", ...state.tenants];
  const shown = [...select.options].map((option) => option.value);
  if (JSON.stringify(shown) !== JSON.stringify(wanted)) {
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "" }, "Choose a tenant"),
                           ...state.tenants.map((tenant) => el("option", { value: tenant }, tenant)));
    select.value = list.filter ? list.filter.tenant : chosen;
  }
  $("filter-tenant-field").hidden = !isPlatformOperator();
}

function applyFilter() {
  const id = $("filter-id").value.trim().toLowerCase();
  if (JOB_ID.test(id)) {  // a whole job id: its page
    location.hash = `#/jobs/${id}`;
    return;
  }
  const filter = {
    tenant: $("filter-tenant").value,
    status: [...document.querySelectorAll('#filter-statuses input:checked')].map((box) => box.value),
    type: $("filter-type").value,
    id,
    cursor: "",
    tag: $("filter-tag").value.trim(),
  };
  if (filter.tag && !TAG_FILTER.test(filter.tag)) {  // tags (issue 38): said here, not as the API's 400
    $("filter-tag").setCustomValidity("A tag is key:value, e.g. env:prod");
    $("filter-tag").reportValidity();
    return;
  }
  $("filter-tag").setCustomValidity("");
  list.earlier = [];
  location.hash = hashOf(filter);
}

function showFilter(filter) {
  $("filter-tenant").value = filter.tenant;
  for (const box of document.querySelectorAll("#filter-statuses input")) box.checked = filter.status.includes(box.value);
  $("filter-type").value = filter.type;
  if (document.activeElement !== $("filter-id")) $("filter-id").value = filter.id;
  if (document.activeElement !== $("filter-tag")) $("filter-tag").value = filter.tag;
  const narrowed = filter.status.length || filter.type || filter.id || filter.tag;
  $("clear-filters").hidden = !narrowed;
}

// --- the view -----------------------------------------------------------------------------------------------

export function showList(params) {
  const filter = filterOf(params);
  const key = JSON.stringify(filter);
  say("jobs-heading", isPlatformOperator() ? (filter.tenant ? `Jobs of ${filter.tenant}` : "Jobs") : "Your jobs");
  if (key === list.key) return;
  const samePages = list.filter && JSON.stringify({ ...list.filter, cursor: "" }) === JSON.stringify({ ...filter, cursor: "" });
  if (!samePages) list.earlier = [];
  list.filter = filter;
  list.key = key;
  list.next = null;
  showFilter(filter);
  $("jobs").querySelector("tbody").replaceChildren();  // another filter or page: other rows
  renderPager();
}

export async function pollList() {
  if (!list.filter) return null;
  if (isPlatformOperator() && !list.filter.tenant) {
    clearProblem($("list-problem"));
    say("list-status", "Choose a tenant to list its jobs.");
    $("jobs").querySelector("tbody").replaceChildren();
    $("counts").hidden = true;
    return null;
  }
  const key = list.key;
  const filter = list.filter;
  const query = apiQuery({ limit: String(PAGE_SIZE), status: filter.status.join(","), type: filter.type,
                           id_prefix: filter.id, cursor: filter.cursor, tag: filter.tag });
  const countsKey = apiQuery({ type: filter.type, tag: filter.tag });
  const wantCounts = countsKey !== list.countsKey || list.countsExamined <= CHEAP_COUNT ||
                     list.polls % COUNTS_EVERY === 0;
  list.polls += 1;
  const [answer, counted] = await Promise.all([
    api("GET", `/jobs?${query}`),
    wantCounts ? api("GET", `/jobs/counts?${countsKey}`) : Promise.resolve(null),
  ]);
  if (key !== list.key) return answer.status === 200 ? answer.data.view : null;  // the filter changed meanwhile
  if (counted) {
    if (counted.status === 200) {
      list.countsKey = countsKey;
      list.countsExamined = counted.data.examined;
      renderCounts(counted.data, filter);
    } else {
      $("counts").hidden = true;
    }
  }
  if (answer.status === 401) return answer;
  if (answer.status !== 200) {
    showProblem($("list-problem"), answer, "listing jobs");
    $("jobs").querySelector("tbody").replaceChildren();
    say("list-status", "The list could not be shown.");
    list.next = null;
    renderPager();
    return null;
  }
  clearProblem($("list-problem"));
  list.next = answer.data.cursor;
  renderJobs(answer.data.jobs, filter);
  renderPager();
  return answer.data.view;
}

function renderJobs(jobs, filter) {
  reconcile($("jobs").querySelector("tbody"), jobs, (job) => job.job_id, jobRow, updateRow);
  const narrowed = filter.status.length || filter.type || filter.id || filter.tag;
  const page = list.earlier.length + (filter.cursor && !list.earlier.length ? 2 : 1);
  let text;
  if (jobs.length) {
    text = `Showing ${jobs.length} job${jobs.length === 1 ? "" : "s"}, most recent first` +
           (filter.cursor ? ` (page ${page}).` : ".");
  } else if (list.next) {
    text = "No matches among the jobs searched so far: older jobs may still match. Press “Older” to search on.";
  } else if (filter.cursor) {
    text = "No more jobs.";
  } else if (narrowed) {
    text = "No jobs match these filters.";
  } else {
    text = "No jobs yet.";
  }
  say("list-status", text);
}

function jobRow(job) {
  const link = el("a", { href: `#/jobs/${job.job_id}`, className: "job-link", title: job.job_id,
                         "aria-label": `Job ${job.job_id}` }, job.job_id.slice(0, 12));
  const row = el("tr", { dataset: { jobId: job.job_id } },
    el("td", { className: "job", dataset: { label: "Job" } }, link),
    el("td", { className: "type", dataset: { label: "Type" } }),
    el("td", { className: "status-cell", dataset: { label: "Status" } },
       el("span", { className: "status" }), el("span", { className: "reason" })),
    el("td", { className: "updated", dataset: { label: "Updated" } }),
    el("td", { className: "num version", dataset: { label: "Version" } }),
    el("td", { className: "num attempt", dataset: { label: "Attempt" } }),
    el("td", { className: "actions", dataset: { label: "Actions" } }));
  return row;
}

function updateRow(row, job) {
  const [, type, statusCell, updated, version, attempt, actions] = row.cells;
  // tags (issue 38): under the type, each a link to the jobs carrying it
  setContent(type, `${job.type} ${tagsKey(job.tags)}`, job.type,
             ...(Object.keys(job.tags || {}).length ? [el("span", { className: "tags" }, ...tagLinks(job.tags))] : []));
  const status = statusCell.querySelector(".status");
  setText(status, job.status + (job.cancel_requested && !job.terminal ? " (cancel requested)" : ""));
  status.className = `status status-${job.status}`;
  // why it failed (dead, quarantined, or the last attempt of a job waiting to retry)
  setText(statusCell.querySelector(".reason"), job.error ? `${job.error.error_type}: ${job.error.message}` : "");
  if (updated.dataset.asOf !== job.freshness.as_of) {  // when the shown status became true
    updated.dataset.asOf = job.freshness.as_of;
    updated.replaceChildren("updated ", agoEl(job.freshness.as_of));
  }
  setText(version, String(job.version));
  setText(attempt, String(job.attempt));
  const canCancel = !job.terminal && !job.cancel_requested;
  const canReplay = isOperator() && isReplayable(job.status);
  setContent(actions, `${canCancel}|${canReplay}`,
    ...(canCancel ? [actionButton("Cancel", `Cancel job ${job.job_id}`, () => act(job.job_id, "cancel"))] : []),
    ...(canReplay ? [actionButton("Replay", `Replay job ${job.job_id}`, () => act(job.job_id, "replay"))] : []));
}

function actionButton(text, label, onClick) {
  const button = el("button", { type: "button", "aria-label": label }, text);
  button.addEventListener("click", async () => {
    button.disabled = true;
    await onClick();
  });
  return button;
}

async function act(jobId, action) {
  const status = $("action-status");
  try {
    const answer = await api("POST", `/jobs/${jobId}/${action}`);
    if (answer.status === 202) {
      setText(status, action === "cancel"
        ? `Job ${jobId}: ${answer.data.status.replace("_", " ")}.`
        : `Job ${jobId}: queued again as version ${answer.data.version}.`);
    } else {
      setText(status, `Job ${jobId}: ${problemLine(answer)}`);
    }
  } catch {
    setText(status, `Job ${jobId}: network error; the ${action} may not have reached the API.`);
  }
  await pollList();  // the answer's effect at once
}

function problemLine(answer) {
  const data = answer.data || {};
  return data.title ? `${data.title} (HTTP ${answer.status}): ${data.detail}` : `HTTP ${answer.status}`;
}

function renderCounts(answer, filter) {
  const box = $("counts");
  box.hidden = false;
  const items = state.contract.states.map((status) => {
    const count = answer.counts[status] ?? 0;
    const selected = filter.status.length === 1 && filter.status[0] === status;
    return { status, count, selected };
  });
  reconcile(box.querySelector("ul"), items, (item) => item.status, (item) => el("li", {},
    el("a", { href: hashOf({ ...filter, status: [item.status], cursor: "" }), className: `count status-${item.status}` },
       el("span", { className: "count-name" }, item.status), " ", el("span", { className: "count-value" }))),
  (node, item) => {
    const link = node.querySelector("a");
    link.href = hashOf({ ...filter, status: [item.status], cursor: "" });
    setText(link.querySelector(".count-value"), String(item.count));
    link.setAttribute("aria-label", `${item.count} ${item.status}`);
    if (item.selected) link.setAttribute("aria-current", "true"); else link.removeAttribute("aria-current");
  });
  setText($("counts-caption"), answer.complete
    ? `By status${filter.type ? ` (${filter.type})` : ""}${filter.tag ? ` (tagged ${filter.tag})` : ""}:`
    : `By status, of the newest ${answer.examined.toLocaleString()} jobs:`);
}

// --- paging: newest first; the API's cursor goes older, the cursors seen so far go back -------------------------

export function buildPager() {
  // the same filter on another page keeps the cursors seen so far (showList), so "Newer" can go back
  $("page-older").addEventListener("click", () => {
    if (!list.next) return;
    list.earlier.push(list.filter.cursor);
    location.hash = hashOf({ ...list.filter, cursor: list.next });
  });
  $("page-newer").addEventListener("click", () => {
    const cursor = list.earlier.length ? list.earlier.pop() : "";
    location.hash = hashOf({ ...list.filter, cursor });
  });
}

function renderPager() {
  $("page-newer").disabled = !(list.filter && list.filter.cursor);
  $("page-older").disabled = !list.next;
}

export function focusSearch() {
  $("filter-id").focus();
}
