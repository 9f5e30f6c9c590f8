// capsule's dashboard: the little script the pages use (no build step,
// served from /static/ui.js, the only script the Content-Security-Policy
// allows). The approvals page follows the server's event stream and
// replaces its list when the pending approvals change. A session's pages
// live under its own path (/s/KEY, the body's data-base).
"use strict";

function refreshApprovals() {
  fetch(location.pathname + location.search, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
    .then((html) => {
      const doc = new DOMParser().parseFromString(html, "text/html");
      const fresh = doc.getElementById("approvals");
      const here = document.getElementById("approvals");
      if (fresh && here) here.replaceWith(document.adoptNode(fresh));
    })
    .catch(() => {});
}

function followApprovals() {
  if (!document.getElementById("approvals") || !window.EventSource) return;
  const es = new EventSource(document.body.dataset.base + "/events");
  let seen = null;
  es.addEventListener("approvals", (e) => {
    if (seen !== null && e.data !== seen) refreshApprovals();
    seen = e.data;
    document.body.dataset.live = "1";
  });
}

document.addEventListener("DOMContentLoaded", followApprovals);
