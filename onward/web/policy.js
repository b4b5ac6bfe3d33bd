// The retry policy in force for a job (issue 37), on its page: its type's policy as its workers declared it
// (GET /job-types, read at most every TYPES_EVERY_MS) with the job's own attempt budget.
"use strict";

import { $, api, setText } from "/web/core.js";

const TYPES_EVERY_MS = 30_000;
let types = { at: 0, byName: null, platform: null };

async function declaredTypes() {
  if (types.byName && Date.now() - types.at < TYPES_EVERY_MS) return types;
  const reply = await api("GET", "/job-types");
  if (reply.status === 200) {
    types = { at: Date.now(), byName: new Map(reply.data.types.map((declared) => [declared.type, declared])),
              platform: reply.data.platform_default };
  }
  return types;
}

export function policyText(policy, maxAttempts) {
  const jitter = policy.jitter === "none" ? "no jitter" : `${policy.jitter} jitter`;
  const permanent = policy.permanent.length ? `; never retried after ${policy.permanent.join(", ")}` : "";
  return `${maxAttempts} attempt${maxAttempts === 1 ? "" : "s"} at most; waits from ${policy.base_s} s doubling ` +
         `up to ${policy.cap_s} s (${jitter})${permanent}; at most ${policy.max_snoozes} snoozes`;
}

// `params`: the job's GET /jobs/{id}/params answer (its type and max_attempts).
export async function renderPolicy(params) {
  const known = await declaredTypes();
  if (!known.byName) return;
  const declared = known.byName.get(params.type);
  const policy = declared ? declared.retry : known.platform;
  const source = declared ? ` (declared by ${declared.declared_by}, onward ${declared.worker_version})`
                          : " (the platform's defaults: no worker declared its type)";
  setText($("job-policy"), policyText(policy, params.max_attempts) + source);
}
