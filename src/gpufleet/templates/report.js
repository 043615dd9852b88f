// report.html's script: no library, no network. Host filter, heat-map sorting, open the host a link
// points at, and every section open while printing.
(function () {
  "use strict";
  var filter = document.getElementById("host-filter");
  var counter = document.getElementById("host-filter-count");
  function applyFilter() {
    var text = filter.value.trim().toLowerCase();
    var shown = {};
    document.querySelectorAll("[data-host]").forEach(function (el) {
      var name = el.getAttribute("data-host");
      var match = !text || name.toLowerCase().indexOf(text) !== -1;
      el.hidden = !match;
      if (match) { shown[name] = true; }
    });
    if (counter) {
      counter.textContent = text ? Object.keys(shown).length + " host(s) match" : "";
    }
  }
  if (filter) { filter.addEventListener("input", applyFilter); }

  var table = document.getElementById("heat-table");
  if (table) {
    var body = table.tBodies[0];
    var state = { key: "", descending: false };
    table.querySelectorAll("thead button[data-sort]").forEach(function (button) {
      button.addEventListener("click", function () {
        var kind = button.getAttribute("data-sort");
        var col = parseInt(button.getAttribute("data-col") || "-1", 10);
        var key = kind + col;
        state.descending = state.key === key ? !state.descending : kind !== "name";
        state.key = key;
        var rows = Array.prototype.slice.call(body.rows);
        function value(row) {
          if (kind === "count") { return parseInt(row.getAttribute("data-count"), 10); }
          if (kind === "col") { return row.cells[col + 2].hasAttribute("data-cell") ? 1 : 0; }
          return 0;
        }
        rows.sort(function (a, b) {
          var diff = value(a) - value(b);
          if (diff === 0) {
            var byName = a.getAttribute("data-host").localeCompare(b.getAttribute("data-host"), undefined, { numeric: true });
            return kind === "name" && state.descending ? -byName : byName;
          }
          return state.descending ? -diff : diff;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) { return; }
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
    el.hidden = false;
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  var closed = [];
  window.addEventListener("beforeprint", function () {
    closed = Array.prototype.filter.call(document.querySelectorAll("details"), function (d) { return !d.open; });
    closed.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    closed.forEach(function (d) { d.open = false; });
    closed = [];
  });
})();
