// Times on a page of messages, shared by the channel page (channel.js) and the message/thread
// page: every <time datetime> shows a relative time ("5 minutes ago"), refreshed every 30 s,
// with the reader's local time on hover; and a day separator ("Today", "Yesterday", a date, in
// the reader's time zone) before the first message of each day in the lists marked
// data-days (several lists, e.g. a thread's, are one sequence: a day is not repeated across
// them). channel.js calls AgentChatTimes.times(item) and .separators() for what arrives live.
(function () {
  "use strict";
  var relative = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  function ago(date) {
    var s = (Date.now() - date.getTime()) / 1000;
    if (s < 60) return "just now";
    var units = [["minute", 60], ["hour", 3600], ["day", 86400], ["week", 604800], ["month", 2592000], ["year", 31536000]];
    var unit = units[0];
    for (var i = 0; i < units.length; i++) if (s >= units[i][1]) unit = units[i];
    var n = Math.floor(s / unit[1]);
    return relative ? relative.format(-n, unit[0]) : n + " " + unit[0] + (n === 1 ? "" : "s") + " ago";
  }
  function local(date) {
    return date.toLocaleString(undefined, { weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  }
  function times(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (t) {
      var date = new Date(t.getAttribute("datetime"));
      if (isNaN(date)) return;
      t.textContent = ago(date);
      t.title = local(date);
    });
  }
  function dayLabel(date) {
    var today = new Date(); today.setHours(0, 0, 0, 0);
    var day = new Date(date); day.setHours(0, 0, 0, 0);
    var diff = Math.round((today - day) / 86400000);
    if (diff === 0) return "Today";
    if (diff === 1) return "Yesterday";
    return date.toLocaleDateString(undefined, { weekday: "long", year: "numeric", month: "long", day: "numeric" });
  }
  function separators() {
    var previous = null;
    document.querySelectorAll("ol[data-days]").forEach(function (list) {
      list.querySelectorAll("li.day-sep").forEach(function (li) { li.remove(); });
      list.querySelectorAll("li.message[data-ts]").forEach(function (li) {
        var date = new Date(li.dataset.ts);
        if (isNaN(date)) return;
        var key = date.toDateString();
        if (key === previous) return;
        var sep = document.createElement("li");
        sep.className = "day-sep";
        var span = document.createElement("span");
        span.textContent = dayLabel(date);
        sep.appendChild(span);
        var before = li.previousElementSibling;
        list.insertBefore(sep, before && before.classList.contains("unread-marker") ? before : li);
        previous = key;
      });
    });
  }
  window.AgentChatTimes = { times: times, separators: separators };
  function start() {
    times(document);
    separators();
    setInterval(function () { times(document); separators(); }, 30000);  // "Today" at midnight
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
