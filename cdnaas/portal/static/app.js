// CDNaaS portal: every figure shown comes from the customer API with the caller's token.
// This file: the catalogue, leasing (quote, create), the list of vCDNs (filters, pages),
// operations followed to their end, ending a vCDN, and one vCDN's detail (monitoring).
"use strict";

let catalogue = { flavors: [], regions: [] };

// -- the catalogue and the order form ----------------------------------------------------------

async function loadCatalogue() {
  const [{ flavors }, { regions }] = await Promise.all([api("GET", "/flavors"), api("GET", "/regions")]);
  catalogue = { flavors, regions };
  const flavorRows = $("#flavors tbody");
  flavorRows.replaceChildren();
  const select = $("#request select[name=flavor]");
  select.replaceChildren();
  for (const flavor of flavors) {
    const row = flavorRows.insertRow();
    cell(row, flavor.name); cell(row, flavor.technology);
    cell(row, (flavor.quality_targets || []).join(", ")); cell(row, flavor.description);
    select.add(new Option(flavor.name, flavor.name));
  }
  const regionRows = $("#regions tbody");
  regionRows.replaceChildren();
  const demands = $("#region-demands");
  demands.querySelectorAll(".region").forEach((node) => node.remove());
  for (const region of regions) {
    const row = regionRows.insertRow();
    cell(row, region.name); cell(row, region.description); cell(row, region.default ? "yes" : "");
    const line = element("div", { className: "region", "data-name": region.name }, [
      element("label", { className: "inline" }, [element("input", { type: "checkbox", "data-region": true }), ` ${region.name}`]),
      element("input", { type: "number", min: 1, value: 1000, "data-demand": true,
                         "aria-label": `Peak viewers in ${region.name}` }),
      element("span", { "aria-hidden": "true", className: "unit", text: "viewers," }),
      element("span", { "aria-hidden": "true", className: "unit", "data-target-unit": true }),
      element("input", { type: "number", "data-target": true }),
    ]);
    demands.append(line);
  }
  qualityKindChanged();
}

// The order form's target inputs follow its quality kind: a minimum MOS or a maximum time.
function qualityKindChanged() {
  const form = $("#request");
  const mos = form.quality.value === "min_mos";
  form.querySelector(".for-response-time").hidden = mos;
  for (const line of form.querySelectorAll(".region")) {
    const input = line.querySelector("[data-target]");
    Object.assign(input, mos ? { min: 1, max: 5, step: 0.1, value: "4.0" } : { min: 1, max: 3600000, step: 1, value: 200 });
    input.setAttribute("aria-label", `${mos ? "Minimum MOS" : "Response time (ms)"} in ${line.dataset.name}`);
    line.querySelector("[data-target-unit]").textContent = mos ? "MOS at least" : "response time (ms) at most";
  }
}

function requestBody() {
  const form = $("#request");
  const quality = (target) => (form.quality.value === "min_mos" ? { min_mos: target }
    : { response_time: { percentile: Number(form.percentile.value), max_ms: target } });
  const regions = [...form.querySelectorAll(".region")]
    .filter((line) => line.querySelector("[data-region]").checked)
    .map((line) => ({
      name: line.dataset.name,
      demand: Number(line.querySelector("[data-demand]").value),
      quality: quality(Number(line.querySelector("[data-target]").value)),
    }));
  if (!regions.length) throw new Error("Tick at least one region and give its peak viewers.");
  const end = new Date(Date.now() + Number(form.hours.value) * 3600 * 1000);
  const body = { flavor: form.flavor.value, origin: form.origin.value,
                 regions, lease: { end: end.toISOString().replace(/\.\d+Z$/, "Z") } };
  if (form.name.value) body.name = form.name.value;  // a quote needs none; a lease is told it does
  const hostnames = lines(form.hostnames.value);
  if (hostnames.length) body.hostnames = hostnames;
  if (form.certificate.value.trim() || form.private_key.value.trim()) {
    body.certificate = { certificate: form.certificate.value, private_key: form.private_key.value };
  }
  return body;
}

// The vCPUs of a quote's or a vCDN's regions, said as the CLI says them: caches', then every VNF's.
function vcpusText(regions) {
  const sum = (key) => regions.reduce((total, region) => total + (region[key] || 0), 0);
  return `${sum("cache_vcpus")} vCPUs in caches, ${sum("vcpus")} in all (caches, balancers, DNS)`;
}

