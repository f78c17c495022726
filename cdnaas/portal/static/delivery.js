// CDNaaS portal: the open vCDN's delivery options (cdnaas.delivery: origins, response
// rules), each shown and edited as the JSON the API takes; a save PATCHes those changed
// (each replaces the option whole; secrets shown as **** must be typed again).
"use strict";

const DELIVERY_FIELDS = ["origins", "response_rules"];

function fillDelivery(vcdn) {
  const form = $("#delivery");
  for (const field of DELIVERY_FIELDS) {
    if (!form[field]) continue;
    const value = vcdn[field] === undefined ? {} : vcdn[field];
    form[field].value = JSON.stringify(value, null, 2);
    form[field].dataset.shown = form[field].value;
  }
}

async function submitDelivery(event) {
  event.preventDefault();
  const form = $("#delivery");
  const body = {};
  for (const field of DELIVERY_FIELDS) {
    if (!form[field] || form[field].value === form[field].dataset.shown) continue;
    try {
      body[field] = form[field].value.trim() ? JSON.parse(form[field].value) : null;
    } catch (error) {
      showError(`${field} is not JSON: ${error.message}`);
      return;
    }
  }
  if (!Object.keys(body).length) { showError("Nothing changed in the delivery options."); return; }
  await patchVcdn(body);
}

function setUpDelivery() {
  $("#delivery").addEventListener("submit", submitDelivery);
}
