// CDNaaS portal: the open vCDN's log streams (destinations its access records are pushed to,
// changed by PATCH as every change) and what each VNF's shipper sent and dropped.
"use strict";

function fillLogStreams(vcdn) {
  const streams = vcdn.log_streams || [];
  $("#log-streams").streams.value = streams.length ? JSON.stringify(streams, null, 2) : "";
  $("#log-stream-counts tbody").replaceChildren();
  $("#log-stream-note").textContent = streams.length ? "" : "No log streams.";
}

async function submitLogStreams(event) {
  event.preventDefault();
  const text = $("#log-streams").streams.value.trim();
  let streams;
  try {
    streams = text ? JSON.parse(text) : [];
  } catch (error) {
    showError(`The log streams are not JSON: ${error.message}`);
    return;
  }
  await patchVcdn({ log_streams: streams });
}

async function showLogStreamCounts() {
  showError(null);
  const vcdnId = detail.vcdnId;
  try {
    const found = await api("GET", `/vcdns/${vcdnId}/log-streams`);
    if (vcdnId !== detail.vcdnId) return;
    const rows = $("#log-stream-counts tbody");
    rows.replaceChildren();
    for (const vnf of found.vnfs) {
      const destinations = (vnf.shipper || {}).destinations || [{ name: "-", last_error: "no shipper answers" }];
      for (const destination of destinations) {
        const row = rows.insertRow();
        for (const value of [vnf.name, destination.name, destination.target]) cell(row, value);
        for (const value of [destination.sent, destination.dropped, destination.queued, destination.failures]) {
          cell(row, figure(value), "number");
        }
        cell(row, destination.last_error);
      }
    }
    const totals = found.totals;
    $("#log-stream-note").textContent = `Received ${figure(totals.received)}, sent ${figure(totals.sent)}, `
      + `dropped ${figure(totals.dropped)} (counts since each shipper started).`;
  } catch (error) { showError(error); }
}

function setUpLogStreams() {
  $("#log-streams").addEventListener("submit", submitLogStreams);
  $("#log-stream-refresh").addEventListener("click", showLogStreamCounts);
}
