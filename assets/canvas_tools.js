/* What every canvas view draws with (explorer/views/canvas_view.py puts this before each view's script; defined once
   per page as window.BertCanvas): a crisp canvas at the screen's pixel ratio, an offscreen picture of one pixel
   a value, a shortened label, and the PNG button that saves the canvas as drawn. */
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
  function pngButton(canvas, fileName, className, ariaLabel) {   // saves the canvas as <fileName()>.png
    const png = Object.assign(document.createElement("button"), { type: "button", className, textContent: "PNG" });
    if (ariaLabel) png.ariaLabel = ariaLabel;
    png.addEventListener("click", () => {
      Object.assign(document.createElement("a"), { download: `${fileName()}.png`,
        href: canvas.toDataURL("image/png") }).click();
    });
    return png;
  }
  window.BertCanvas = { sized, picture, short, pngButton };
})();
