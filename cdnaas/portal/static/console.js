// The operator console (shown when GET /whoami says the token is an operator's): regions and
// hosts with their power, template versions (register, deprecate, delete), tenants with their
// quotas and monthly statements, and the quality board with each vCDN's decisions.
// Calibrations are in calibrations.js. Every figure comes from the operator routes of the API.
"use strict";

const OPERATOR_DECISIONS_SHOWN = 30;
// The console's last answers that other parts of it offer as choices (calibrations.js).
let consoleData = { templates: [], hosts: [] };

// Read every tab of the console again.
async function loadConsole() {
  await Promise.all([loadHostsPanel(), loadTemplatesPanel(), loadTenantsPanel(),
                     loadCalibrationsPanel(), loadQualityPanel()]);
}

// "1,234.5" of a number (null: "-").
function figure(value, digits = 1) {
  return value === null || value === undefined ? null
    : Number(value).toLocaleString("en", { maximumFractionDigits: digits });
}

function numberCell(row, value, digits) {
  return cell(row, figure(value, digits), "number");
}

// -- regions and hosts -------------------------------------------------------------------------

// A host's power state in words: its power-down mark, else powered.
function powerState(host) {
  const mark = host.mark;
  if (!mark) return "on";
  const since = shortTime(mark.since);
  if (mark.state !== "power_down") return `on since ${since}: ${mark.reason}`;
  return mark.switched_off ? `switched off since ${since}: ${mark.reason}`
    : `power-down recorded since ${since}, still on: ${mark.reason}`;
}

async function loadHostsPanel() {
  const [{ regions }, power] = await Promise.all([api("GET", "/regions"), api("GET", "/hosts/power")]);
  const hosts = power.hosts || [];
  consoleData.hosts = hosts;
  const regionRows = $("#op-regions tbody");
  regionRows.replaceChildren();
  for (const region of regions) {
    const mine = hosts.filter((host) => host.region === region.name);
    const sum = (key) => mine.reduce((total, host) => total + (host[key] || 0), 0);
    const row = regionRows.insertRow();
    cell(row, region.name); cell(row, (region.client_prefixes || []).join(", "));
    cell(row, region.zone); cell(row, region.default ? "yes" : "");
    numberCell(row, mine.length); numberCell(row, sum("vcpus")); numberCell(row, sum("reserved_vcpus"));
    numberCell(row, sum("watts"));
  }
  const hostRows = $("#op-hosts tbody");
  hostRows.replaceChildren();
  for (const host of hosts) {
    const row = hostRows.insertRow();
    cell(row, host.name); cell(row, host.region);
    numberCell(row, host.vcpus); numberCell(row, host.reserved_vcpus);
    const share = host.utilisation === null || host.utilisation === undefined ? null : Math.round(100 * host.utilisation);
    const busy = row.insertCell();
    if (share === null) busy.textContent = "-";
    else busy.append(progressBar(`Utilisation of ${host.name}`, share), ` ${share}%`);
    cell(row, host.enabled ? "enabled" : "disabled");
    cell(row, powerState(host), host.mark && host.mark.state === "power_down" ? "outcome-held" : null);
    numberCell(row, host.watts); cell(row, host.source); numberCell(row, host.energy_wh);
  }
  const totals = power.totals || {};
  fillCalibrationFlavors();
  $("#op-power-total").textContent = `${totals.hosts || 0} hosts drawing ${figure(totals.watts || 0)} W; `
    + `${totals.switched_off || 0} switched off (saving ${figure(totals.saved_idle_watts || 0)} W); `
    + `${totals.marked_still_on || 0} marked for power-down but only recorded by the power driver `
    + `(still on, ${figure(totals.marked_still_on_watts || 0)} W counted)`;
}

// -- flavors and template versions -------------------------------------------------------------

