/* report_builder: embed every <div class="rb-chart" data-spec="..."> with the vendored vega-embed.
 * The spec is inline (HTML-escaped JSON); large data sits in content-hashed JSON files next to the
 * figure's other assets and is loaded by relative URL. Charts re-render when the colour scheme flips. */
(function () {
  "use strict";

  function darkMode() {
    var body = document.body;
    return body && body.getAttribute("data-md-color-scheme") === "slate";
  }

  function darkConfig() {
    var fg = "#e6e6ef", grid = "#3a3d4f";
    return {
      axis: { labelColor: fg, titleColor: fg, gridColor: grid, domainColor: "#9a9ab0", tickColor: "#9a9ab0" },
      legend: { labelColor: fg, titleColor: fg },
      header: { labelColor: fg, titleColor: fg },
      title: { color: fg, subtitleColor: fg },
      text: { color: fg },
      view: { stroke: null }
    };
  }

  function embed(el) {
    var spec;
    try {
      spec = JSON.parse(el.getAttribute("data-spec"));
    } catch (err) {
      console.error("report_builder: bad chart spec in " + el.id, err);
      return Promise.resolve();
    }
    if (el._rbView) { el._rbView.finalize(); el._rbView = null; }
    var opts = {
      renderer: "svg",
      actions: { export: true, source: true, compiled: false, editor: false },
      downloadFileName: el.getAttribute("data-figure") || "chart",
      tooltip: true
    };
    if (darkMode()) { opts.config = darkConfig(); }
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

  function watchScheme() {
    var last = darkMode();
    new MutationObserver(function () {
      var now = darkMode();
      if (now !== last) { last = now; embedAll(); }
    }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }

  function start() { embedAll(); watchScheme(); }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
