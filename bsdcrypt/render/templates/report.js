"use strict";
(function () {
  // Sorting, filtering and copy buttons for a page that is complete without them.
  var table = document.getElementById("host-table");
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    var d = el && el.closest("details");
    if (d) { d.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.querySelectorAll(".details li pre").forEach(function (pre) {
    var text = pre.textContent;
    var b = document.createElement("button");
    b.type = "button";
    b.className = "copy";
    b.textContent = "copy";
    b.addEventListener("click", function () {
      function done(ok) {
        b.textContent = ok ? "copied" : "select + Ctrl-C";
        b.classList.toggle("done", ok);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      } else {
        var r = document.createRange();
        r.selectNodeContents(pre.firstChild || pre);
        var s = window.getSelection();
        s.removeAllRanges();
        s.addRange(r);
        done(false);
      }
    });
    pre.appendChild(b);
  });
  if (!table || !document.getElementById("controls")) { return; }  // one host: nothing to sort
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var verdicts = ["critical", "warning", "unknown", "ok"];  // needing action first, as the text table
  var verdictCol = heads.findIndex(function (h) { return h.hasAttribute("data-verdict-col"); });
  heads.forEach(function (th, col) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = th.textContent;
    b.title = "sort by " + th.textContent;
    th.textContent = "";
    th.appendChild(b);
    b.addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var keyed = th.hasAttribute("data-keyed") || col === verdictCol;
      var order = rows.map(function (r, i) {
        var cell = r.cells[col];
        var k = col === verdictCol ? verdicts.indexOf(r.dataset.v) : keyed ? Number(cell.getAttribute("data-k"))
          : cell.textContent;
        return {i: i, k: k};
      });
      order.sort(function (a, b) {
        var c = keyed ? a.k - b.k : collator.compare(a.k, b.k);
        return c * dir || a.i - b.i;
      });
      var frag = document.createDocumentFragment();
      order.forEach(function (o) { frag.appendChild(rows[o.i]); });
      body.appendChild(frag);
    });
  });
  var controls = document.getElementById("controls");
  var input = document.getElementById("filter");
  var chips = Array.prototype.slice.call(controls.querySelectorAll(".chip"));
  var count = document.getElementById("count");
  var empty = document.getElementById("empty");
  controls.hidden = false;
  function apply() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = {};
    chips.forEach(function (c) { shown[c.dataset.verdict] = c.getAttribute("aria-pressed") === "true"; });
    var n = 0;
    rows.forEach(function (r, i) {
      var ok = shown[r.dataset.v] && words.every(function (w) { return texts[i].indexOf(w) >= 0; });
      r.hidden = !ok;
      if (ok) { n += 1; }
    });
    count.textContent = n === rows.length ? rows.length + (rows.length === 1 ? " host" : " hosts")
      : n + " of " + rows.length + " hosts shown";
    empty.hidden = n !== 0;
  }
  input.addEventListener("input", apply);
  chips.forEach(function (c) {
    c.addEventListener("click", function () {
      c.setAttribute("aria-pressed", c.getAttribute("aria-pressed") === "true" ? "false" : "true");
      apply();
    });
  });
  document.querySelectorAll("a.tile[data-verdict]").forEach(function (t) {
    t.addEventListener("click", function () {
      chips.forEach(function (c) {
        c.setAttribute("aria-pressed", String(c.dataset.verdict === t.dataset.verdict));
      });
      apply();
    });
  });
}());
