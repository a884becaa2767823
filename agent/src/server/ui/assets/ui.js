// The web UI's only script. Pages work without it; with it they refresh themselves: on each
// `change` event from /ui/events the page is fetched again and its live region swapped.
// Keys: "/" focuses the search field, "j"/"k" move between app rows, Enter opens one.
"use strict";
(function () {
  const status = document.getElementById("live-status");
  let pending = null;
  let refreshing = false;

  async function refresh() {
    if (refreshing) { pending = pending || setTimeout(refreshSoon, 300); return; }
    refreshing = true;
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const next = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = next.getElementById("live");
      const current = document.getElementById("live");
      if (fresh && current && fresh.innerHTML !== current.innerHTML) {
        const open = Array.from(current.querySelectorAll("details[open] summary")).map((s) => s.textContent);
        current.innerHTML = fresh.innerHTML;
        current.querySelectorAll("details summary").forEach((s) => {
          if (open.includes(s.textContent)) s.parentElement.open = true;
        });
        if (status) status.textContent = "Updated " + new Date().toLocaleTimeString();
      }
    } finally {
      refreshing = false;
    }
  }
  function refreshSoon() { pending = null; refresh(); }

  if (window.EventSource && document.getElementById("live")) {
    const events = new EventSource("/ui/events");
    events.addEventListener("change", () => { if (!pending) pending = setTimeout(refreshSoon, 100); });
    events.addEventListener("open", () => { if (status) status.textContent = "Live"; });
    events.addEventListener("error", () => { if (status) status.textContent = "Reconnecting…"; });
  }

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLSelectElement || target instanceof HTMLTextAreaElement;
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "/") {
      const search = document.getElementById("search");
      if (search) { event.preventDefault(); search.focus(); }
    } else if (event.key === "j" || event.key === "k") {
      const links = Array.from(document.querySelectorAll("table.apps tbody th a"));
      if (links.length === 0) return;
      const at = links.indexOf(document.activeElement);
      const next = event.key === "j" ? Math.min(at + 1, links.length - 1) : Math.max(at - 1, 0);
      links[next].focus();
      event.preventDefault();
    }
  });
})();
