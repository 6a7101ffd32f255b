// The overview, live: every data-poll seconds it fetches its own sections, server-rendered
// and escaped (_overview.html), and swaps them in. One request per poll, whatever the number
// of agents; paused while the tab is hidden, caught up when it shows again.
(function () {
  "use strict";
  var box = document.getElementById("overview");
  if (!box) return;
  var seconds = Math.max(5, parseInt(box.dataset.poll || "15", 10));
  var busy = false, timer = null;

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(box.dataset.fragment, { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 403) { clearInterval(timer); return ""; }
        return r.ok ? r.text() : "";
      })
      .then(function (html) {
        if (!html.trim()) return;
        var template = document.createElement("template");
        template.innerHTML = html;  // server-rendered, escaped HTML of our own route
        box.replaceChildren(template.content);
        box.dataset.refreshed = String(Date.now());  // tests wait on it
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  timer = setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
  window.AgentChatOverview = { refresh: refresh };
})();
