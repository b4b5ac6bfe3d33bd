// The paused banner (issue 37): what holds jobs from starting, read from GET /pauses (a tenant: its own pauses
// and the types paused for every tenant) or GET /ops/pauses (an operator), with the platform's drain switch.
"use strict";

import { $, api, isOperator, setText } from "/web/core.js";

function pauseText(pause) {
  if (pause.type === null) return `tenant ${pause.tenant}`;
  if (pause.tenant === null) return `type ${pause.type} (every tenant)`;
  return `type ${pause.type} of tenant ${pause.tenant}`;
}

export function pausedText({ pauses, draining }) {
  const parts = [];
  if (draining) parts.push("The platform is drained for maintenance: no job starts until it is back.");
  if (pauses.length) {
    parts.push(`Paused: ${pauses.map(pauseText).join(", ")}. Their waiting jobs keep their place and start ` +
               "once resumed; running ones finish.");
  }
  return parts.join(" ");
}

// One poll; an answer other than 200 (an operator bound to no tenant asking /pauses) leaves the banner hidden.
export async function pollPauses() {
  const answer = await api("GET", isOperator() ? "/ops/pauses" : "/pauses");
  const text = answer.status === 200 ? pausedText(answer.data) : "";
  const notice = $("pause-notice");
  notice.hidden = !text;
  setText(notice, text);  // (changed only when what it says changes: it is announced)
}
