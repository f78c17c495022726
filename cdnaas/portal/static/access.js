// CDNaaS portal: the open vCDN's access control as its view shows it (secrets masked), and
// a URL signed by the API with one of its keys (POST /vcdns/{id}/signed-urls).
"use strict";

function fillAccess(vcdn) {
  $("#access-now").textContent = vcdn.access
    ? JSON.stringify(vcdn.access, null, 2) : "none: every viewer may fetch everything";
  $("#signed-url").textContent = "";
}

async function submitSignUrl(event) {
  event.preventDefault();
  showError(null);
  const form = $("#sign-url");
  const body = { path: form.path.value.trim(), expires_in: Number(form.expires_in.value) };
  if (form.prefix.value.trim()) body.prefix = form.prefix.value.trim();
  if (form.client.value.trim()) body.client = form.client.value.trim();
  try {
    const { data } = await apiCall("POST", `/vcdns/${detail.vcdn.id}/signed-urls`, { body });
    $("#signed-url").textContent = data.url;
  } catch (error) { showError(error); }
}

function setUpAccess() {
  $("#sign-url").addEventListener("submit", submitSignUrl);
}
