/* The Embeddings tab's canvas views: hidden dimensions (tokens x dimensions) and position similarity
   (positions x positions). explorer/embeddings/canvas.py sends the data; docs/design/browser-views.md ("The
   Embeddings tab's maps"). Defined once per page; each gr.HTML view calls mount(kind, element, props, trigger,
   watch). A value holds maps by name ({offset, limit, data}: the browser reads offset + decode(data)); a value
   with the id of the one held adds its maps to it (a fetched component), another id replaces it unless it is
   older than the one held (its "asked": docs/design/browser-views.md, "Late answers"). The dimensions view
   follows the tab's component radio (#embeddings-component), the user's: a component it holds is drawn here with
   no request; else it fires "fetch" once and the server answers with that component alone.
   Export (docs/design/browser-views.md, "Export"): drawMap takes its surface, so the export control draws the map
   again into an SVG context or a 2x / 3x canvas, named after the model and the input (the dimensions value's
   "export"; the position-similarity map, sent beside it, takes the dimensions view's) and the view. */
(() => {
  if (window.BertEmbeddingsViews) return;
  const views = [];
  const { decode } = window.BertArrays;      // assets/browser_arrays.js, loaded first
  const { sized, picture, short, screen, fileName, title, exportControl, keep } = window.BertCanvas;   // canvas_tools.js

  function chosenComponent() {               // the radio's checked value, null when none is found
    const box = document.querySelector("#embeddings-component input[type=radio]:checked");
    return box ? box.value : null;
  }
  let component = null;
  function poll() {                          // a click, the arrow keys or a value the server sets: all end here
    const now = chosenComponent();
    if (now === component) return;
    component = now;
    views.filter((v) => v.kind === "dimensions").forEach((v) => v.changed());
  }
  document.addEventListener("change", (ev) => {
    if (ev.target instanceof Element && ev.target.closest("#embeddings-component")) poll();
  });
  setInterval(poll, 300);

  const level = (v, limit) => Math.max(0, Math.min(255, Math.round(((v + limit) / (2 * limit)) * 255)));
  function mapPicture(rgb, m, rows, cols) {  // values -> an offscreen picture, one pixel a value
    return picture(rows, cols, (r, c) => rgb[level(m.offset + m.values.get(r * cols + c), m.limit)]);
  }
  const digits = (precision) => Math.max(3, Math.min(5, Math.ceil(-Math.log10(Math.max(precision, 1e-9)))));

  function exportInfo(e) {                   // the model and the input: the value's, else the dimensions view's
    if (e.export) return e.export;
    const dims = views.find((o) => o.kind === "dimensions" && o.entry && o.entry.export);
    return dims ? dims.entry.export : null;
  }

  function drawMap(v, e, name, surface) {
    const m = e.maps[name], rows = e.rows.length, cols = e.columns;
    v.caption.textContent = `${e.titles[name] || name}: row = ${e.row_title}, column = ${e.column_title}`
      + (m ? `; colours clip at ±${m.limit.toPrecision(3)}` : " · loading this component…");
    if (!m) return false;
    keep(v.controls, v.exporter);
    v.name = () => ({ file: fileName(exportInfo(e), e.file, e.kind === "dimensions" ? name : ""),   // when saved
      title: title(exportInfo(e), e.titles[name] || name) });
    const style = getComputedStyle(v.root), text = style.color || "#111827", font = 11;
    const ctx0 = v.canvas.getContext("2d");
    ctx0.font = `${font}px sans-serif`;
    const names = e.rows.map((t) => short(t, 14));
    const room = 8 + Math.min(110, Math.max(...names.map((t) => ctx0.measureText(t).width)));
    const width = Math.max(200, v.root.clientWidth - 4);
    const cw = Math.max(e.kind === "similarity" ? 2 : 1, Math.min(24, (width - room - 8) / cols));   // else scroll
    const ch = e.kind === "similarity" ? cw : Math.max(1, Math.min(22, 560 / rows));
    const top = 20, mapW = cw * cols, mapH = ch * rows, bar = 34;
    const ctx = surface(Math.ceil(room + mapW + 8), Math.ceil(top + mapH + bar));
    const rgb = e.palette.map((c) => [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16)));
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(mapPicture(rgb, m, rows, cols), room, top, mapW, mapH);
    ctx.fillStyle = text; ctx.font = `${font}px sans-serif`;
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    const rowStep = Math.ceil(12 / ch);      // a label every rowStep rows, so they never overlap
    names.forEach((t, i) => { if (i % rowStep === 0) ctx.fillText(t, room - 4, top + (i + 0.5) * ch); });
    ctx.textAlign = "center"; ctx.textBaseline = "bottom";
    const colStep = [1, 2, 4, 8, 16, 32, 64, 128, 256].find((s) => s * cw >= 32) || 512;
    for (let j = 0; j < cols; j += colStep) ctx.fillText(String(j), room + (j + 0.5) * cw, top - 3);
    const barW = Math.max(60, Math.min(mapW, 260, width - room - 16)), y = top + mapH + 8;   // the colour scale, in view
    for (let k = 0; k < 256; k++) {
      ctx.fillStyle = e.palette[k];
      ctx.fillRect(room + (k / 256) * barW, y, barW / 256 + 0.5, 10);
    }
    ctx.fillStyle = text; ctx.textBaseline = "top";
    [[-m.limit, 0], [0, 0.5], [m.limit, 1]].forEach(([x, at]) => {
      ctx.textAlign = at === 0 ? "left" : at === 1 ? "right" : "center";
      ctx.fillText(x === 0 ? `0 ${e.value_name}` : x.toPrecision(3), room + at * barW, y + 12);
    });
    const places = digits(m.precision);
    v.geometry = { left: room, top, cw, ch, rows, cols };
    v.hover = (x, yy) => {
      const i = Math.floor((yy - top) / ch), j = Math.floor((x - room) / cw);
      if (i < 0 || j < 0 || i >= rows || j >= cols) return null;
      const value = m.offset + m.values.get(i * cols + j);
      const col = e.kind === "dimensions" ? `dim ${j}` : `position ${j}`;
      return { text: `${e.rows[i]} · ${col} · ${e.value_name} ${value.toFixed(places)} (±${m.precision.toPrecision(2)})`,
        data: { row: i, col: j, value } };
    };
    return name;
  }

  function mount(kind, element, props, trigger, watch) {
    const root = element.querySelector(".emb-view");
    const v = { kind, root, trigger, entry: null, pending: null, asked: null, draws: 0, answers: 0,
      caption: root.querySelector(".emb-caption"), controls: root.querySelector(".emb-controls"),
      canvas: root.querySelector("canvas"), tip: root.querySelector(".emb-tip") };
    const name = () => (kind === "dimensions" ? component || (v.entry && v.entry.component) : "cosine");
    v.exporter = exportControl({ what: kind === "dimensions" ? "the hidden dimensions map" : "the position similarity map",
      name: () => v.name(), root, draw: (surface) => Boolean(v.entry) && drawMap(v, v.entry, name(), surface) });
    v.draw = () => {
      const e = v.entry;
      v.width = root.clientWidth;
      if (e && !v.width) return;             // a hidden tab: drawn when it shows (the observer below)
      if (!e) {
        sized(v.canvas, 1, 1); v.caption.textContent = v.error || ""; v.controls.replaceChildren();
        v.hover = null; delete root.dataset.drawn; v.tip.classList.remove("shown");
        return;
      }
      const drawn = drawMap(v, e, name(), screen(v.canvas));
      v.draws += 1;
      root.dataset.draws = String(v.draws);
      v.canvas.setAttribute("aria-label", v.caption.textContent);
      if (drawn) root.dataset.drawn = drawn; else delete root.dataset.drawn;
    };
    v.changed = () => {                      // the component moved: draw it, or ask for it once
      v.draw();
      const e = v.entry, wanted = name();
      if (!e || e.maps[wanted] || v.asked === `${e.id}:${wanted}`) return;
      clearTimeout(v.pending);
      v.pending = setTimeout(() => {
        if (!v.entry || v.entry.maps[name()]) return;
        v.asked = `${v.entry.id}:${name()}`;
        trigger("fetch", { id: v.entry.id });
      }, 120);
    };
    const update = async () => {             // decode (inflate) first; a newer value arriving meanwhile wins
      const val = props.value && typeof props.value === "object" ? props.value : null, seq = (v.seq || 0) + 1;
      v.seq = seq;
      let maps = {};
      try {
        for (const [key, m] of Object.entries((val && val.maps) || {})) {
          const values = await decode(m.data);
          const precision = m.data.dtype === "uint8" ? m.data.scale / 510
            : values.raw.reduce((a, x) => Math.max(a, Math.abs(x)), 0) * 2 ** -11;
          maps[key] = { offset: m.offset, limit: m.limit, values, precision };
        }
      } catch (err) {                        // e.g. no DecompressionStream: say so in the view, draw nothing
        if (seq === v.seq) { v.entry = null; v.error = String(err.message || err); v.draw(); }
        return;
      }
      if (seq !== v.seq) return;
      const asked = val ? Number(val.asked) || 0 : 0;
      if (val && v.entry && v.entry.id !== val.id && asked < v.entry.askedAt) return;   // another input, older
      v.error = "";
      if (!val) v.entry = null;
      else if (v.entry && v.entry.id === val.id) {       // the same input: its maps added (data the page lacks)
        v.entry = { ...v.entry, ...val, maps: { ...v.entry.maps, ...maps }, askedAt: Math.max(v.entry.askedAt, asked) };
      } else { v.entry = { ...val, maps, askedAt: asked }; v.asked = null; }
      if (val) { v.answers += 1; root.dataset.answers = String(v.answers); }
      v.changed();
    };
    const point = (ev) => {
      const r = v.canvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    };
    v.canvas.addEventListener("mousemove", (ev) => {
      const found = v.hover && v.hover(...point(ev));
      if (!found) { v.tip.classList.remove("shown"); return; }
      v.tip.textContent = found.text;
      Object.entries(found.data).forEach(([k, x]) => { v.tip.dataset[k] = String(x); });
      const box = root.getBoundingClientRect();   // the tip is placed in the view's own box
      v.tip.style.left = `${Math.max(0, Math.min(ev.clientX - box.left + 12, root.clientWidth - 280))}px`;
      v.tip.style.top = `${ev.clientY - box.top + 14}px`;
      v.tip.classList.add("shown");
    });
    v.canvas.addEventListener("mouseleave", () => v.tip.classList.remove("shown"));
    let resizing = null;                     // a new width (a window resize, a tab shown): draw again
    new ResizeObserver(() => {
      if (root.clientWidth === v.width) return;
      clearTimeout(resizing);
      resizing = setTimeout(v.draw, 100);
    }).observe(root);
    views.push(v);
    watch("value", update);
    update();
    poll();
  }

  window.BertEmbeddingsViews = { mount, views, level };
})();
