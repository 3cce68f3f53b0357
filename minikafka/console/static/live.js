// Live updates: when the ledger commits, fetch this page again and swap in its <main>.
// The page works without this script; it only saves a reload. The event stream is open only
// while the page is shown: a browser keeps few connections per server (six over HTTP/1.1), and
// hidden tabs or pages kept for the back button must not take them all.
(function () {
  if (!window.EventSource || !document.body.dataset.live) return;
  var pending = null, source = null;
  function refresh() {
    pending = null;
    var active = document.activeElement;
    if (active && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) return; // never under a person's typing
    fetch(window.location.href, {headers: {"Accept": "text/html"}, credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live"), here = document.getElementById("live");
        if (fresh && here) { here.innerHTML = fresh.innerHTML; document.body.dataset.updated = String(Date.now()); }
      });
  }
  function soon() { if (!pending) pending = setTimeout(refresh, 200); }
  function open() {
    if (source) return;
    source = new EventSource("/events");
    source.addEventListener("change", soon);
    source.addEventListener("gone", close);
  }
  function close() { if (source) { source.close(); source = null; } }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { close(); } else { open(); soon(); }
  });
  window.addEventListener("pagehide", close);
  window.addEventListener("pageshow", function (e) { if (e.persisted) { open(); soon(); } });
  if (!document.hidden) open();
})();
