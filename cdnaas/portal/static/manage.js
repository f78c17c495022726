// CDNaaS portal: the forms of an open vCDN (`detail` in app.js). Each change is a PATCH
// carrying If-Match with the ETag the forms were filled from, so a change made meanwhile
// (by another user, or the Instance Manager scaling) is never overwritten: the API answers
// 412 and the forms are filled again from the vCDN as it is now.
"use strict";

const MANAGED_FORMS = ["#change", "#tls", "#https-policy", "#cache-rules", "#delivery", "#log-streams"];

function formsTouched() {
  return MANAGED_FORMS.some((selector) => $(selector).dataset.touched === "yes");
}

// Fill every form of the detail from `vcdn` (what it is now), forgetting what was typed.
function fillForms(vcdn) {
  fillChange(vcdn);
  fillTls(vcdn);
  fillHttpsPolicy(vcdn);
  fillCacheRules(vcdn);
  fillDelivery(vcdn);
  fillAccess();
  fillUsageWindow(vcdn);
  fillLogStreams(vcdn);
  for (const selector of MANAGED_FORMS) $(selector).dataset.touched = "";
}

// PATCH the open vCDN with `body`; follow the change's operation, then fill the forms again.
async function patchVcdn(body) {
  showError(null);
  clearOperation();
  const { vcdn, etag } = detail;
  try {
    const { data } = await apiCall("PATCH", `/vcdns/${vcdn.id}`, { body, ifMatch: etag });
    for (const selector of MANAGED_FORMS) $(selector).dataset.touched = "";
    follow(data.operation, vcdn.name, () => (detail.vcdnId === vcdn.id ? reloadDetail() : null));
    return true;
  } catch (error) {
    showError(error);
    if (error.status === 412) await reloadDetail();
    return false;
  }
}

// -- demand, regions, origin and lease ----------------------------------------------------------

function qualityInputs(region) {
  const quality = region.quality || {};
  if (quality.response_time) {
    return [element("input", { type: "number", min: 0.1, max: 100, step: 0.1, value: quality.response_time.percentile,
                               "data-percentile": true, "aria-label": `Percentile in ${region.name}` }),
            "% within ",
            element("input", { type: "number", min: 1, step: 1, value: quality.response_time.max_ms,
                               "data-max-ms": true, "aria-label": `Response time (ms) in ${region.name}` }), " ms"];
  }
  return ["MOS at least ", element("input", { type: "number", min: 1, max: 5, step: 0.1, value: quality.min_mos,
                                              "data-mos": true, "aria-label": `Minimum MOS in ${region.name}` })];
}

function fillChange(vcdn) {
  const form = $("#change");
  const rows = form.querySelector("tbody");
  rows.replaceChildren();
  for (const region of vcdn.regions) {
    const row = rows.insertRow();
    row.dataset.name = region.name;
    cell(row, region.name);
    row.insertCell().append(element("input", { type: "number", min: 1, value: region.demand, "data-demand": true,
                                               "aria-label": `Peak viewers in ${region.name}` }));
    row.insertCell().append(...qualityInputs(region));
    row.insertCell().append(element("input", { type: "checkbox", "data-remove": true, "aria-label": `Remove ${region.name}` }));
  }
  const taken = new Set(vcdn.regions.map((region) => region.name));
  form.add_region.replaceChildren(new Option("none", ""),
    ...catalogue.regions.filter((region) => !taken.has(region.name)).map((region) => new Option(region.name, region.name)));
  form.origin.value = vcdn.origin;
  form.lease_end.value = toInputTime(vcdn.lease.end);
}

// The quality a row of the change form asks for (the same kind as the region has).
function rowQuality(row) {
  const mos = row.querySelector("[data-mos]");
  if (mos) return { min_mos: Number(mos.value) };
  return { response_time: { percentile: Number(row.querySelector("[data-percentile]").value),
                            max_ms: Number(row.querySelector("[data-max-ms]").value) } };
}

