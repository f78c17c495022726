// Small helpers of the portal's page: table cells, the message banner, UTC times in date
// inputs, tabs, progress bars of steps, decision rows, and the dialog that confirms ending a vCDN.
"use strict";

const $ = (selector) => document.querySelector(selector);

function cell(row, value, className) {
  const td = row.insertCell();
  td.textContent = value === null || value === undefined ? "-" : value;
  if (className) td.className = className;
  return td;
}

// An element of `tag` with attributes (`text` sets its text, `className` its class).
function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value === true ? "" : value);
  }
  node.append(...children);
  return node;
}

// The banner at the top of the page: an error (role alert), or nothing.
function showError(error) {
  const box = $("#error");
  box.hidden = !error;
  $("#error-text").textContent = error ? String(error.message || error) : "";
}

// "2030-01-31T18:00:00Z" -> "2030-01-31T18:00:00", the value of a datetime-local input read as UTC.
function toInputTime(iso) {
  return iso ? new Date(iso).toISOString().slice(0, 19) : "";
}

// The value of a datetime-local input read as UTC -> "2030-01-31T18:00:00Z" ("" stays "").
function fromInputTime(value) {
  return value ? new Date(`${value}Z`).toISOString().replace(/\.\d+Z$/, "Z") : "";
}

// One line per entry of a textarea, trimmed, blank lines dropped.
function lines(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean);
}

// Tabs of `tablist` (buttons role=tab, aria-controls naming their panel): one panel shown.
function setUpTabs(tablist) {
  const tabs = [...tablist.querySelectorAll("[role=tab]")];
  const select = (chosen) => {
    for (const tab of tabs) {
      const selected = tab === chosen;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      document.getElementById(tab.getAttribute("aria-controls")).hidden = !selected;
    }
  };
  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (event) => {  // arrow keys move between tabs
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (!step) return;
      const next = tabs[(index + step + tabs.length) % tabs.length];
      select(next);
      next.focus();
    });
  });
  select(tabs[0]);
  return select;
}

// "2030-01-31T18:00:05.123Z" -> "2030-01-31 18:00:05" (null stays null).
function shortTime(iso) {
  return iso ? iso.slice(0, 19).replace("T", " ") : null;
}

// A progress bar (role progressbar named `name`) at `share` percent.
function progressBar(name, share) {
  return element("span", { className: "bar", role: "progressbar", "aria-label": name,
                           "aria-valuenow": share, "aria-valuemin": 0, "aria-valuemax": 100 },
                 [element("span", { style: `width:${share}%` })]);
}

// The steps of an operation or a calibration ({name, done, total, state}) as labelled bars.
function stepBars(steps) {
  return (steps || []).map((step) => element("span", { className: "step" }, [
    progressBar(step.name, step.total ? Math.round((100 * step.done) / step.total) : 0),
    ` ${step.name} (${step.done}/${step.total}) ${step.state}`]));
}

// Fill `rows` (a tbody) with the Instance Manager's decisions, latest first, at most `shown`.
function fillDecisions(rows, decisions, shown) {
  rows.replaceChildren();
  for (const decision of decisions.slice(-shown).reverse()) {
    const row = rows.insertRow();
    cell(row, shortTime(decision.created_at));
    cell(row, decision.kind); cell(row, decision.region || decision.host);
    cell(row, decision.outcome, `outcome-${decision.outcome}`); cell(row, decision.reason);
  }
}

// Ask in the page's own dialog whether to end `vcdn`; resolves true only on "End vCDN".
function confirmEnd(vcdn) {
  const dialog = $("#confirm-end");
  $("#confirm-end-name").textContent = vcdn.name;
  $("#confirm-end-host").textContent = (vcdn.entry_point || {}).hostname || "its entry point";
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "end"), { once: true });
  });
}
