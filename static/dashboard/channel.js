// The channel page, live: a websocket frame only says "something new"; the page then fetches
// the server-rendered, sanitized HTML of the messages after the last one it shows (a frame's
// own body is never inserted). Reconnects with ?since= after a drop.
(function () {
  "use strict";
  var list = document.getElementById("messages");
  if (!list || !list.dataset.live) return;
  var last = parseInt(list.dataset.last || "0", 10);
  var fetching = false, again = false, more = false, delay = 500;

  function markReadSeq(seq) {
    var input = document.getElementById("mark-read-seq");
    if (input && seq > parseInt(input.value || "0", 10)) input.value = String(seq);
  }

  function fetchNew() {
    if (fetching) { again = true; return; }
    fetching = true;
    fetch(list.dataset.fragment + "?after=" + last, { credentials: "same-origin" })
      .then(function (r) {
        more = r.ok && r.headers.get("AgentChat-More") === "1";  // the page was cut
        return r.ok ? r.text() : "";
      })
      .then(function (html) {
        if (!html.trim()) return;
        var before = last;
        var template = document.createElement("template");
        template.innerHTML = html;  // server-sanitized HTML of our own route
        var items = template.content.querySelectorAll("li.message");
        var fresh = 0;
        items.forEach(function (item) {
          var seq = parseInt(item.dataset.seq, 10);
          if (seq > last && !document.getElementById("m-" + seq)) {
            if (item.classList.contains("for-me")) fresh += 1;
            list.appendChild(item);
            last = seq;
          }
        });
        var unread = document.getElementById("unread-count");
        if (unread && fresh) {
          var count = parseInt(unread.dataset.unread || "0", 10) + fresh;
          unread.dataset.unread = String(count);
          unread.textContent = count + " unread";
        }
        var empty = document.getElementById("empty");
        if (empty && items.length) empty.remove();
        markReadSeq(last);
        if (more && last > before) again = true;  // fetch the rest after what came
      })
      .catch(function () {})
      .then(function () { fetching = false; if (again) { again = false; fetchNew(); } });
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + location.host + "/ws/channels/" +
      encodeURIComponent(list.dataset.channel) + "/?since=" + last;
    var socket = new WebSocket(url);
    socket.onopen = function () { delay = 500; window.__socketOpen = true; };  // tests wait on it
    socket.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame && frame.type === "message") fetchNew();
    };
    socket.onclose = function (event) {
      if (event.code === 4404 || event.code === 4401) return;  // no longer allowed
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    };
  }

  document.querySelectorAll("time[datetime]").forEach(function (t) { t.title = t.getAttribute("datetime"); });
  connect();
})();
