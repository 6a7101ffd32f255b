// The channel page as a chat. Live: a websocket frame only says "something new"; the page then
// fetches the server-rendered, sanitized HTML of the messages after the last one it shows (a
// frame's own body is never inserted). Reconnects with ?since= after a drop. Opens at the first
// unread (or the bottom), follows new messages while the reader is at the bottom (else a
// "N new" pill), marks read what was actually seen (IntersectionObserver, only while the tab
// is visible, never past a message not yet seen), and sends from the composer with Enter.
// Relative times and day separators: times.js (shared with the message/thread page).
(function () {
  "use strict";
  var list = document.getElementById("messages");
  if (!list) return;
  var live = !!list.dataset.live;
  var last = parseInt(list.dataset.last || "0", 10);
  var floor = list.dataset.floor === "" || list.dataset.floor === undefined ? null : parseInt(list.dataset.floor, 10);
  var sent = floor === null ? 0 : Math.max(floor, parseInt(list.dataset.cursor || "0", 10));
  var fetching = false, again = false, more = false, delay = 500, paused = false;
  var seen = {}, fresh = [];
  var counter = document.getElementById("unread-count");
  var baseTitle = document.title;
  var csrf = (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";
  var filter = document.getElementById("conversation-only");
  var pill = document.getElementById("new-pill");

  // ---- times and day separators: times.js (loaded before this script) ----
  var times = window.AgentChatTimes.times, separators = window.AgentChatTimes.separators;

  // ---- unread counts and the tab title ----
  function showCounts(unread, conversation) {
    if (!counter) return;
    counter.dataset.unread = String(unread);
    counter.dataset.conversation = String(conversation);
    counter.textContent = unread + " unread" + (unread ? " · " + conversation + " conversation" : "");
    // The tab title counts conversation, as the sidebar's badges do (audits apart); shell.js
    // leaves a title the page sets alone.
    document.body.dataset.ownTitle = "1";
    document.body.dataset.ownUnread = String(conversation);  // the sidebar's badge here
    if (window.AgentChatNav) window.AgentChatNav.redraw();
    document.title = (conversation ? "(" + conversation + ") " : "") + baseTitle;
  }
  function readState(state) {
    if (!counter || !state || typeof state.unread !== "number") return;
    // The server counted up to state.upto; what arrived after that is added here.
    var unread = state.unread, conversation = state.conversation;
    list.querySelectorAll("li.message[data-relevant]").forEach(function (li) {
      var seq = parseInt(li.dataset.seq, 10);
      if (seq > state.upto && seq > state.cursor) { unread += 1; if (li.dataset.conversation) conversation += 1; }
    });
    counter.dataset.upto = String(state.upto);
    showCounts(unread, conversation);
  }
  function post(url, data) {
    var body = new URLSearchParams(data);
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "Accept": "application/json", "X-CSRFToken": csrf },
    }).then(function (r) { return r.json().then(function (json) { return { ok: r.ok, json: json }; }); });
  }

  // ---- read as seen ----
  function hidden(li) { return li.offsetParent === null; }  // filtered out: passed over
  var acking = false, ackAgain = false;
  function advance() {
    if (floor === null || paused || document.visibilityState !== "visible") return;
    var upto = sent;
    var items = list.querySelectorAll("li.message[data-seq]");
    for (var i = 0; i < items.length; i++) {
      var seq = parseInt(items[i].dataset.seq, 10);
      if (seq <= floor || seq <= upto) continue;
      if (!seen[seq] && !hidden(items[i])) break;  // never past a message not yet seen
      upto = seq;
    }
    if (upto <= sent) return;
    if (acking) { ackAgain = true; return; }
    acking = true;
    post(list.dataset.read, { seq: String(upto) })
      .then(function (r) { if (r.ok) { sent = Math.max(sent, upto); readState(r.json); } })
      .catch(function () {})
      .then(function () { acking = false; if (ackAgain) { ackAgain = false; advance(); } });
  }
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    if (document.visibilityState !== "visible") return;
    entries.forEach(function (entry) {
      if (entry.isIntersecting) seen[entry.target.dataset.seq] = true;
    });
    advance();
  }, { threshold: 0.6 }) : null;
  // A message taller than the window is seen once its end is: watch a mark at its bottom too.
  function watch(li) {
    if (!observer) return;
    observer.observe(li);
  }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible" || !observer) return;
    // What is in view now counts as seen now (the observer reported it while hidden).
    list.querySelectorAll("li.message[data-seq]").forEach(function (li) {
      var box = li.getBoundingClientRect();
      if (box.top < window.innerHeight && box.bottom > 0) seen[li.dataset.seq] = true;
    });
    advance();
  });

  // ---- mark unread from here ----
  var note = document.getElementById("read-note");
  function markUnread(seq) {
    post(list.dataset.unreadUrl, { seq: String(seq) }).then(function (r) {
      if (!r.ok) return;
      paused = true;
      sent = Math.min(sent, seq - 1);
      Object.keys(seen).forEach(function (k) { if (parseInt(k, 10) >= seq) delete seen[k]; });
      var marker = document.getElementById("first-unread");
      if (!marker) {
        marker = document.createElement("li");
        marker.className = "unread-marker"; marker.id = "first-unread";
        var span = document.createElement("span"); span.textContent = "new since you last read";
        marker.appendChild(span);
      }
      var target = document.getElementById("m-" + seq);
      if (target) list.insertBefore(marker, target);
      readState(r.json);
      if (note) {
        note.textContent = "Marked unread from #" + seq + ": reading this page marks nothing read until you open the channel again. ";
        var resume = document.createElement("button");
        resume.type = "button"; resume.className = "link-button"; resume.id = "resume-reading";
        resume.textContent = "Resume marking read";
        resume.addEventListener("click", function () { paused = false; note.hidden = true; advance(); });
        note.appendChild(resume);
        note.hidden = false;
      }
    }).catch(function () {});
  }

  // ---- the composer ----
  var composer = document.getElementById("composer");
  var box = document.getElementById("composer-body");
  var replyInput = document.getElementById("reply-to");
  var replying = document.getElementById("replying");
  var replyingText = document.getElementById("replying-text");
  var error = document.getElementById("composer-error");
  function setReply(seq, who) {
    if (!replyInput) return;
    replyInput.value = seq ? String(seq) : "";
    if (replying) {
      replying.hidden = !seq;
      if (seq) replyingText.textContent = "Replying to #" + seq + (who ? " " + who : "");
    }
  }
  function grow() { if (box) { box.style.height = "auto"; box.style.height = Math.min(box.scrollHeight + 2, 240) + "px"; } }
  if (composer && box) {
    box.addEventListener("input", grow);
    box.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
        e.preventDefault();
        if (box.value.trim()) composer.requestSubmit ? composer.requestSubmit() : composer.submit();
      }
    });
    composer.addEventListener("submit", function (e) {
      e.preventDefault();
      var send = document.getElementById("send");
      if (send) send.disabled = true;
      fetch(composer.action, {
        method: "POST", credentials: "same-origin", body: new URLSearchParams(new FormData(composer)),
        headers: { "Accept": "application/json", "X-CSRFToken": csrf },
      }).then(function (r) { return r.json().then(function (json) { return { ok: r.ok, json: json }; }); })
        .then(function (r) {
          if (!r.ok) {
            error.textContent = "Not sent: " + ((r.json.error && r.json.error.message) || "the server refused it");
            error.hidden = false;
            return;
          }
          error.hidden = true;
          box.value = ""; grow();
          ["composer-title", "composer-to", "composer-status"].forEach(function (id) { var f = document.getElementById(id); if (f) f.value = ""; });
          setReply(null);
          follow = true;
          if (live) fetchNew(); else location.href = list.dataset.fragment.replace(/fragment\/$/, "") + "#m-" + r.json.seq;
        })
        .catch(function () { error.textContent = "Not sent: the server could not be reached."; error.hidden = false; })
        .then(function () { if (send) send.disabled = false; });
    });
    var cancel = document.getElementById("reply-cancel");
    if (cancel) cancel.addEventListener("click", function () { setReply(null); box.focus(); });
  }
  list.addEventListener("click", function (e) {
    var reply = e.target.closest("a.reply");
    if (reply && box) {
      e.preventDefault();
      setReply(parseInt(reply.dataset.seq, 10), reply.dataset.who);
      box.focus();
      return;
    }
    var unread = e.target.closest("button.mark-unread");
    if (unread) markUnread(parseInt(unread.dataset.seq, 10));
  });

  // ---- following, the pill ----
  var follow = false;
  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
  }
  function toBottom() { window.scrollTo(0, document.documentElement.scrollHeight); }
  function showPill() {
    if (!pill) return;
    fresh = fresh.filter(function (seq) {
      var li = document.getElementById("m-" + seq);
      if (!li) return false;
      var b = li.getBoundingClientRect();
      return b.top >= window.innerHeight - (composer ? composer.offsetHeight : 0);  // still below
    });
    pill.hidden = fresh.length === 0;
    pill.textContent = fresh.length + " new ↓";
  }
  if (pill) pill.addEventListener("click", function () {
    var first = fresh.length ? document.getElementById("m-" + fresh[0]) : null;
    if (first) first.scrollIntoView({ block: "center" }); else toBottom();
    fresh = []; pill.hidden = true;
  });
  window.addEventListener("scroll", function () { if (fresh.length) showPill(); }, { passive: true });

  function enhance(li) {
    var button = li.querySelector("button.mark-unread");
    if (button) button.hidden = false;
    watch(li);
  }

  function fetchNew() {
    if (fetching) { again = true; return; }
    fetching = true;
    var stay = follow || atBottom();
    follow = false;
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
        var upto = counter ? parseInt(counter.dataset.upto || "0", 10) : 0;
        var added = 0, addedConversation = 0;
        items.forEach(function (item) {
          var seq = parseInt(item.dataset.seq, 10);
          if (seq > last && !document.getElementById("m-" + seq)) {
            if (item.dataset.relevant && seq > upto) { added += 1; if (item.dataset.conversation) addedConversation += 1; }
            list.appendChild(item);
            times(item);
            enhance(item);
            if (!stay && item.dataset.relevant) fresh.push(seq);
            last = seq;
          }
        });
        if (counter && added) {
          showCounts(parseInt(counter.dataset.unread || "0", 10) + added,
            parseInt(counter.dataset.conversation || "0", 10) + addedConversation);
        }
        var empty = document.getElementById("empty");
        if (empty && items.length) empty.remove();
        var input = document.getElementById("mark-read-seq");
        if (input && last > parseInt(input.value || "0", 10)) input.value = String(last);
        separators();
        if (stay) toBottom(); else showPill();
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

  // ---- the conversation-only filter (remembered in this browser) ----
  if (filter) {
    var key = "agentchat.conversation-only";
    try { filter.checked = localStorage.getItem(key) === "1"; } catch (e) {}
    var apply = function () {
      list.classList.toggle("conversation-only", filter.checked);
      try { localStorage.setItem(key, filter.checked ? "1" : "0"); } catch (e) {}
      advance();
    };
    filter.addEventListener("change", apply);
    list.classList.toggle("conversation-only", filter.checked);
  }

  if (counter) showCounts(parseInt(counter.dataset.unread || "0", 10), parseInt(counter.dataset.conversation || "0", 10));
  list.querySelectorAll("li.message[data-seq]").forEach(enhance);
  // Open at the first unread, or at the bottom (a link to #m-N opens there, as it says).
  if (!location.hash) {
    var marker = document.getElementById("first-unread");
    if (marker) marker.scrollIntoView({ block: "start" }); else if (live) toBottom();
  }
  window.__channelReady = true;  // tests wait on it
  if (live) connect();
})();
