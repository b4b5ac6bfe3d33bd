// The webhooks view (#/webhooks): the tenant's endpoints, each with its recent deliveries; a failed one (no
// 2xx before its retry time ran out) offers Redeliver (POST .../redeliver), which queues it again.
"use strict";

import { $, api, localTime, problemText, reconcile, say, setText } from "/web/core.js";

const view = { redelivering: new Set() };

async function redeliver(webhookId, deliveryId) {
  view.redelivering.add(deliveryId);
  const answer = await api("POST", `/webhooks/${webhookId}/deliveries/${deliveryId}/redeliver`);
  view.redelivering.delete(deliveryId);
  say("webhooks-status", answer.status === 202
    ? `Delivery ${deliveryId.slice(0, 8)} queued again.`
    : `Redeliver refused: ${problemText(answer)}`);
  await pollWebhooks();
}

// A row is made once per delivery and updated in place (core.js `reconcile`), so a poll never takes the focus
// off its Redeliver button.
function createRow({ webhook, delivery }) {
  const row = document.createElement("tr");
  for (let index = 0; index < 8; index += 1) row.append(document.createElement("td"));
  row.cells[4].className = "num";
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Redeliver";
  button.setAttribute("aria-label", `Redeliver the ${delivery.status} event of job ${delivery.job_id}`);
  button.addEventListener("click", () => redeliver(webhook.webhook_id, delivery.delivery_id));
  row.cells[7].append(button);
  return row;
}

function updateRow(row, { webhook, delivery }) {
  row.className = `delivery-${delivery.state}`;
  const texts = [webhook.url, delivery.job_id.slice(0, 12), `${delivery.status} (v${delivery.version})`,
    delivery.state, String(delivery.attempts),
    delivery.last_error || (delivery.last_status_code ? `answered ${delivery.last_status_code}` : ""),
    localTime(delivery.created_at)];
  texts.forEach((text, index) => setText(row.cells[index], text));
  row.cells[1].title = delivery.job_id;
  const button = row.cells[7].firstChild;
  button.hidden = delivery.state !== "failed";
  button.disabled = view.redelivering.has(delivery.delivery_id);
}

// One poll: the endpoints, then each one's deliveries (failed first, then newest first).
export async function pollWebhooks() {
  const listed = await api("GET", "/webhooks");
  if (listed.status !== 200) {
    say("webhooks-status", problemText(listed));
    return listed.status === 401 ? listed : null;
  }
  const body = $("webhooks").querySelector("tbody");
  const items = [];
  for (const webhook of listed.data.webhooks) {
    const answer = await api("GET", `/webhooks/${webhook.webhook_id}/deliveries`);
    if (answer.status !== 200) continue;
    for (const delivery of answer.data.deliveries) items.push({ webhook, delivery });
  }
  items.sort((a, b) => (a.delivery.state === "failed" ? 0 : 1) - (b.delivery.state === "failed" ? 0 : 1));
  reconcile(body, items, (item) => item.delivery.delivery_id, createRow, updateRow);
  const failed = items.filter((item) => item.delivery.state === "failed").length;
  setText($("webhooks-summary"), listed.data.webhooks.length
    ? `${listed.data.webhooks.length} endpoint(s): ${listed.data.webhooks.map((w) => `${w.url} (${w.events.join(", ")})`).join("; ")}. ` +
      `${failed} failed deliveries.`
    : "No webhooks registered: POST /webhooks {\"url\", \"events\", \"secret\"}.");
  return null;
}
