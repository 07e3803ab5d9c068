/* The Plotly charts' export control (explorer/views/plot_export.py runs this once per page, after
   assets/canvas_tools.js; docs/design/export.md, "SVG and hi-res PNG"): every Plotly chart on the page, also one
   drawn later (a MutationObserver, no polling), gets the canvas views' buttons "SVG", "PNG 2x", "PNG 3x" (the same
   class, view-export) under it. Each asks Plotly (window.Plotly, set by Gradio's plot bundle) for the chart at its
   drawn size: an SVG with a <title> naming the model, the input and the view, or a PNG at 2x or 3x, on white
   (the charts' text colour is a light-theme one). The name is bert-explorer_<model>_<first words>_<view>: the
   model and input from the figure's layout.meta.export (explorer/views/plot_names.py), the view from
   layout.meta.view, else the chart's label. Plotly's own modebar stays as it is. */
(() => {
  if (window.BertPlotExport || !window.BertCanvas) return;
  const tools = window.BertCanvas;
  const CHART = ".js-plotly-plot";

  function label(gd) {                       // the chart's block label, else its title, else "chart"
    const block = gd.closest(".block");
    const said = block && block.querySelector("[data-testid=block-label]");
    const title = gd.layout && gd.layout.title;
    const heading = typeof title === "string" ? title : title && title.text;
    return (said && said.textContent.trim()) || (heading && String(heading).replace(/<[^>]*>/g, " ").trim()) || "chart";
  }
  function names(gd) {                       // {file, title}: the figure's meta, else the app and the label
    const meta = gd.layout && gd.layout.meta && typeof gd.layout.meta === "object" ? gd.layout.meta : {};
    const info = meta.export && typeof meta.export === "object" ? meta.export : null;
    const view = typeof meta.view === "string" && meta.view.trim() ? meta.view.trim() : label(gd);
    return { file: tools.fileName(info, view), title: tools.title(info, view) };
  }
  function drawnSize(gd) {                   // the chart's size on the page, in CSS pixels
    const full = gd._fullLayout || {};
    return { width: Math.round(full.width || gd.clientWidth), height: Math.round(full.height || gd.clientHeight) };
  }
  const escaped = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  function titled(svg, heading) {            // the SVG's text with <title>heading</title> first in its root
    const open = /<svg\b[^>]*>/.exec(svg);
    if (!open) return svg;
    const at = open.index + open[0].length;
    return `${svg.slice(0, at)}<title>${escaped(heading)}</title>${svg.slice(at)}`;
  }
  function bytes(dataUrl) {                  // a base64 data: URL as a Blob (no fetch: nothing leaves the page)
    const [head, body] = dataUrl.split(",", 2);
    const raw = atob(body), out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return new Blob([out], { type: (/^data:([^;,]+)/.exec(head) || [])[1] || "image/png" });
  }
  function save(blob, file) {                // a download of `blob` named `file`
    const url = URL.createObjectURL(blob);
    const link = Object.assign(document.createElement("a"), { download: file, href: url });
    document.body.append(link); link.click(); link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
  function onWhite(gd) {                     // the chart as drawn, its paper white (the page's is transparent)
    try {
      return { data: structuredClone(gd.data), layout: { ...structuredClone(gd.layout), paper_bgcolor: "#ffffff" },
        config: { displayModeBar: false } };
    } catch (error) {
      return gd;                             // a value that cannot be copied: the chart as it is, transparent
    }
  }
  async function exportChart(gd, scale) {    // scale 0: SVG; 2 or 3: a PNG at that scale
    if (!window.Plotly || !gd._fullLayout) return;
    const { file, title } = names(gd), size = drawnSize(gd), figure = onWhite(gd);
    if (!scale) {
      const svg = await window.Plotly.toImage(figure, { ...size, format: "svg", scale: 1, imageDataOnly: true });
      save(new Blob([titled(svg, title)], { type: "image/svg+xml" }), `${file}.svg`);
    } else {
      const png = await window.Plotly.toImage(figure, { ...size, format: "png", scale });
      save(bytes(png), `${file}.png`);
    }
  }
  function control(gd) {                     // the three buttons of one chart
    const box = Object.assign(document.createElement("div"), { className: "view-export plot-export" });
    box.style.cssText = "display: flex; justify-content: flex-end; margin-top: 2px;";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Export the chart");
    for (const [text, scale] of [["SVG", 0], ["PNG 2x", 2], ["PNG 3x", 3]]) {
      const button = Object.assign(document.createElement("button"), { type: "button", className: "view-export-button",
        textContent: text });
      const said = scale ? `Save the chart as a PNG at ${scale}x, for print` : "Save the chart as SVG (vector)";
      button.setAttribute("aria-label", said);
      button.title = said;
      button.dataset.export = scale ? `png${scale}` : "svg";
      button.addEventListener("click", () => {
        exportChart(gd, scale).catch((error) => console.warn("BERT Explorer: the chart's export failed", error));
      });
      box.append(button);
    }
    box.__chart = gd;
    return box;
  }
  function scan() {                          // a control for each new chart; none left for a chart gone
    for (const box of document.querySelectorAll(".plot-export")) {
      if (!box.__chart || !box.__chart.isConnected || box.previousElementSibling !== box.__chart) box.remove();
    }
    for (const gd of document.querySelectorAll(CHART)) {
      const next = gd.nextElementSibling;
      if (!(next && next.__chart === gd)) gd.after(control(gd));
    }
  }
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; scan(); });
  }).observe(document.body, { childList: true, subtree: true });
  scan();
  window.BertPlotExport = { names, titled, scan };
})();
