// capsule's dashboard: the little script the pages use (no build step,
// served from /static/ui.js, the only script the Content-Security-Policy
// allows). The approvals page follows the server's event stream and
// replaces its list when the pending approvals change; the audit page's
// newest records offer a link to the records appended since. A session's
// pages live under its own path (/s/KEY, the body's data-base).
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

// The audit page's newest records: a link to see them once the log's head
// moves past the one the page was rendered with.
function auditMoved(notice) {
  if (document.getElementById("audit-new")) return;
  const a = document.createElement("a");
  a.id = "audit-new";
  a.href = location.pathname + location.search;
  a.textContent = "New records: show them";
  notice.appendChild(a);
  notice.hidden = false;
}

function follow() {
  const approvals = document.getElementById("approvals");
  const audit = document.getElementById("audit-live");
  if ((!approvals && !audit) || !window.EventSource) return;
  const es = new EventSource(document.body.dataset.base + "/events");
  let seen = null, head = audit ? audit.dataset.head : null;
  es.addEventListener("approvals", (e) => {
    if (approvals && seen !== null && e.data !== seen) refreshApprovals();
    seen = e.data;
    document.body.dataset.live = "1";
  });
  es.addEventListener("audit", (e) => {
    if (audit && head !== null && e.data !== head) auditMoved(audit);
    document.body.dataset.live = "1";
  });
}

document.addEventListener("DOMContentLoaded", follow);