// The PATCH body of the change form: only what differs from the vCDN it was filled from.
function changeBody(form, vcdn) {
  const body = {};
  const regions = [];
  const removed = [];
  for (const region of vcdn.regions) {
    const row = [...form.querySelectorAll("tbody tr")].find((tr) => tr.dataset.name === region.name);
    if (row.querySelector("[data-remove]").checked) { removed.push(region.name); continue; }
    const change = { name: region.name };
    const demand = Number(row.querySelector("[data-demand]").value);
    if (demand !== region.demand) change.demand = demand;
    const quality = rowQuality(row);
    if (JSON.stringify(quality) !== JSON.stringify(region.quality)) change.quality = quality;
    if (Object.keys(change).length > 1) regions.push(change);
  }
  if (form.add_region.value) {
    regions.push({ name: form.add_region.value, demand: Number(form.add_demand.value),
                   quality: { min_mos: Number(form.add_mos.value) } });
  }
  if (regions.length) body.regions = regions;
  if (removed.length) body.remove_regions = removed;
  if (form.origin.value.trim() !== vcdn.origin) body.origin = form.origin.value.trim();
  const leaseEnd = fromInputTime(form.lease_end.value);
  if (leaseEnd && leaseEnd !== fromInputTime(toInputTime(vcdn.lease.end))) body.lease = { end: leaseEnd };
  return body;
}

async function submitChange(event) {
  event.preventDefault();
  const body = changeBody($("#change"), detail.vcdn);
  if (!Object.keys(body).length) { showError("Nothing to change: edit a field first."); return; }
  await patchVcdn(body);
}

// -- custom hostnames and certificate -----------------------------------------------------------

function fillTls(vcdn) {
  const form = $("#tls");
  const tls = vcdn.tls;
  $("#tls-now").textContent = tls
    ? `HTTPS (HTTP/2) with a certificate for ${(tls.names || tls.hostnames || []).join(", ")} issued by ${tls.issuer || "?"}, `
      + `${certificateLifetime(vcdn)}; SHA-256 fingerprint ${tls.fingerprint_sha256}.`
    : vcdn.managed_certificate ? "HTTP only until the managed certificate is obtained (the service asks the operator's CA now)."
    : "HTTP only: add a certificate (and your own hostnames) to serve HTTPS.";
  $("#tls-now").className = tls ? `expiry-${tls.expiry_state}` : "";
  form.hostnames.value = (vcdn.hostnames || []).join("\n");
  form.certificate.value = "";
  form.private_key.value = "";
  $("#tls-remove").disabled = !tls && !vcdn.managed_certificate;
  $("#tls-managed").disabled = Boolean(vcdn.managed_certificate);
}

// A managed certificate for the hostnames in the form (the service obtains and renews it).
async function submitManaged() {
  const body = { certificate: { managed: true } };
  const hostnames = lines($("#tls").hostnames.value);
  if (JSON.stringify(hostnames) !== JSON.stringify(detail.vcdn.hostnames || [])) body.hostnames = hostnames;
  await patchVcdn(body);
}

async function submitTls(event) {
  event.preventDefault();
  const form = $("#tls");
  const body = {};
  const hostnames = lines(form.hostnames.value);
  if (JSON.stringify(hostnames) !== JSON.stringify(detail.vcdn.hostnames || [])) body.hostnames = hostnames;
  const certificate = form.certificate.value.trim();
  const key = form.private_key.value.trim();
  if (Boolean(certificate) !== Boolean(key)) {
    showError("Paste both the certificate chain and its private key (or neither to change only the names).");
    return;
  }
  if (certificate) body.certificate = { certificate: form.certificate.value, private_key: form.private_key.value };
  if (!Object.keys(body).length) { showError("Nothing to change: edit the names or paste a certificate first."); return; }
  if (await patchVcdn(body)) form.private_key.value = "";  // the key leaves the page once sent
}

// -- HTTPS policy (replaced whole by each save) -------------------------------------------------

function fillHttpsPolicy(vcdn) {
  const form = $("#https-policy");
  const policy = vcdn.https_policy || {};
  const hsts = policy.hsts || {};
  form.http.value = policy.http || "allow";
  form.min_tls_version.value = policy.min_tls_version || "1.2";
  form.unknown_sni.value = policy.unknown_sni || "refuse";
  form.hsts_max_age.value = policy.hsts ? String(hsts.max_age) : "";
  form.hsts_include_subdomains.checked = Boolean(hsts.include_subdomains);
  form.hsts_preload.checked = Boolean(hsts.preload);
}

async function submitHttpsPolicy(event) {
  event.preventDefault();
  const form = $("#https-policy");
  const age = form.hsts_max_age.value.trim();
  const hsts = age === "" ? null : {
    max_age: Number(age), include_subdomains: form.hsts_include_subdomains.checked,
    preload: form.hsts_preload.checked };
  await patchVcdn({ https_policy: {
    http: form.http.value, min_tls_version: form.min_tls_version.value,
    unknown_sni: form.unknown_sni.value, hsts } });
}

