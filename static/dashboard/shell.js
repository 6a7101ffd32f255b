// Every signed-in page: the channel sidebar (by latest activity, unread badges), the tab
// title's count, desktop notifications (opt-in), and keyboard shortcuts. One JSON request
// (the nav/ route) on load and every poll_seconds: no request per channel or per agent.
// Nothing from the server is inserted as HTML: names and texts go in with textContent.
(function () {
  "use strict";
  var body = document.body;
  if (!body.dataset.nav) return;
  var list = document.getElementById("sidebar-list");
  var sidebar = document.getElementById("sidebar");
  var toggle = document.getElementById("sidebar-toggle");
  var notifyButton = document.getElementById("notify-toggle");
  var help = document.getElementById("shortcuts");
  var baseTitle = document.title, written = null, channels = [], timer = null, drawn = null;
  var SEEN = "agentchat-seen", COUNTS = "agentchat-unread", WANT = "agentchat-notify";

  function store(key, fallback) {
    try { return JSON.parse(sessionStorage.getItem(key) || "null") || fallback; } catch (e) { return fallback; }
  }
  function keep(key, value) { try { sessionStorage.setItem(key, JSON.stringify(value)); } catch (e) {} }
  function here() { return decodeURIComponent(location.pathname); }

  // --- the sidebar ---------------------------------------------------------------------
  function draw(rows, more) {
    var own = body.dataset.ownUnread;  // the channel page's count, newer than nav/'s
    var items = rows.map(function (row) {
      if (own !== undefined && here().indexOf(decodeURIComponent(row.url)) === 0) {
        row = { name: row.name, url: row.url, unread: parseInt(own, 10) || 0 };
      }
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = row.url;
      a.className = "sidebar-link" + (row.unread ? " unread" : "");
      var name = document.createElement("span");
      name.className = "sidebar-name";
      name.textContent = row.name;
      a.appendChild(name);
      if (row.unread) {
        var badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = String(row.unread);
        var hint = document.createElement("span");
        hint.className = "sr-only";
        hint.textContent = " unread";
        badge.appendChild(hint);
        a.appendChild(badge);
      }
      if (here().indexOf(decodeURIComponent(row.url)) === 0) a.setAttribute("aria-current", "page");
      li.appendChild(a);
      return li;
    });
    if (more) {  // more channels than the sidebar lists: the channel list has them all
      var rest = document.createElement("li");
      var link = document.createElement("a");
      link.href = body.dataset.channels + "?page=2";
      link.className = "sidebar-link sidebar-rest";
      link.id = "sidebar-rest";
      link.textContent = "Channels active earlier…";
      rest.appendChild(link);
      items.push(rest);
    }
    list.replaceChildren.apply(list, items);
    drawn = { rows: rows, more: more };
    if (!rows.length) {
      var empty = document.createElement("li");
      empty.className = "muted";
      empty.textContent = "No channels yet.";
      list.appendChild(empty);
    }
  }

  // The channel page tells of its own count as it reads (channel.js): the badge follows.
  window.AgentChatNav = { redraw: function () { if (drawn) draw(drawn.rows, drawn.more); } };

  // --- tab title and notifications -----------------------------------------------------
  function attention(state) {
    var n = state.unread + state.approvals.length + state.expired.length;
    // A page that set its own title since (the channel page's unread count) keeps it.
    if (body.dataset.ownTitle || (written !== null && document.title !== written)) return;
    written = n ? "(" + n + ") " + baseTitle : baseTitle;
    document.title = written;
  }

  function notifying() {
    return "Notification" in window && Notification.permission === "granted" &&
      localStorage.getItem(WANT) !== "off";
  }

  function tell(text, url, tag) {
    if (!notifying()) return;
    try {
      var note = new Notification("AgentChat", { body: text, tag: tag });
      note.onclick = function () { window.focus(); location.href = url; };
    } catch (e) {}
  }

  function announce(state) {
    var seen = store(SEEN, null), first = seen === null;
    seen = seen || [];
    state.approvals.concat(state.expired).forEach(function (item) {
      if (seen.indexOf(item.key) !== -1) return;
      seen.push(item.key);
      if (!first) tell(item.text, item.url, item.key);
    });
    keep(SEEN, seen.slice(-500));
    var counts = store(COUNTS, null), before = counts || {};
    var now = {};
    state.channels.forEach(function (row) {
      now[row.name] = row.unread;
      var more = row.unread - (before[row.name] || 0);
      if (counts !== null && more > 0) {
        tell(more + " new message" + (more > 1 ? "s" : "") + " for you in " + row.name, row.url, "unread:" + row.name);
      }
    });
    keep(COUNTS, now);
  }

  function drawNotifyButton() {
    if (!notifyButton || !("Notification" in window) || Notification.permission === "denied") {
      if (notifyButton) notifyButton.hidden = true;
      return;
    }
    notifyButton.hidden = false;
    notifyButton.textContent = notifying() ? "Notifications on" : "Enable notifications";
    notifyButton.setAttribute("aria-pressed", notifying() ? "true" : "false");
  }

  if (notifyButton) {
    notifyButton.addEventListener("click", function () {
      // Asked only here, on the person's click: never on load.
      if (Notification.permission === "granted") {
        localStorage.setItem(WANT, notifying() ? "off" : "on");
        drawNotifyButton();
        return;
      }
      Notification.requestPermission().then(function () {
        localStorage.setItem(WANT, "on");
        drawNotifyButton();
      });
    });
  }

  function poll() {
    fetch(body.dataset.nav, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (r.status === 403) { clearInterval(timer); return null; }
        return r.ok ? r.json() : null;
      })
      .then(function (state) {
        if (!state) return;
        channels = state.channels;
        draw(channels, state.more);
        attention(state);
        announce(state);
        if (!timer) timer = setInterval(poll, Math.max(5, state.poll_seconds) * 1000);
        body.dataset.navLoaded = "1";  // tests wait on it
      })
      .catch(function () {});
  }

  // --- the sidebar on a phone ----------------------------------------------------------
  function setOpen(open) {
    body.classList.toggle("sidebar-open", open);
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }
  if (toggle) toggle.addEventListener("click", function () { setOpen(!body.classList.contains("sidebar-open")); });

  // --- keyboard --------------------------------------------------------------------------
  function typing(target) {
    if (!target || target === body) return false;
    var tag = target.tagName;
    return target.isContentEditable || tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  function go(offset, unreadOnly) {
    if (!channels.length) return;
    var at = -1;
    channels.forEach(function (row, i) { if (here().indexOf(decodeURIComponent(row.url)) === 0) at = i; });
    for (var step = 1; step <= channels.length; step++) {
      var i = ((at + offset * step) % channels.length + channels.length) % channels.length;
      if (at === -1 && offset < 0) i = channels.length - step;
      if (!unreadOnly || channels[i].unread) { location.href = channels[i].url; return; }
    }
  }

  var pendingG = false, gTimer = null;
  var jumps = { o: "nav-overview", c: "nav-channels", a: "nav-approvals", p: "nav-agents", d: "nav-direct" };
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (help && help.open) return;  // the dialog handles Esc itself
    if (event.altKey) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        go(event.key === "ArrowDown" ? 1 : -1, event.shiftKey);
      }
      return;
    }
    if (pendingG) {
      pendingG = false;
      clearTimeout(gTimer);
      var link = document.getElementById(jumps[event.key] || "");
      if (link) { event.preventDefault(); location.href = link.href; }
      return;
    }
    if (event.key === "g") { pendingG = true; gTimer = setTimeout(function () { pendingG = false; }, 1500); return; }
    if (event.key === "n") { event.preventDefault(); go(1, true); return; }
    if (event.key === "[") { event.preventDefault(); setOpen(!body.classList.contains("sidebar-open")); return; }
    if (event.key === "/") {
      var search = document.querySelector(".bar form.search input");
      if (search) { event.preventDefault(); search.focus(); }
      return;
    }
    if (event.key === "?" && help && help.showModal) { event.preventDefault(); help.showModal(); }
  });
  var opener = document.getElementById("shortcuts-open");
  if (opener && help && help.showModal) {
    opener.addEventListener("click", function (event) { event.preventDefault(); help.showModal(); });
  }

  // A code block or table that scrolls sideways can be reached and scrolled from the keyboard.
  function scrollablesFocusable() {
    document.querySelectorAll("main pre, main table").forEach(function (pre) {
      if (pre.scrollWidth > pre.clientWidth && !pre.hasAttribute("tabindex")) pre.tabIndex = 0;
    });
  }
  scrollablesFocusable();
  window.addEventListener("resize", scrollablesFocusable);

  drawNotifyButton();
  poll();
  window.AgentChatShell = { poll: poll };
})();
