// Lease and lock expiries count down on the page (the server rendered the first text).
(function () {
  "use strict";
  var items = document.querySelectorAll("[data-expires]");
  if (!items.length) return;
  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m";
    return Math.floor(h / 24) + " days";
  }
  function tick() {
    var now = Date.now();
    items.forEach(function (el) {
      var at = Date.parse(el.dataset.expires);
      if (isNaN(at)) return;
      var left = at - now;
      el.textContent = left > 0 ? "in " + span(left) : "expired " + span(left) + " ago";
      el.classList.toggle("bad", left <= 0);
    });
  }
  tick();
  setInterval(tick, 1000);
})();
