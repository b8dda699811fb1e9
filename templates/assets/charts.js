/* report_builder: embed every <div class="rb-chart" data-spec="..."> with the vendored vega-embed.
 * The spec is inline (HTML-escaped JSON); large data sits in content-hashed files next to the figure's
 * other assets (data-<hash>.json, named by URL in the spec), each with a script twin (data-<hash>.json.js,
 * `window.rbData[url] = "<the file's text>"`) that is loaded with a <script> element and put into the spec
 * as inline values: browsers refuse to fetch files for a page opened from disk (file://), not to run a
 * script beside it, so every chart works from disk as over HTTP. The page adapts the spec, never the files:
 * in the dark scheme (material's "slate") chart text, axes and grid get light colours; on a narrow
 * window side-by-side panels are stacked and legends go below, so nothing is off-screen. Charts are
 * re-embedded when the scheme is toggled or the window crosses the narrow width. */
(function () {
  "use strict";

  var NARROW_PX = 600;
  var DARK = {
    axis: { labelColor: "#e3e3e3", titleColor: "#e3e3e3", gridColor: "#3c4150", domainColor: "#9aa0aa",
            tickColor: "#9aa0aa" },
    legend: { labelColor: "#e3e3e3", titleColor: "#e3e3e3" },
    header: { labelColor: "#e3e3e3", titleColor: "#e3e3e3" },
    title: { color: "#f0f0f0", subtitleColor: "#c8c8c8" },
    text: { color: "#e3e3e3" },
    style: { "guide-label": { fill: "#e3e3e3" }, "guide-title": { fill: "#e3e3e3" } }
  };

  function isDark() {
    var s = document.body && document.body.getAttribute("data-md-color-scheme");
    return s === "slate";
  }

  function isNarrow() { return window.innerWidth < NARROW_PX; }

  function merge(a, b) {  // b's values win; nested objects are merged
    var out = {}, k;
    for (k in a) { if (Object.prototype.hasOwnProperty.call(a, k)) out[k] = a[k]; }
    for (k in b) {
      if (!Object.prototype.hasOwnProperty.call(b, k)) continue;
      var av = out[k], bv = b[k];
      out[k] = (av && bv && typeof av === "object" && typeof bv === "object" && !Array.isArray(av) && !Array.isArray(bv))
        ? merge(av, bv) : bv;
    }
    return out;
  }

  var PANEL = "_rb_panel";

  function datumOf(field) { return "datum[" + JSON.stringify(String(field)) + "]"; }

  function panels(spec, row, column) {  // a row x column grid as one wrapped facet: "<row> · <column>" per panel
    var sort = "ascending";
    if (Array.isArray(row.sort) && Array.isArray(column.sort)) {
      sort = [];
      row.sort.forEach(function (r) { column.sort.forEach(function (c) { sort.push(r + " · " + c); }); });
    }
    spec.transform = [{ calculate: datumOf(row.field) + " + ' · ' + " + datumOf(column.field), as: PANEL }]
      .concat(spec.transform || []);
    spec.columns = 1;
    return { field: PANEL, type: "nominal", title: null, sort: sort, header: column.header || row.header };
  }

  function stack(spec) {  // side-by-side panels -> one column
    if (!spec || typeof spec !== "object") return spec;
    if (spec.hconcat) { spec.vconcat = spec.hconcat; delete spec.hconcat; }
    if (spec.concat) { spec.columns = 1; }
    if (spec.facet) {
      if (spec.facet.column && spec.facet.row && spec.facet.column.field && spec.facet.row.field) {
        // a model x dataset grid: one panel per (model, dataset), one column (the second dataset sat
        // off to the right of a phone)
        spec.facet = panels(spec, spec.facet.row, spec.facet.column);
      }
      else if (spec.facet.column && !spec.facet.row) { spec.facet = spec.facet.column; spec.columns = 1; }
      else if (spec.facet.field) { spec.columns = 1; }
    }
    var enc = spec.encoding;
    if (enc && enc.column && enc.row && enc.column.field && enc.row.field) {
      enc.facet = panels(spec, enc.row, enc.column); delete enc.row; delete enc.column;
    }
    if (enc && enc.column && !enc.row) { enc.facet = enc.column; delete enc.column; spec.columns = 1; }
    if (enc && enc.facet) { spec.columns = 1; }
    ["vconcat", "concat"].forEach(function (k) { (spec[k] || []).forEach(stack); });
    if (spec.spec) stack(spec.spec);
    return spec;
  }

  function fitWidth(spec, max) {  // continuous panels wider than the window shrink to fit it
    if (!spec || typeof spec !== "object") return;
    if (typeof spec.width === "number" && spec.width > max) {
      // a square panel (a token-to-token map) stays square: narrowed alone, its cells became thin strips
      if (spec.height === spec.width) spec.height = max;
      spec.width = max;
    }
    ["vconcat", "concat", "layer"].forEach(function (k) { (spec[k] || []).forEach(function (s) { fitWidth(s, max); }); });
    if (spec.spec) fitWidth(spec.spec, max);
  }

  function adapt(spec) {
    spec.config = merge(spec.config || {}, { background: null });  // the page's own background shows
    if (isNarrow()) {
      spec = stack(spec);
      fitWidth(spec, Math.max(200, window.innerWidth - 110));
      spec.config = merge(spec.config || {}, { legend: { orient: "bottom", direction: "horizontal", columns: 2 } });
    }
    if (isDark()) spec.config = merge(spec.config || {}, DARK);
    return spec;
  }

  function urlNodes(node, out) {  // every object of the spec whose data is {url: ...}
    if (!node || typeof node !== "object") return out;
    if (Array.isArray(node)) { node.forEach(function (n) { urlNodes(n, out); }); return out; }
    if (node.data && typeof node.data === "object" && typeof node.data.url === "string") out.push(node);
    for (var k in node) {
      if (Object.prototype.hasOwnProperty.call(node, k) && k !== "data") urlNodes(node[k], out);
    }
    return out;
  }

  var scripts = {};
  function loadData(url) {  // the data file's script twin, once per page
    if (!/^figures\/[A-Za-z0-9._-]+\/data-[0-9a-f]+\.[a-z]+$/.test(url)) {
      return Promise.reject(new Error("unexpected data URL " + url));
    }
    if (!scripts[url]) {
      scripts[url] = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = url + ".js";
        s.onload = function () { resolve(); };
        s.onerror = function () { reject(new Error("cannot load " + url + ".js")); };
        document.head.appendChild(s);
      });
    }
    return scripts[url];
  }

  function inlineData(spec) {  // every {url} data of the spec as inline values, from the script twins
    var nodes = urlNodes(spec, []);
    return Promise.all(nodes.map(function (n) { return loadData(n.data.url); })).then(function () {
      nodes.forEach(function (n) {
        var text = (window.rbData || {})[n.data.url], fmt = n.data.format || {};
        if (typeof text !== "string") throw new Error("no data loaded for " + n.data.url);
        if (!fmt.type || fmt.type === "json") {
          n.data = { values: JSON.parse(text), format: { parse: fmt.parse === undefined ? null : fmt.parse } };
        } else {
          n.data = { values: text, format: fmt };
        }
      });
      return spec;
    });
  }

  function showStatic(el, err) {  // the drawn chart.svg, when the data cannot be loaded at all
    console.error("report_builder: chart " + el.id + ": " + (err && err.message || err));
    if (!el.querySelector("img.rb-static")) {
      var fig = el.getAttribute("data-figure");
      el.innerHTML = '<img class="rb-static" alt="' + fig + '" src="figures/' + fig + '/chart.svg">' +
        '<p class="rb-caption">Static chart: the data of the interactive version could not be loaded.</p>';
    }
    el.classList.add("rb-chart--done", "rb-chart--static");
  }

  function embed(el) {
    var spec;
    try {
      spec = adapt(JSON.parse(el.getAttribute("data-spec")));
    } catch (err) {
      console.error("report_builder: bad chart spec in " + el.id, err);
      return Promise.resolve();
    }
    if (el._rbView) { el._rbView.finalize(); el._rbView = null; }
    if (urlNodes(spec, []).length) {
      return inlineData(spec).then(function (inlined) { return draw(el, inlined); },
                                   function (err) { showStatic(el, err); });
    }
    return draw(el, spec);
  }

  function draw(el, spec) {
    var opts = {
      renderer: "svg",
      // no "View Source": vega-embed writes the spec's JSON unescaped into a new window of the site's
      // origin (document.write), so a model name or data text holding markup would run there; the
      // spec is a download of its own (spec.json)
      actions: { export: true, source: false, compiled: false, editor: false },
      downloadFileName: el.getAttribute("data-figure") || "chart",
      tooltip: true
    };
    el.classList.remove("rb-chart--done", "rb-chart--error");
    return window.vegaEmbed(el, spec, opts).then(function (res) {
      el._rbView = res;
      el.classList.add("rb-chart--done");
    }).catch(function (err) {
      el.classList.add("rb-chart--error");
      el.insertAdjacentHTML("beforeend", '<p class="rb-chart__error">Chart failed to render: ' +
        String(err && err.message || err).replace(/</g, "&lt;") + "</p>");
      console.error("report_builder: chart " + el.id + " failed", err);
    });
  }

  function embedAll() {
    if (!window.vegaEmbed) { console.error("report_builder: vega-embed bundle missing"); return; }
    var els = Array.prototype.slice.call(document.querySelectorAll(".rb-chart[data-spec]"));
    window.rbChartsReady = Promise.all(els.map(embed)).then(function () {
      document.documentElement.setAttribute("data-rb-charts", "ready");
    });
  }

  function start() {
    embedAll();
    var state = isDark() + "/" + isNarrow();
    function maybeRedo() {
      var now = isDark() + "/" + isNarrow();
      if (now !== state) { state = now; embedAll(); }
    }
    if (window.MutationObserver && document.body) {
      new MutationObserver(maybeRedo).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
    }
    var timer = null;
    window.addEventListener("resize", function () { clearTimeout(timer); timer = setTimeout(maybeRedo, 200); });
  }

  window.rbAdapt = adapt;  // for tests (tests/site/test_charts_js.py runs it under node)

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
