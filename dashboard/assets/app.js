// Progressive only: every page reads and acts without this file.
// On pages that ask for it (body[data-refresh]), reload every few seconds
// unless the reader unticks "auto-refresh" (remembered in localStorage),
// is in the middle of selecting text, or is typing in a box.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "", 10);
  if (!seconds) return;
  var toggle = document.getElementById("refresh-toggle");
  var box = document.getElementById("refresh-box");
  var key = "dq-dashboard-refresh";
  var on = true;
  try { on = localStorage.getItem(key) !== "off"; } catch (e) { /* private mode */ }
  if (toggle && box) {
    toggle.hidden = false;
    box.checked = on;
    box.addEventListener("change", function () {
      on = box.checked;
      try { localStorage.setItem(key, on ? "on" : "off"); } catch (e) { /* ignore */ }
    });
  }
  setInterval(function () {
    var selecting = window.getSelection && String(window.getSelection()).length > 0;
    // Nor while a box is being filled in (a filter, a pause's length).
    var active = document.activeElement;
    var typing = active && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName) && active.type !== "checkbox";
    if (on && !selecting && !typing && document.visibilityState !== "hidden") {
      window.location.reload();
    }
  }, seconds * 1000);
})();
