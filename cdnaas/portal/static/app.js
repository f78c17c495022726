// CDNaaS portal: every figure shown comes from the customer API with the caller's token.
"use strict";

const $ = (selector) => document.querySelector(selector);
let token = sessionStorage.getItem("cdnaas-token") || "";
// A link may carry the token in its fragment (never sent to a server): keep it for
// this tab only and take it out of the address bar and history at once.
if (location.hash.startsWith("#token=")) {
  token = decodeURIComponent(location.hash.slice("#token=".length));
  sessionStorage.setItem("cdnaas-token", token);
  history.replaceState(null, "", location.pathname);
}

async function api(method, path, body) {
  const response = await fetch(`/api/v1${path}`, {
    method,
    headers: { "Authorization": `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    const error = (data && data.error) || { message: `HTTP ${response.status}` };
    throw new Error(error.field ? `${error.field}: ${error.message}` : error.message);
  }
  return data;
}

function cell(row, value, className) {
  const td = row.insertCell();
  td.textContent = value === null || value === undefined ? "-" : value;
  if (className) td.className = className;
  return td;
}

function showError(error) {
  const box = $("#error");
  box.hidden = !error;
  box.textContent = error ? String(error.message || error) : "";
}

async function loadCatalogue() {
  const [{ flavors }, { regions }] = await Promise.all([api("GET", "/flavors"), api("GET", "/regions")]);
  const flavorRows = $("#flavors tbody");
  flavorRows.replaceChildren();
  const select = $("#request select[name=flavor]");
  select.replaceChildren();
  for (const flavor of flavors) {
    const row = flavorRows.insertRow();
    cell(row, flavor.name); cell(row, flavor.technology); cell(row, flavor.description);
    select.add(new Option(flavor.name, flavor.name));
  }
  const regionRows = $("#regions tbody");
  regionRows.replaceChildren();
  const demands = $("#region-demands");
  demands.querySelectorAll(".region").forEach((node) => node.remove());
  for (const region of regions) {
    const row = regionRows.insertRow();
    cell(row, region.name); cell(row, region.description); cell(row, region.default ? "yes" : "");
    const line = document.createElement("div");
    line.className = "region";
    line.innerHTML = `<input type="checkbox" data-region> <b></b>
      <input type="number" min="1" value="1000" size="7" data-demand title="peak concurrent viewers">
      <input type="number" min="1" max="5" step="0.1" value="4.0" data-mos title="minimum MOS">`;
    line.querySelector("b").textContent = region.name;
    line.dataset.name = region.name;
    demands.append(line);
  }
}

function requestBody() {
  const form = $("#request");
  const regions = [...form.querySelectorAll(".region")]
    .filter((line) => line.querySelector("[data-region]").checked)
    .map((line) => ({
      name: line.dataset.name,
      demand: Number(line.querySelector("[data-demand]").value),
      quality: { min_mos: Number(line.querySelector("[data-mos]").value) },
    }));
  const end = new Date(Date.now() + Number(form.hours.value) * 3600 * 1000);
  return { name: form.name.value, flavor: form.flavor.value, origin: form.origin.value,
           regions, lease: { end: end.toISOString().replace(/\.\d+Z$/, "Z") } };
}

async function quote() {
  showError(null);
  try {
    const answer = await api("POST", "/quotes", requestBody());
    const box = $("#quote");
    box.hidden = false;
    box.innerHTML = `<h3>Quote: nothing is reserved yet</h3>
      <p><b></b> ${answer.price.currency} for ${answer.lease.hours} h:
      ${answer.vcpus} vCPUs, about ${answer.power_watts} W at peak, ${answer.energy_kwh} kWh over the lease</p>
      <table><thead><tr><th>Region</th><th>Viewers</th><th>Caches</th><th>vCPUs</th><th>Predicted MOS</th><th>Power (W)</th></tr></thead><tbody></tbody></table>`;
    box.querySelector("b").textContent = answer.price.amount;
    const rows = box.querySelector("tbody");
    for (const region of answer.regions) {
      const row = rows.insertRow();
      cell(row, region.name); cell(row, region.demand); cell(row, region.caches);
      cell(row, region.vcpus); cell(row, region.predicted_mos); cell(row, region.power_watts);
    }
  } catch (error) { showError(error); }
}

async function lease(event) {
  event.preventDefault();
  showError(null);
  try {
    const accepted = await api("POST", "/vcdns", requestBody());
    await loadVcdns();
    follow(accepted.operation.id);
  } catch (error) { showError(error); }
}

async function follow(operationId) {
  const box = $("#operation");
  box.hidden = false;
  for (let polls = 0; polls < 600; polls += 1) {
    const operation = await api("GET", `/operations/${operationId}`);
    box.innerHTML = `<h3>Operation <span class="state-${operation.state}">${operation.type} ${operation.state}</span></h3>`;
    for (const step of operation.steps) {
      const line = document.createElement("div");
      const share = step.total ? Math.round((100 * step.done) / step.total) : 0;
      line.innerHTML = `<span class="bar"><span style="width:${share}%"></span></span> `;
      line.append(`${step.name} (${step.done}/${step.total}) ${step.state}`);
      box.append(line);
    }
    if (operation.error) {
      const error = document.createElement("p");
      error.className = "error";
      error.textContent = operation.error;
      box.append(error);
    }
    if (!["PENDING", "PROCESSING"].includes(operation.state)) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await loadVcdns();
}

async function end(vcdnId) {
  try {
    const accepted = await api("DELETE", `/vcdns/${vcdnId}`);
    follow(accepted.operation.id);
  } catch (error) { showError(error); }
}

async function loadVcdns() {
  const { vcdns } = await api("GET", "/vcdns");
  const rows = $("#vcdns tbody");
  rows.replaceChildren();
  for (const vcdn of vcdns.filter((v) => v.state !== "DELETED")) {
    const row = rows.insertRow();
    const entry = vcdn.entry_point || {};
    cell(row, vcdn.name); cell(row, vcdn.flavor); cell(row, vcdn.state, `state-${vcdn.state}`);
    cell(row, vcdn.regions.map((r) => `${r.name}: ${r.demand} viewers, ${r.caches} caches, ${r.vcpus} vCPUs`)
      .join("; "));
    cell(row, entry.hostname); cell(row, (entry.dns_servers || []).join(", "));
    cell(row, vcdn.lease.end);
    const actions = row.insertCell();
    const details = document.createElement("button");
    details.textContent = "Details";
    details.onclick = () => openDetail(vcdn.id);
    const button = document.createElement("button");
    button.className = "secondary";
    button.textContent = "End";
    button.onclick = () => end(vcdn.id);
    actions.append(details, " ", button);
  }
}

// -- one vCDN's detail: charts of its metrics and the Instance Manager's decisions ------------

const DETAIL_REFRESH_MS = 10000;
const DECISIONS_SHOWN = 20;
let detail = { vcdnId: null, timer: null };

function openDetail(vcdnId) {
  closeDetail();
  detail = { vcdnId, timer: setInterval(refreshDetail, DETAIL_REFRESH_MS) };
  $("#detail").hidden = false;
  refreshDetail();
  $("#detail").scrollIntoView({ behavior: "smooth" });
}

function closeDetail() {
  clearInterval(detail.timer);
  detail = { vcdnId: null, timer: null };
  $("#detail").hidden = true;
}

// {region: minimum MOS} of the regions whose quality is a MOS.
function mosTargets(vcdn) {
  const targets = {};
  for (const region of vcdn.regions) {
    if (region.quality && region.quality.min_mos !== undefined) targets[region.name] = region.quality.min_mos;
  }
  return targets;
}

async function refreshDetail() {
  const vcdnId = detail.vcdnId;
  const hours = Number($("#detail-span").value);
  const since = new Date(Date.now() - hours * 3600 * 1000).toISOString();
  try {
    const [vcdn, metrics, { decisions }] = await Promise.all([
      api("GET", `/vcdns/${vcdnId}`),
      api("GET", `/vcdns/${vcdnId}/metrics?scope=region&since=${encodeURIComponent(since)}`),
      api("GET", `/vcdns/${vcdnId}/decisions`),
    ]);
    if (vcdnId !== detail.vcdnId) return;  // closed, or another vCDN opened meanwhile
    $("#detail-name").textContent = `${vcdn.name} (${vcdn.state})`;
    const spacing = metrics.step ? `a point per ${metrics.step} s` : "a point per pass";
    $("#detail-window").textContent = `${spacing}, refreshed every ${DETAIL_REFRESH_MS / 1000} s`;
    $("#charts").innerHTML = regionPanels(metrics, mosTargets(vcdn));
    const rows = $("#decisions tbody");
    rows.replaceChildren();
    for (const decision of decisions.slice(-DECISIONS_SHOWN).reverse()) {
      const row = rows.insertRow();
      cell(row, decision.created_at.slice(0, 19).replace("T", " "));
      cell(row, decision.kind); cell(row, decision.region || decision.host);
      cell(row, decision.outcome, `outcome-${decision.outcome}`); cell(row, decision.reason);
    }
  } catch (error) {
    closeDetail();
    showError(error);
  }
}

async function start() {
  if (!token) { $("#who").textContent = "paste your token"; return; }
  try {
    await loadCatalogue();
    await loadVcdns();
    $("#who").textContent = "signed in";
  } catch (error) {
    $("#who").textContent = "";
    showError(error);
  }
}

$("#login").addEventListener("submit", (event) => {
  event.preventDefault();
  token = $("#token").value.trim();
  sessionStorage.setItem("cdnaas-token", token);
  start();
});
$("#quote-button").addEventListener("click", quote);
$("#detail-close").addEventListener("click", closeDetail);
$("#detail-span").addEventListener("change", () => { if (detail.vcdnId) refreshDetail(); });
$("#request").addEventListener("submit", lease);
start();
