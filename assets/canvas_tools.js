/* What every canvas view draws with (explorer/views/canvas_view.py puts this before each view's script; defined once
   per page as window.BertCanvas): a crisp canvas at the screen's pixel ratio, an offscreen picture of one pixel
   a value, a shortened label, and the export control ("SVG", "PNG 2x", "PNG 3x") that draws the view again into an
   SVG context (assets/svg_context.js, loaded first) or an offscreen canvas at 2x or 3x, and saves it under a name
   that names the model, the input and the view (docs/design/browser-views.md, "Export").
   A view's draw function takes a surface: surface(width, height) gives the 2d context to draw on, sized; the
   screen's is screen(canvas). */
(() => {
  if (window.BertCanvas) return;
  function sized(canvas, width, height) {    // a crisp canvas of width x height CSS pixels; its 2d context
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(width * dpr));
    canvas.height = Math.max(1, Math.round(height * dpr));
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return ctx;
  }
  function picture(rows, cols, colourAt) {   // colourAt(r, c) -> [R, G, B]: an offscreen canvas, one pixel each
    const off = document.createElement("canvas");
    off.width = cols; off.height = rows;
    const ctx = off.getContext("2d"), img = ctx.createImageData(cols, rows);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const [R, G, B] = colourAt(r, c), px = 4 * (r * cols + c);
        img.data[px] = R; img.data[px + 1] = G; img.data[px + 2] = B; img.data[px + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    return off;
  }
  const short = (t, n) => (t.length > n ? `${t.slice(0, n - 1)}…` : t);
  const screen = (canvas) => (width, height) => sized(canvas, width, height);   // the surface on the page

  // A file name's part: letters, digits, - and _ only (accents dropped), as explorer/views/export_names.py's safe()
  const safe = (text) => String(text ?? "").normalize("NFKD").replace(/\p{M}+/gu, "")
    .replace(/[^A-Za-z0-9_-]+/g, "-").replace(/-{2,}/g, "-").replace(/^[-_]+|[-_]+$/g, "");
  const NAME_CHARS = 160;
  function fileName(info, ...parts) {       // bert-explorer_<model>_<first words>_<view>_<detail>, bounded
    const stem = safe(info && info.stem) || "bert-explorer";
    return [stem, ...parts.map(safe)].filter(Boolean).join("_").slice(0, NAME_CHARS).replace(/[-_]+$/, "");
  }
  function title(info, view) {               // the SVG's <title>: the view, the model, the input
    const said = [`BERT Explorer: ${view}`];
    if (info && info.model) said.push(`model: ${info.model}`);
    if (info && info.input) said.push(`input: ${info.input}`);
    return said.join(" · ");
  }
  function backdrop(el) {                    // the colour behind the view (the first opaque ancestor's), or white
    for (let node = el; node instanceof Element; node = node.parentElement) {
      const colour = getComputedStyle(node).backgroundColor;
      if (colour && !/^rgba\(.*,\s*0\)$/.test(colour) && colour !== "transparent") return colour;
    }
    return "#ffffff";
  }

  function svgOf(draw, heading, background) {   // the view drawn into an SVG context: the file's text, or null
    let svg = null;
    const drawn = draw((width, height) => (svg = window.BertSvg.context(width, height)));
    return drawn === false || !svg ? null : svg.document({ title: heading, background });
  }
  function pngOf(draw, scale, background) {  // the view drawn on an offscreen canvas at `scale`: the canvas, or null
    let off = null;
    const drawn = draw((width, height) => {
      off = document.createElement("canvas");
      off.width = Math.max(1, Math.round(width * scale));
      off.height = Math.max(1, Math.round(height * scale));
      const ctx = off.getContext("2d");
      ctx.fillStyle = background; ctx.fillRect(0, 0, off.width, off.height);
      ctx.setTransform(scale, 0, 0, scale, 0, 0);
      return ctx;
    });
    return drawn === false ? null : off;
  }
  function save(blob, file) {                // a download of `blob` named `file`
    const url = URL.createObjectURL(blob);
    const link = Object.assign(document.createElement("a"), { download: file, href: url });
    document.body.append(link); link.click(); link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
  // The export control of one view: what = "the head view" (its labels); draw(surface) draws the view's current
  // state on surface(width, height) (false: nothing to draw); name() = {file, title}; root: the view's element.
  function exportControl({ what, draw, name, root }) {
    const box = Object.assign(document.createElement("span"), { className: "view-export" });
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", `Export ${what}`);
    for (const [text, scale] of [["SVG", 0], ["PNG 2x", 2], ["PNG 3x", 3]]) {
      if (!scale && !window.BertSvg) continue;   // a page without assets/svg_context.js: the PNGs only
      const button = Object.assign(document.createElement("button"), { type: "button", className: "view-export-button",
        textContent: text });
      const label = scale ? `Save ${what} as a PNG at ${scale}x, for print` : `Save ${what} as SVG (vector)`;
      button.setAttribute("aria-label", label);
      button.title = label;
      button.dataset.export = scale ? `png${scale}` : "svg";
      button.addEventListener("click", () => {
        const { file, title: heading } = name(), background = backdrop(root || box);
        if (!scale) {
          const text = svgOf(draw, heading, background);
          if (text !== null) save(new Blob([text], { type: "image/svg+xml" }), `${file}.svg`);
          return;
        }
        const off = pngOf(draw, scale, background);
        if (off) off.toBlob((blob) => blob && save(blob, `${file}.png`), "image/png");
      });
      box.append(button);
    }
    return box;
  }
  function keep(controls, control) {         // the export control at the end of a view's controls
    if (control.parentNode !== controls || control.nextSibling) controls.append(control);
  }
  window.BertCanvas = { sized, picture, short, screen, safe, fileName, title, exportControl, keep, svgOf, pngOf };
})();