// -- usage, traffic and the access log ----------------------------------------------------------

function fillUsageWindow(vcdn) {
  const form = $("#usage-window");
  if (form.dataset.vcdnId === vcdn.id) return;  // keep the window chosen for this vCDN
  form.dataset.vcdnId = vcdn.id;
  form.from.value = toInputTime(vcdn.created_at);
  form.to.value = "";
  $("#usage tbody").replaceChildren();
  $("#usage-note").textContent = "";
  $("#traffic-charts").replaceChildren();
}

// 12.4734742 -> "12.47", 0.000038 -> "0.000038", 27985 -> "27,985": four significant digits.
function figure(value) {
  if (value === null || value === undefined) return null;
  return Number.isInteger(value) ? value.toLocaleString("en") : String(Number(value.toPrecision(4)));
}

function usageRow(rows, name, figures, strong) {
  const row = rows.insertRow();
  if (strong) row.className = "total";
  const status = figures.status || {};
  const price = figures.price ? `${figures.price.amount} ${figures.price.currency}` : null;
  const ratio = figures.hit_ratio === null || figures.hit_ratio === undefined ? null : `${(100 * figures.hit_ratio).toFixed(1)} %`;
  cell(row, name);
  for (const value of [figures.requests, figures.gb]) cell(row, figure(value), "number");
  cell(row, ratio, "number");
  for (const value of [status["2xx"], status["3xx"], status["4xx"], status["5xx"], figures.viewer_hours,
                       figures.vcpu_hours, figures.kwh]) cell(row, figure(value), "number");
  cell(row, price, "number");
}

// The usage window's bounds as query values: from, and to (now when empty).
function usageWindow() {
  const form = $("#usage-window");
  return { from: fromInputTime(form.from.value), to: fromInputTime(form.to.value) };
}

async function showUsage(event) {
  if (event) event.preventDefault();
  showError(null);
  const vcdnId = detail.vcdnId;
  const span = usageWindow();
  const until = span.to || new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const since = span.from && Date.parse(until) - Date.parse(span.from) <= 31 * 86400 * 1000
    ? span.from : new Date(Date.parse(until) - 3600 * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  try {
    const [usage, traffic] = await Promise.all([
      api("GET", `/vcdns/${vcdnId}/usage${query(span)}`),
      api("GET", `/vcdns/${vcdnId}/traffic${query({ since, until })}`),
    ]);
    if (vcdnId !== detail.vcdnId) return;
    const rows = $("#usage tbody");
    rows.replaceChildren();
    for (const region of usage.regions) usageRow(rows, region.name, region, false);
    usageRow(rows, "Total", usage.total, true);
    $("#usage-note").textContent = `From ${usage.from} to ${usage.to} (UTC); balancers' logs last read at `
      + `${usage.traffic_read_at || "never"}. Prices from the operator's price table.`;
    $("#traffic-charts").innerHTML = trafficPanels(traffic);
  } catch (error) { showError(error); }
}

// Download the access log of the usage window (the token cannot ride on a plain link).
async function exportAccessLog() {
  showError(null);
  const { vcdn } = detail;
  try {
    const params = { ...usageWindow(), limit: $("#usage-window").limit.value };
    const { response } = await apiCall("GET", `/vcdns/${vcdn.id}/access-log${query(params)}`, { raw: true });
    const url = URL.createObjectURL(await response.blob());
    const link = element("a", { href: url, download: `${vcdn.name}-access-log.ndjson` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (error) { showError(error); }
}

function setUpManagement() {
  for (const selector of MANAGED_FORMS) {
    $(selector).addEventListener("input", () => { $(selector).dataset.touched = "yes"; });
  }
  $("#change").addEventListener("submit", submitChange);
  $("#tls").addEventListener("submit", submitTls);
  $("#tls-remove").addEventListener("click", () => patchVcdn({ certificate: null }));
  $("#tls-managed").addEventListener("click", submitManaged);
  $("#https-policy").addEventListener("submit", submitHttpsPolicy);
  $("#usage-window").addEventListener("submit", showUsage);
  $("#access-log").addEventListener("click", exportAccessLog);
  setUpCache();
  setUpDelivery();
  setUpLogStreams();
  setUpAccess();
}
