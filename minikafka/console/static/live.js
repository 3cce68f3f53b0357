// Live updates: when the ledger commits, fetch this page again and swap in its <main>.
// The page works without this script; it only saves a reload.
(function () {
  if (!window.EventSource || !document.body.dataset.live) return;
  var pending = null;
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
  var source = new EventSource("/events");
  source.addEventListener("change", function () {
    if (!pending) pending = setTimeout(refresh, 200);
  });
  source.addEventListener("gone", function () { source.close(); });
})();