async function loadTemplatesPanel() {
  const { templates } = await api("GET", "/templates");
  consoleData.templates = templates;
  const rows = $("#op-templates tbody");
  rows.replaceChildren();
  const ordered = [...templates].sort((a, b) => a.flavor.localeCompare(b.flavor) || a.version - b.version);
  for (const template of ordered) {
    const row = rows.insertRow();
    const name = `${template.flavor} v${template.version}`;
    cell(row, template.flavor); numberCell(row, template.version); cell(row, template.plugin);
    cell(row, template.technology); cell(row, shortTime(template.created_at));
    cell(row, template.deprecated ? `deprecated ${shortTime(template.deprecated_at)}` : "offered",
         template.deprecated ? "outcome-held" : "outcome-healthy");
    cell(row, template.description);
    const actions = row.insertCell();
    actions.className = "actions-cell";
    const toggle = element("button", { type: "button", className: "secondary",
      text: template.deprecated ? "Offer again" : "Deprecate",
      "aria-label": `${template.deprecated ? "Offer again" : "Deprecate"} ${name}` });
    toggle.onclick = () => templateAction("PATCH", template, { deprecated: !template.deprecated });
    const remove = element("button", { type: "button", className: "danger", text: "Delete", "aria-label": `Delete ${name}` });
    remove.onclick = () => templateAction("DELETE", template);
    actions.append(toggle, " ", remove);
  }
  fillCalibrationFlavors();
}

// Deprecate (or offer again) or delete a template version, then show the list as it is.
async function templateAction(method, template, body) {
  showError(null);
  try {
    await api(method, `/templates/${encodeURIComponent(template.flavor)}/${template.version}`, body);
  } catch (error) { showError(error); }
  await loadTemplatesPanel().catch(showError);
}