async function quote() {
  showError(null);
  try {
    const answer = await api("POST", "/quotes", requestBody());
    const box = $("#quote");
    box.hidden = false;
    box.innerHTML = `<h3>Quote: nothing is reserved yet</h3>
      <p class="price"><b></b> for <span></span> h:
      ${vcpusText(answer.regions)}, about ${answer.power_watts} W at peak, ${answer.energy_kwh} kWh over the lease</p>
      <table aria-label="Quote per region"><thead><tr><th>Region</th><th>Viewers</th><th>Caches</th><th>Cache vCPUs</th><th>All vCPUs</th><th>Predicted MOS</th><th>Power (W)</th></tr></thead><tbody></tbody></table>`;
    box.querySelector("b").textContent = `${answer.price.amount} ${answer.price.currency}`;
    box.querySelector("span").textContent = answer.lease.hours;
    const rows = box.querySelector("tbody");
    for (const region of answer.regions) {
      const row = rows.insertRow();
      cell(row, region.name); cell(row, region.demand); cell(row, region.caches);
      cell(row, region.cache_vcpus); cell(row, region.vcpus);
      cell(row, region.predicted_mos); cell(row, region.power_watts);
    }
  } catch (error) { showError(error); }
}

async function lease(event) {
  event.preventDefault();
  showError(null);
  clearOperation();
  const form = $("#request");
  try {
    const accepted = await api("POST", "/vcdns", requestBody());
    form.private_key.value = "";  // the key leaves the page once sent
    $("#quote").hidden = true;
    await loadVcdns();
    follow(accepted.operation, accepted.vcdn.name);
  } catch (error) { showError(error); }
}

// -- operations --------------------------------------------------------------------------------

let following = 0;  // the operation shown; a newer one replaces it

