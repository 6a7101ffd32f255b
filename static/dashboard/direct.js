// A direct conversation, live: a websocket frame of the pair's direct channel only says
// "something new"; the page then fetches the server-rendered, sanitized HTML of the envelopes
// after the last seq it looked at (a frame's own body is never inserted). A new message goes to
// the end of its conversation's section (a new section when it starts one); a receipt goes on
// the message it answers. Reconnects with ?since= after a drop.
(function () {
  "use strict";
  var root = document.getElementById("conversations");
  if (!root || !root.dataset.live || !root.dataset.channel) return;
  var last = parseInt(root.dataset.last || "0", 10);
  var filter = root.dataset.conversation || "";
  var fetching = false, again = false, delay = 500;

  function sectionFor(id) {
    var sections = root.querySelectorAll("section.conversation");
    for (var i = 0; i < sections.length; i++) {
      if (sections[i].dataset.conversation === id) return sections[i];
    }
    return null;
  }

  function place(fresh) {
    var count = 0;
    fresh.querySelectorAll("section.conversation").forEach(function (section) {
      section.querySelectorAll("li.message.for-me").forEach(function (item) {
        if (!document.getElementById(item.id)) count += 1;
      });
      var mine = sectionFor(section.dataset.conversation);
      if (!mine) { root.appendChild(section); mine = section; }
      else {
        var list = mine.querySelector("ol.messages");
        section.querySelectorAll("li.message").forEach(function (item) {
          if (!document.getElementById(item.id)) list.appendChild(item);
        });
      }
    });
    fresh.querySelectorAll("li.receipt").forEach(function (receipt) {
      if (document.getElementById(receipt.id)) return;
      var answered = document.getElementById("m-" + receipt.dataset.for);
      if (answered) answered.querySelector("ul.receipts").appendChild(receipt);
    });
    return count;
  }

  function fetchNew() {
    if (fetching) { again = true; return; }
    fetching = true;
    var url = root.dataset.fragment + "?after=" + last +
      (filter ? "&conversation=" + encodeURIComponent(filter) : "");
    fetch(url, { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) return null;
        var more = r.headers.get("AgentChat-More") === "1";
        var upto = parseInt(r.headers.get("AgentChat-Last") || "0", 10);
        return r.text().then(function (html) { return { html: html, more: more, upto: upto }; });
      })
      .then(function (got) {
        if (!got) return;
        var template = document.createElement("template");
        template.innerHTML = got.html;  // server-sanitized HTML of our own route
        var fresh = place(template.content);
        if (got.upto > last) last = got.upto;
        var unread = document.getElementById("unread-count");
        if (unread && fresh) {
          var n = parseInt(unread.dataset.unread || "0", 10) + fresh;
          unread.dataset.unread = String(n);
          unread.textContent = n + " unread";
        }
        var input = document.getElementById("mark-read-seq");
        if (input && last > parseInt(input.value || "0", 10)) input.value = String(last);
        var empty = document.getElementById("empty");
        if (empty && root.querySelector("li.message")) empty.remove();
        if (got.more) again = true;
      })
      .catch(function () {})
      .then(function () { fetching = false; if (again) { again = false; fetchNew(); } });
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + location.host + "/ws/channels/" +
      encodeURIComponent(root.dataset.channel) + "/?since=" + last;
    var socket = new WebSocket(url);
    socket.onopen = function () { delay = 500; window.__socketOpen = true; fetchNew(); };
    socket.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame && frame.type === "message") fetchNew();
    };
    socket.onclose = function (event) {
      window.__socketOpen = false;
      if (event.code === 4404 || event.code === 4401) return;  // no longer allowed
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    };
  }

  connect();
})();