// Register the pasted (or chosen) template; SIDR's problems are listed under the form.
async function registerTemplate(event) {
  event.preventDefault();
  showError(null);
  const form = $("#op-register");
  const problems = $("#op-register-problems");
  problems.hidden = true;
  problems.replaceChildren();
  const file = form.file.files[0];
  const text = file ? await file.text() : form.document.value;
  if (!text.trim()) { showError(new Error("document: paste a template or choose its file")); return; }
  const json = /^\s*\{/.test(text);
  try {
    const stored = (await apiCall("POST", "/templates",
      { text, contentType: json ? "application/json" : "application/yaml" })).data;
    form.reset();
    $("#operation").hidden = false;
    $("#operation").replaceChildren(element("h3", { text: `Registered ${stored.flavor} v${stored.version}` }));
  } catch (error) {
    showError(error);
    problems.append(...(error.details || []).map((p) => element("li", { text: `${p.field || "template"}: ${p.problem}` })));
    problems.hidden = !problems.childElementCount;
  }
  await loadTemplatesPanel().catch(showError);
}

// -- tenants, quotas and statements ------------------------------------------------------------

async function loadTenantsPanel() {
  const { tenants } = await api("GET", "/tenants");
  const quotas = await Promise.all(tenants.map((tenant) => (tenant.role === "operator" ? null
    : api("GET", `/tenants/${encodeURIComponent(tenant.name)}/quotas`))));
  const rows = $("#op-tenants tbody");
  rows.replaceChildren();
  tenants.forEach((tenant, index) => {
    const row = rows.insertRow();
    cell(row, tenant.name); cell(row, tenant.role); cell(row, shortTime(tenant.created_at));
    cell(row, quotas[index] ? quotas[index].quotas.map(
      (q) => `${QUOTA_LABELS[q.name] || q.name} ${q.in_use} of ${q.limit}`).join(" · ") : null);
    const actions = row.insertCell();
    if (tenant.role !== "operator") {
      const button = element("button", { type: "button", className: "secondary", text: "Statement",
                                         "aria-label": `Statement of ${tenant.name}` });
      button.onclick = () => showStatement(tenant.name).catch(showError);
      actions.append(button);
    }
  });
}

// The statement of `tenant` for the month the form names.
async function showStatement(tenant) {
  showError(null);
  const month = $("#op-month").month.value;
  const statement = await api("GET", `/tenants/${encodeURIComponent(tenant)}/statements/${month}`);
  $("#op-statement").hidden = false;
  $("#op-statement-title").textContent = `Statement of ${tenant} for ${month} `
    + `(${shortTime(statement.from)} to ${shortTime(statement.to)} UTC)`;
  const rows = $("#op-statement-table tbody");
  rows.replaceChildren();
  const price = (p) => `${p.amount.toFixed(2)} ${p.currency}`;
  const line = (row, part) => {
    numberCell(row, part.requests, 0); numberCell(row, part.gb, 3); numberCell(row, part.viewer_hours, 2);
    numberCell(row, part.vcpu_hours, 2); numberCell(row, part.kwh, 3); cell(row, price(part.price), "number");
  };
  for (const vcdn of statement.vcdns) {
    const row = rows.insertRow();
    cell(row, vcdn.name); cell(row, vcdn.flavor); cell(row, vcdn.state, `state-${vcdn.state}`);
    cell(row, shortTime(vcdn.from)); cell(row, shortTime(vcdn.to));
    line(row, vcdn);
  }
  const total = rows.insertRow();
  total.className = "total";
  cell(total, statement.vcdns.length ? "Total" : "Total: no vCDN lived in this month").colSpan = 5;
  line(total, statement.total);
}

// -- quality board and decisions ---------------------------------------------------------------

async function loadQualityPanel() {
  const board = await api("GET", "/quality");
  const totals = board.totals || {};
  const below = totals.regions_below_target || 0;
  $("#op-quality-total").textContent = `${totals.vcdns || 0} vCDNs, ${figure(totals.viewers || 0, 0)} viewers, `
    + `${figure(totals.watts || 0)} W; ${below ? `${below} region(s) below target` : "every measured region meets its target"}`;
  const rows = $("#op-quality tbody");
  rows.replaceChildren();
  for (const vcdn of board.vcdns || []) {
    vcdn.regions.forEach((region, index) => {
      const row = rows.insertRow();
      if (region.below_target) row.className = "below-target";
      cell(row, vcdn.name); cell(row, vcdn.tenant); cell(row, vcdn.state, `state-${vcdn.state}`);
      cell(row, region.name); numberCell(row, region.demand, 0); numberCell(row, region.viewers, 0);
      const target = (region.quality || {}).min_mos;
      cell(row, `${figure(region.mos, 2) || "-"} / ${target === undefined ? "-" : target}`
        + (region.below_target ? " below target" : ""), region.below_target ? "outcome-unhealthy" : null);
      numberCell(row, region.vcpus, 0); numberCell(row, region.watts);
      const actions = row.insertCell();
      if (index === 0) {
        const button = element("button", { type: "button", className: "secondary", text: "Decisions",
                                           "aria-label": `Decisions of ${vcdn.name}` });
        button.onclick = () => showDecisions(vcdn).catch(showError);
        actions.append(button);
      }
    });
  }
}

async function showDecisions(vcdn) {
  const { decisions } = await api("GET", `/vcdns/${vcdn.id}/decisions`);
  $("#op-decisions").hidden = false;
  $("#op-decisions-title").textContent = `Decisions of the Instance Manager about ${vcdn.name} `
    + `(${vcdn.tenant}), latest first`;
  fillDecisions($("#op-decisions tbody"), decisions, OPERATOR_DECISIONS_SHOWN);
}

// -- set-up ------------------------------------------------------------------------------------

function setUpConsole() {
  setUpTabs($("#console-tabs"));
  $("#op-month").month.value = new Date().toISOString().slice(0, 7);
  $("#op-register").addEventListener("submit", registerTemplate);
  $("#op-calibrate").addEventListener("submit", runCalibration);
  $("#console-refresh").addEventListener("click", () => { showError(null); loadConsole().catch(showError); });
}
