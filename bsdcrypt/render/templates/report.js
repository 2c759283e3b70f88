"use strict";
(function () {
  // Sorting, filtering, copy buttons and findings shown in place, for a page that is complete without them.
  var table = document.getElementById("host-table");
  function addCopy(pre) {
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
  }
  // A host's details link to the findings it shares with other hosts (each text printed once, above);
  // opened, they show those whole too, before its own.
  function expand(d) {
    if (d.dataset.shown) { return; }
    d.dataset.shown = "1";
    var links = d.querySelectorAll("p.kv a[href^='#f']");
    if (!links.length) { return; }
    var own = d.querySelector("ol");
    var ol = own || document.createElement("ol");
    var first = ol.firstChild;
    links.forEach(function (a) {
      var li = document.getElementById(a.getAttribute("href").slice(1));
      if (!li) { return; }
      var copy = li.cloneNode(true);
      copy.removeAttribute("id");
      copy.querySelectorAll(".copy, .hn").forEach(function (x) { x.remove(); });
      ol.insertBefore(copy, first);
      copy.querySelectorAll("pre").forEach(addCopy);
    });
    if (!own) { d.appendChild(ol); }
  }
  document.addEventListener("toggle", function (e) {  // toggle does not bubble: caught on its way down
    var d = e.target;
    if (d.tagName === "DETAILS" && d.open && d.closest("#details")) { expand(d); }
  }, true);
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    var d = el && el.closest("details");
    if (d) { d.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.querySelectorAll(".details li pre, .findings li pre").forEach(addCopy);
  if (!table || !document.getElementById("controls")) { return; }  // one host: nothing to sort
  var bodies = Array.prototype.slice.call(table.tBodies);
  var size = bodies[0] ? bodies[0].rows.length : 0;
  var rows = [];
  bodies.forEach(function (b) { rows.push.apply(rows, b.rows); });
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var order = rows.map(function (r, i) { return i; });
  // Rows shown go first, `size` to a body, so a body out of view holds whole screens of rows; a body
  // with none shown is hidden.
  function place() {
    var shown = order.filter(function (i) { return !rows[i].hidden; });
    var hidden = order.filter(function (i) { return rows[i].hidden; });
    bodies.forEach(function (b, k) {
      var frag = document.createDocumentFragment();
      shown.slice(k * size, (k + 1) * size).forEach(function (i) { frag.appendChild(rows[i]); });
      b.hidden = !frag.childNodes.length;
      if (k === bodies.length - 1) { hidden.forEach(function (i) { frag.appendChild(rows[i]); }); }
      b.appendChild(frag);
    });
  }
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
      var keys = rows.map(function (r) {
        var cell = r.cells[col];
        return col === verdictCol ? verdicts.indexOf(r.dataset.v) : keyed ? Number(cell.getAttribute("data-k"))
          : cell.textContent;
      });
      order = rows.map(function (r, i) { return i; });
      order.sort(function (a, b) {
        var c = keyed ? keys[a] - keys[b] : collator.compare(keys[a], keys[b]);
        return c * dir || a - b;
      });
      place();
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
    place();
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
