// The operator console's calibrations: the jobs RO knows (GET /calibrations), running one
// (POST /calibrations), watching its steps, and once it is done its QoE curve drawn against
// the model it would replace (the job's `curves`).
"use strict";

const CALIBRATION_POLL_MS = 1000;
let watching = 0;  // the job watched; watching another stops the previous poll

// The flavors and hosts of the console's last answers, as choices of the form.
function fillCalibrationFlavors() {
  const form = $("#op-calibrate");
  const choose = (select, names) => {
    const kept = select.value;
    select.replaceChildren(...names.map((name) => new Option(name, name)));
    if (names.includes(kept)) select.value = kept;
  };
  choose(form.flavor, [...new Set(consoleData.templates.filter((t) => !t.deprecated).map((t) => t.flavor))].sort());
  choose(form.host, consoleData.hosts.map((host) => host.name));
}

async function loadCalibrationsPanel() {
  const { calibrations } = await api("GET", "/calibrations");
  fillCalibrationFlavors();
  const rows = $("#op-calibrations tbody");
  rows.replaceChildren();
  if (!calibrations.length) {
    cell(rows.insertRow(), "No calibration since RO started: run one above.", "muted").colSpan = 10;
  }
  for (const job of calibrations) {
    const row = rows.insertRow();
    cell(row, job.id); cell(row, job.flavor); cell(row, job.host); cell(row, job.vcpus.join(", "));
    cell(row, job.state, `state-${job.state}`);
    cell(row, shortTime(job.started_at)); cell(row, shortTime(job.ended_at));
    const share = Math.round(100 * job.progress);
    row.insertCell().append(progressBar(`Progress of calibration ${job.id}`, share), ` ${share}%`);
    cell(row, job.error);
    const watch = element("button", { type: "button", className: "secondary", text: "Watch",
                                      "aria-label": `Watch calibration ${job.id}` });
    watch.onclick = () => watchCalibration(job.id);
    row.insertCell().append(watch);
  }
}

// Start a calibration from the form, then watch it.
async function runCalibration(event) {
  event.preventDefault();
  showError(null);
  const form = $("#op-calibrate");
  const body = { flavor: form.flavor.value, host: form.host.value };
  if (form.vcpus.value.trim()) body.vcpus = form.vcpus.value.split(",").map((v) => Number(v.trim()));
  if (form.max_seconds.value) body.max_seconds = Number(form.max_seconds.value);
  try {
    const job = await api("POST", "/calibrations", body);
    await loadCalibrationsPanel();
    watchCalibration(job.id);
  } catch (error) { showError(error); }
}

// Show job `jobId`'s steps until it ends, then its curves (or its error); the list follows.
async function watchCalibration(jobId) {
  const mine = ++watching;
  $("#op-calibration").hidden = false;
  $("#op-calibration-curve").replaceChildren();
  for (;;) {
    let job;
    try {
      job = await api("GET", `/calibrations/${jobId}`);
    } catch (error) {
      showError(error);
      return;
    }
    if (mine !== watching) return;
    $("#op-calibration-title").textContent = `Calibration ${job.id}: ${job.flavor} on ${job.host}, `
      + `${job.vcpus.join(" and ")} vCPU, ${job.state}${job.error ? ` (${job.error})` : ""}`;
    $("#op-calibration-steps").replaceChildren(...stepBars(job.steps));
    if (!["PENDING", "RUNNING"].includes(job.state)) {
      if (job.curves) {
        $("#op-calibration-curve").innerHTML = curveChart(
          `QoE of ${job.flavor} on ${job.host}: calibrated against ${job.curves[1].label}`, job.curves);
      }
      await loadCalibrationsPanel().catch(showError);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, CALIBRATION_POLL_MS));
  }
}
