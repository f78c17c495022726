// The portal's one way to the customer API: the caller's bearer token, JSON bodies, the
// API's error messages, and vCDN ETags (sent back in If-Match so a change never overwrites
// one the page has not seen).
"use strict";

let token = sessionStorage.getItem("cdnaas-token") || "";
// A link may carry the token in its fragment (never sent to a server): keep it for
// this tab only and take it out of the address bar and history at once.
if (location.hash.startsWith("#token=")) {
  token = decodeURIComponent(location.hash.slice("#token=".length));
  sessionStorage.setItem("cdnaas-token", token);
  history.replaceState(null, "", location.pathname);
}

function useToken(value) {
  token = value;
  sessionStorage.setItem("cdnaas-token", token);
}

// An error answer of the API: its message (what to fix), the field it names, its status, and
// every problem it lists (details: [{field, problem}], e.g. SIDR's checks of a template).
class ApiError extends Error {
  constructor(status, error) {
    const stale = status === 412;
    super(stale ? "This vCDN changed since the page loaded it (another change, or the Instance "
      + "Manager scaling it), so nothing was done. The page now shows it as it is: check your "
      + "change and apply it again."
      : error.field ? `${error.field}: ${error.message}` : error.message);
    this.status = status;
    this.field = error.field;
    this.details = error.details || [];
  }
}

// A request to /api/v1: {data, etag, response}. Throws ApiError on an error answer.
//   options.body: sent as JSON; options.text: sent as it is, of type options.contentType;
//   options.ifMatch: an ETag for If-Match;
//   options.raw: leave the body unread (data is null) for the caller to stream.
async function apiCall(method, path, options = {}) {
  const headers = { "Authorization": `Bearer ${token}` };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (options.text !== undefined) headers["Content-Type"] = options.contentType;
  if (options.ifMatch) headers["If-Match"] = options.ifMatch;
  const response = await fetch(`/api/v1${path}`, {
    method, headers,
    body: options.body === undefined ? options.text : JSON.stringify(options.body),
  });
  if (!response.ok) {
    const data = await response.json().catch(() => null);
    throw new ApiError(response.status, (data && data.error) || { message: `HTTP ${response.status}` });
  }
  const data = options.raw || response.status === 204 ? null : await response.json();
  return { data, etag: response.headers.get("ETag"), response };
}

// The answer's JSON of a request to /api/v1 (see apiCall).
async function api(method, path, body) {
  return (await apiCall(method, path, { body })).data;
}

// "?a=1&b=x" of the entries of `params` whose value is neither empty nor null.
function query(params) {
  const kept = Object.entries(params).filter(([, value]) => value !== "" && value !== null && value !== undefined);
  return kept.length ? `?${new URLSearchParams(kept)}` : "";
}
