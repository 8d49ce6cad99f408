// sluice console: the live parts of a page. Every data-refresh-ms (the console's sample
// interval), fetch the page again and swap in each element marked data-live, matched by id. The
// server renders everything, charts included (inline SVG), so this is all the script there is.
// Paused while the tab is hidden; a failed refresh marks the page stale until one succeeds.
(function () {
  "use strict";
  if (!document.querySelector("[data-live][id]")) {
    return;
  }
  var period = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 2000;
  var busy = false;
  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (element) {
          var replacement = fresh.getElementById(element.id);
          if (replacement) {
            element.replaceWith(document.importNode(replacement, true));
          }
        });
        document.body.classList.remove("stale");
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {
        document.body.classList.add("stale");
      })
      .finally(function () {
        busy = false;
      });
  }
  setInterval(refresh, period);
})();
