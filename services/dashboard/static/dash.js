// Times in the viewer's zone (UTC stays in the title), and an auto-refresh of list pages that
// pauses while the reader selects text, types in a form, ticks jobs for a bulk action, or presses
// "Pause refresh".
(function () {
  "use strict";
  var fmt = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
  });
  function localTimes() {
    document.querySelectorAll("time[data-ms]").forEach(function (el) {
      el.textContent = fmt.format(new Date(Number(el.dataset.ms)));
    });
  }
  var KEY = "ujobs-refresh-paused";
  function paused() { return sessionStorage.getItem(KEY) === "1"; }
  function reading() {
    var sel = window.getSelection();
    if (sel && String(sel).length > 0) { return true; }
    if (document.querySelector('input[name="ids"]:checked')) { return true; }
    var a = document.activeElement;
    return !!a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }
  // "Select all" ticks every row's box on this page (the bulk form takes what is ticked).
  function setupSelectAll() {
    var all = document.getElementById("select-all");
    if (!all) { return; }
    all.addEventListener("change", function () {
      document.querySelectorAll('input[name="ids"]').forEach(function (box) { box.checked = all.checked; });
    });
  }
  function setupRefresh() {
    if (document.body.dataset.refresh !== "on") { return; }
    var button = document.getElementById("refresh-toggle");
    if (button) {
      button.hidden = false;
      var label = function () { button.textContent = paused() ? "Resume refresh" : "Pause refresh"; };
      label();
      button.addEventListener("click", function () {
        sessionStorage.setItem(KEY, paused() ? "0" : "1");
        label();
      });
    }
    window.setInterval(function () {
      if (!paused() && !reading() && document.visibilityState === "visible") {
        window.location.reload();
      }
    }, 5000);
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(); setupRefresh(); setupSelectAll(); });
})();
