// Thoth inspector: "/" focuses the search box, and server-sent events (/v1/events) refresh the live parts of the page.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
      var search = document.getElementById("q");
      if (search) { event.preventDefault(); search.focus(); search.select(); }
    }
  });

  var live = document.getElementById("live");
  if (!live || !window.EventSource) { return; }
  var peer = document.body.getAttribute("data-peer");
  var pending = false;

  function say(text) { live.textContent = text; }

  function refresh(why) {
    if (pending) { return; }
    pending = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (part) {
          var replacement = fresh.getElementById(part.id);
          if (!replacement || part.contains(document.activeElement)) { return; }  // never pull focus away
          part.innerHTML = replacement.innerHTML;
        });
        say(why + " at " + new Date().toLocaleTimeString() + "; this page is up to date.");
      })
      .catch(function () { say(why + "; reload the page to see it."); })
      .then(function () { pending = false; });
  }

  function about(event) {
    try { var data = JSON.parse(event.data || "{}"); } catch (e) { return true; }
    var who = data && (data.peer || (data.payload && data.payload.peer));
    return !who || !peer || who === peer;
  }

  var source = null;
  function connect() {
    source = new EventSource(live.getAttribute("data-events"));
    source.addEventListener("open", function () { say("Live updates: on."); });
    source.addEventListener("error", function () { say("Live updates: reconnecting\u2026"); });
    [["turn", "A turn landed"], ["record", "Memory changed"], ["approval", "The approval queue changed"]].forEach(function (kind) {
      source.addEventListener(kind[0], function (event) { if (about(event)) { refresh(kind[1]); } });
    });
  }
  // A browser allows few connections to one server: a page left (or kept in the back-forward cache) lets its go.
  window.addEventListener("pagehide", function () { if (source) { source.close(); source = null; } });
  window.addEventListener("pageshow", function () { if (!source) { connect(); } });
  connect();
})();
