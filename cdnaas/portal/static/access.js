// CDNaaS portal: a URL of the open vCDN signed by the API with one of its keys (POST
// /vcdns/{id}/signed-urls); its access control is edited with the delivery options.
"use strict";

function fillAccess() {
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
