/* report_builder: embed every <div class="rb-chart" data-spec="..."> with the vendored vega-embed.
 * The spec is inline (HTML-escaped JSON); large data sits in content-hashed JSON files next to the
 * figure's other assets and is loaded by relative URL. In the dark scheme charts sit on a light card (CSS), so
 * every chart keeps the one light theme its static SVG/PNG also use. */
(function () {
  "use strict";

  function embed(el) {
    var spec;
    try {
      spec = JSON.parse(el.getAttribute("data-spec"));
    } catch (err) {
      console.error("report_builder: bad chart spec in " + el.id, err);
      return Promise.resolve();
    }
    if (el._rbView) { el._rbView.finalize(); el._rbView = null; }
    if (location.protocol === "file:" && el.getAttribute("data-spec").indexOf('"url":') >= 0) {
      // Browsers refuse to fetch data files from file:// pages: show the static SVG instead.
      if (!el.querySelector("img.rb-static")) {
        var fig = el.getAttribute("data-figure");
        el.innerHTML = '<img class="rb-static" alt="' + fig + '" src="figures/' + fig + '/chart.svg">' +
          '<p class="rb-caption">Static chart: this figure loads its data from a file, which browsers do ' +
          "not allow for pages opened from disk. Serve the site over HTTP (<code>report-builder serve</code>) " +
          "for the interactive version.</p>";
      }
      el.classList.add("rb-chart--done", "rb-chart--static");
      return Promise.resolve();
    }
    var opts = {
      renderer: "svg",
      actions: { export: true, source: true, compiled: false, editor: false },
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

  function start() { embedAll(); }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
