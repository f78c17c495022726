// CDNaaS portal: how the open vCDN's caches keep objects (its cache rules, changed by PATCH
// with If-Match as every change), and purging or prefetching paths on every cache.
"use strict";

const TTL_MATCHES = ["prefix", "suffix", "exact"];

// Number the TTL rules' inputs by their row, so each has its own accessible name.
function renumberTtlRules() {
  [...$("#ttl-rules tbody").rows].forEach((row, index) => {
    const number = index + 1;
    row.querySelector("[data-match]").setAttribute("aria-label", `Match of rule ${number}`);
    row.querySelector("[data-path]").setAttribute("aria-label", `Path of rule ${number}`);
    row.querySelector("[data-ttl]").setAttribute("aria-label", `TTL of rule ${number}`);
    row.querySelector("button").setAttribute("aria-label", `Remove rule ${number}`);
  });
}

function addTtlRule(rule = { match: "prefix", path: "", ttl: "" }) {
  const row = $("#ttl-rules tbody").insertRow();
  const match = element("select", { "data-match": true });
  match.append(...TTL_MATCHES.map((kind) => new Option(kind, kind, false, kind === rule.match)));
  const remove = element("button", { type: "button", className: "secondary", text: "Remove" });
  remove.onclick = () => { row.remove(); renumberTtlRules(); $("#cache-rules").dataset.touched = "yes"; };
  row.insertCell().append(match);
  row.insertCell().append(element("input", { "data-path": true, value: rule.path, size: 24, placeholder: "/video/" }));
  row.insertCell().append(element("input", { "data-ttl": true, value: rule.ttl, size: 6, placeholder: "1h" }));
  row.insertCell().append(remove);
  renumberTtlRules();
}

function fillCacheRules(vcdn) {
  const form = $("#cache-rules");
  const rules = vcdn.cache_rules || {};
  $("#ttl-rules tbody").replaceChildren();
  (rules.ttl || []).forEach((rule) => addTtlRule(rule));
  form.default_ttl.value = rules.default_ttl || "";
  const query = rules.query_string || "include";
  form.query_string.value = Array.isArray(query) ? "keep" : query;
  form.query_args.value = Array.isArray(query) ? query.join(", ") : "";
  form.origin_cache_control.value = rules.origin_cache_control || "honour";
}

// The cache rules the form describes (the whole set: a PATCH replaces them).
function cacheRulesBody(form) {
  const rules = {
    ttl: [...$("#ttl-rules tbody").rows].map((row) => ({
      match: row.querySelector("[data-match]").value,
      path: row.querySelector("[data-path]").value.trim(),
      ttl: row.querySelector("[data-ttl]").value.trim(),
    })).filter((rule) => rule.path || rule.ttl),
    query_string: form.query_string.value === "keep"
      ? form.query_args.value.split(",").map((name) => name.trim()).filter(Boolean) : form.query_string.value,
    origin_cache_control: form.origin_cache_control.value,
  };
  if (form.default_ttl.value.trim()) rules.default_ttl = form.default_ttl.value.trim();
  return rules;
}

async function submitCacheRules(event) {
  event.preventDefault();
  await patchVcdn({ cache_rules: cacheRulesBody($("#cache-rules")) });
}

// POST `body` to the open vCDN's `what` (invalidations, prefetches) and follow the operation.
async function cacheOperation(what, body, form) {
  showError(null);
  clearOperation();
  const { vcdn } = detail;
  try {
    const { data } = await apiCall("POST", `/vcdns/${vcdn.id}/${what}`, { body });
    form.reset();
    follow(data.operation, vcdn.name);
  } catch (error) { showError(error); }
}

async function submitPurge(event) {
  event.preventDefault();
  const form = $("#purge");
  const body = {};
  const paths = lines(form.paths.value);
  const prefixes = lines(form.prefixes.value);
  if (paths.length) body.paths = paths;
  if (prefixes.length) body.prefixes = prefixes;
  if (!paths.length && !prefixes.length) { showError("Name at least one path or prefix to purge."); return; }
  await cacheOperation("invalidations", body, form);
}

async function submitPrefetch(event) {
  event.preventDefault();
  const form = $("#prefetch");
  const paths = lines(form.paths.value);
  if (!paths.length) { showError("Name at least one path to prefetch."); return; }
  await cacheOperation("prefetches", { paths }, form);
}

function setUpCache() {
  $("#ttl-add").addEventListener("click", () => { addTtlRule(); $("#cache-rules").dataset.touched = "yes"; });
  $("#cache-rules").addEventListener("submit", submitCacheRules);
  $("#purge").addEventListener("submit", submitPurge);
  $("#prefetch").addEventListener("submit", submitPrefetch);
}