// Show an operation's progress in the banner until it ends; refresh the list (and the open
// vCDN, which `done` redraws) before showing the end, so what the page shows then is current.
async function follow(operation, name, done) {
  const mine = ++following;
  $("#operation").hidden = false;
  for (let polls = 0; polls < 600; polls += 1) {
    if (polls) operation = await api("GET", `/operations/${operation.id}`).catch((error) => ({ ...operation, error: error.message }));
    if (mine !== following) return;
    if (!["PENDING", "PROCESSING"].includes(operation.state)) break;
    showOperation(operation, name);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await loadVcdns().catch(showError);
  if (done) await done();
  if (mine === following) showOperation(operation, name);
}

// Take the last operation's end off the banner (a new request is on its way).
function clearOperation() {
  following += 1;
  $("#operation").hidden = true;
  $("#operation").replaceChildren();
}

function showOperation(operation, name) {
  const box = $("#operation");
  const title = element("h3", {}, [`Operation on ${name}: `,
    element("span", { className: `state-${operation.state}`, text: `${operation.type} ${operation.state}` })]);
  const steps = element("div", { className: "steps" });
  for (const step of operation.steps || []) {
    const share = step.total ? Math.round((100 * step.done) / step.total) : 0;
    const bar = element("span", { className: "bar", role: "progressbar", "aria-label": step.name,
                                  "aria-valuenow": share, "aria-valuemin": 0, "aria-valuemax": 100 },
                        [element("span", { style: `width:${share}%` })]);
    steps.append(element("span", { className: "step" }, [bar, ` ${step.name} (${step.done}/${step.total}) ${step.state}`]));
  }
  box.replaceChildren(title, steps);
  if (operation.error) box.append(element("p", { className: "error", text: operation.error }));
  if (!["PENDING", "PROCESSING"].includes(operation.state)) {
    const dismiss = element("button", { type: "button", className: "link", text: "\u00d7", "aria-label": "Dismiss the operation" });
    dismiss.onclick = () => { box.hidden = true; };
    title.append(dismiss);
  }
}

// Ask, then end `vcdn` (If-Match `etag`, when known) and follow the operation.
async function end(vcdn, etag) {
  showError(null);
  if (!(await confirmEnd(vcdn))) return;
  clearOperation();
  try {
    const { data } = await apiCall("DELETE", `/vcdns/${vcdn.id}`, { ifMatch: etag });
    follow(data.operation, vcdn.name, () => (detail.vcdnId === vcdn.id ? reloadDetail() : null));
  } catch (error) {
    showError(error);
    if (error.status === 412) await loadVcdns().catch(showError);
  }
}

// -- the list: filters and pages ---------------------------------------------------------------

const PAGE_SIZE = 10;
let page = { markers: [null], next: null };  // markers[i]: the marker of page i+1

function etagOf(vcdn) {
  return `"${vcdn.revision}"`;
}

async function loadVcdns() {
  const filters = $("#filters");
  const { vcdns, next } = await api("GET", `/vcdns${query({
    state: filters.state.value, name: filters.name.value.trim(),
    include_deleted: filters.include_deleted.checked ? "true" : "",
    limit: PAGE_SIZE, marker: page.markers[page.markers.length - 1] })}`);
  page.next = next;
  $("#page-next").disabled = !next;
  $("#page-first").disabled = page.markers.length === 1;
  $("#page-info").textContent = `page ${page.markers.length}`;
  const rows = $("#vcdns tbody");
  rows.replaceChildren();
  if (!vcdns.length) {
    const row = rows.insertRow();
    cell(row, "No vCDNs here: lease one above.", "muted").colSpan = 8;
  }
  for (const vcdn of vcdns) {
    const row = rows.insertRow();
    const entry = vcdn.entry_point || {};
    cell(row, vcdn.name); cell(row, vcdn.flavor); cell(row, vcdn.state, `state-${vcdn.state}`);
    cell(row, vcdn.regions.map((r) => `${r.name}: ${r.demand} viewers, ${r.caches} caches`)
      .join("; ") + `; ${vcpusText(vcdn.regions)}`);
    cell(row, entry.hostname); cell(row, (entry.dns_servers || []).join(", "));
    cell(row, vcdn.lease.end);
    const actions = row.insertCell();
    actions.className = "actions-cell";
    const details = element("button", { type: "button", text: "Manage", "aria-label": `Manage ${vcdn.name}` });
    details.onclick = () => openDetail(vcdn.id);
    actions.append(details);
    if (!["DELETING", "DELETED"].includes(vcdn.state)) {
      const button = element("button", { type: "button", className: "danger", text: "End", "aria-label": `End ${vcdn.name}` });
      button.onclick = () => end(vcdn, etagOf(vcdn));
      actions.append(" ", button);
    }
  }
}

// What the operator lets this tenant hold, and what it holds now (GET /quotas).
const QUOTA_LABELS = { vcdns: "vCDNs", vcpus_per_region: "vCPUs in a region",
  hostnames: "custom hostnames", purges_per_hour: "purges this hour" };

async function loadQuotas() {
  let answer;
  try {
    answer = await api("GET", "/quotas");
  } catch (error) {  // an operator has no quotas of its own
    $("#quotas").textContent = "";
    return;
  }
  $("#quotas").textContent = "Quotas: " + answer.quotas.map(
    (q) => `${QUOTA_LABELS[q.name] || q.name} ${q.in_use} of ${q.limit}`).join(" · ");
}

function firstPage() {
  page = { markers: [null], next: null };
  return Promise.all([loadVcdns(), loadQuotas()]).catch(showError);
}

// -- one vCDN's detail: its facts, charts of its metrics, the Instance Manager's decisions ------

const DETAIL_REFRESH_MS = 10000;
const DECISIONS_SHOWN = 20;
// The open vCDN as its forms were filled: its representation and ETag (sent in If-Match).
let detail = { vcdnId: null, timer: null, vcdn: null, etag: null };

async function openDetail(vcdnId) {
  closeDetail();
  detail = { vcdnId, timer: setInterval(refreshDetail, DETAIL_REFRESH_MS), vcdn: null, etag: null };
  $("#detail").hidden = false;
  selectTab($("#tab-monitor"));
  await reloadDetail();
  $("#detail").scrollIntoView({ behavior: "smooth" });
}

function closeDetail() {
  clearInterval(detail.timer);
  detail = { vcdnId: null, timer: null, vcdn: null, etag: null };
  $("#detail").hidden = true;
}

// Read the open vCDN again and fill every form from it (dropping what was typed).
async function reloadDetail() {
  const vcdnId = detail.vcdnId;
  try {
    const { data, etag } = await apiCall("GET", `/vcdns/${vcdnId}`);
    if (vcdnId !== detail.vcdnId) return;
    Object.assign(detail, { vcdn: data, etag });
    fillForms(data);
    await refreshDetail();
  } catch (error) {
    closeDetail();
    showError(error);
  }
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
    const [{ data: vcdn, etag }, metrics, { decisions }] = await Promise.all([
      apiCall("GET", `/vcdns/${vcdnId}`),
      api("GET", `/vcdns/${vcdnId}/metrics?scope=region&since=${encodeURIComponent(since)}`),
      api("GET", `/vcdns/${vcdnId}/decisions`),
    ]);
    if (vcdnId !== detail.vcdnId) return;  // closed, or another vCDN opened meanwhile
    if (etag !== detail.etag && !formsTouched()) {  // changed meanwhile: show it as it is now
      Object.assign(detail, { vcdn, etag });
      fillForms(vcdn);
    }
    showFacts(vcdn, etag);
    const spacing = metrics.step ? `a point per ${metrics.step} s` : "a point per pass";
    $("#detail-window").textContent = `${spacing}, refreshed every ${DETAIL_REFRESH_MS / 1000} s`;
    $("#charts").innerHTML = regionPanels(metrics, mosTargets(vcdn), vcdn.regions.map((r) => r.name));
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

// When the vCDN's certificate ends, how many days are left and whether that warrants a warning.
function certificateLifetime(vcdn) {
  const tls = vcdn.tls;
  const warning = { expiring: " - EXPIRING SOON", expired: " - EXPIRED" }[tls.expiry_state] || "";
  const kind = vcdn.managed_certificate ? "managed, renewed by the service" : "uploaded";
  return `valid until ${tls.not_after} (${tls.days_left} days left${warning}; ${kind})`;
}

// The facts of the open vCDN above its tabs.
function showFacts(vcdn, etag) {
  $("#detail-name").textContent = vcdn.name;
  const entry = vcdn.entry_point || {};
  const tls = vcdn.tls;
  const facts = [
    ["State", vcdn.state + (vcdn.state_reason ? ` (${vcdn.state_reason})` : "")],
    ["Flavor", `${vcdn.flavor} v${vcdn.template_version}`],
    ["Entry point", entry.hostname ? `${entry.hostname} (${(entry.dns_servers || []).length
      ? `DNS servers ${entry.dns_servers.join(", ")}` : "DNS servers once it is deployed"})` : "not yet"],
    ["Name servers", (entry.name_servers || []).map((ns) => `${ns.name} (${ns.addresses.join(", ")
      || "once it is deployed"})`).join("; ") || "none yet"],
    ["Custom hostnames", (vcdn.custom_hostnames || []).map((h) => h.status === "active" ? h.hostname
      : `${h.hostname} (pending: create ${h.records.map((r) => `${r.name} ${r.type} ${r.value}`)
        .join(" or ")})`).join(", ") || (vcdn.hostnames || []).join(", ") || "none"],
    ["HTTPS", tls ? `${tls.subject}, ${certificateLifetime(vcdn)}, SHA-256 ${tls.fingerprint_sha256}`
      : vcdn.managed_certificate ? "not yet: the managed certificate is being obtained" : "no: HTTP only"],
    ["HTTPS policy", httpsPolicyText(vcdn.https_policy)],
    ["Origin", vcdn.origin],
    ["Lease", `${vcdn.lease.start} to ${vcdn.lease.end} (UTC)`],
    ["Revision", etag || etagOf(vcdn)],
  ];
  $("#facts").replaceChildren(...facts.flatMap(([term, value]) => [
    element("dt", { text: term }), element("dd", { text: value, className: term === "State" ? `state-${vcdn.state}`
      : term === "HTTPS" && tls ? `expiry-${tls.expiry_state}` : null })]));
  $("#detail-end").disabled = ["DELETING", "DELETED"].includes(vcdn.state);
}

// A vCDN's HTTPS policy in words.
function httpsPolicyText(policy) {
  if (!policy) return "defaults";
  const hsts = policy.hsts;
  return `plain HTTP ${{ allow: "served", redirect: "redirected to HTTPS", refuse: "refused" }[policy.http] || policy.http}; `
    + `TLS ${policy.min_tls_version} or later; unknown names ${policy.unknown_sni === "serve" ? "served" : "refused"}; `
    + (hsts ? `HSTS max-age=${hsts.max_age}${hsts.include_subdomains ? " includeSubDomains" : ""}${hsts.preload ? " preload" : ""}` : "no HSTS");
}

// -- start -------------------------------------------------------------------------------------

async function start() {
  if (!token) { $("#who").textContent = "paste your token"; return; }
  try {
    await loadCatalogue();
    await firstPage();
    $("#who").textContent = "signed in";
  } catch (error) {
    $("#who").textContent = "";
    showError(error);
  }
}

const selectTab = setUpTabs($("#detail-tabs"));
$("#login").addEventListener("submit", (event) => {
  event.preventDefault();
  useToken($("#token").value.trim());
  showError(null);
  start();
});
$("#error-close").addEventListener("click", () => showError(null));
$("#quote-button").addEventListener("click", quote);
$("#request").addEventListener("submit", lease);
$("#request").quality.addEventListener("change", qualityKindChanged);
$("#filters").addEventListener("submit", (event) => { event.preventDefault(); firstPage(); });
$("#page-first").addEventListener("click", firstPage);
$("#page-next").addEventListener("click", () => { page.markers.push(page.next); loadVcdns().catch(showError); });
$("#detail-close").addEventListener("click", closeDetail);
$("#detail-end").addEventListener("click", () => end(detail.vcdn, detail.etag));
$("#detail-span").addEventListener("change", () => { if (detail.vcdnId) refreshDetail(); });
setUpManagement();
start();
