// A job's tags (issue 38): shown as links that list the tenant's jobs carrying each one (#/jobs?tag=key:value).
"use strict";

import { el } from "/web/core.js";

export const TAG_FILTER = /^[a-z][a-z0-9_.-]{0,31}:[A-Za-z0-9_.:/@+-]{1,64}$/;

// The tags as one string (what changed, for setContent) and as link elements, in key order.
export function tagsKey(tags) {
  return JSON.stringify(Object.entries(tags || {}).sort());
}

export function tagLinks(tags) {
  return Object.entries(tags || {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, value]) =>
    el("a", { className: "tag", href: `#/jobs?tag=${encodeURIComponent(`${key}:${value}`)}`,
              title: `List the jobs tagged ${key}:${value}` }, `${key}:${value}`));
}
