/* A run's live curves, on the Training and Fine-tune tabs (explorer/runs/curves.py; docs/design/browser-views.md): small canvas
   charts the page draws itself. The server sends a run's points once ("reset": the charts' titles and series too),
   then only the points of new records, which are appended here; a tick with nothing new sends nothing. Defined once
   per page as window.BertCurves; the gr.HTML calls mount(element, props, trigger, watch).
   A training series is [steps, values, means]: each step's value (one batch) drawn thin, its running mean drawn
   bold (the status line shows the same mean). An evaluation series is [steps, values], drawn with dots.
   The view tells the server when it is hidden (another tab, or the browser tab in the background) and shown again
   (trigger("hidden") / trigger("shown")), so the server can tick slower while nobody looks. */
(() => {
  if (window.BertCurves) return;
  const KEEP = 20000;                        // points kept per series; past it every other one is dropped
  const HEIGHT = 220, PAD = { l: 56, r: 12, t: 10, b: 30 };

  function nice(lo, hi, count) {             // about `count` round tick values covering [lo, hi]
    const span = hi - lo || Math.abs(hi) || 1, raw = span / count, mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => span / s <= count) || 10 * mag;
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
    return ticks;
  }
  function label(v, percent) {               // tick text: 50%, 0.0004 (never e-notation), 3.2
    if (percent) return `${Math.round(v * 100)}%`;
    if (v === 0) return "0";
    const digits = Math.max(0, Math.min(10, 2 - Math.floor(Math.log10(Math.abs(v)))));
    const text = v.toFixed(digits);
    return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
  }
  function thin(s) {                         // halve a series in place when it outgrows KEEP
    if (s.x.length <= KEEP) return;
    for (const k of ["x", "y", "m"]) if (s[k]) s[k] = s[k].filter((_, i) => i % 2 === 0);
  }
  function nearest(xs, step) {               // index of the point closest to `step` (xs ascending)
    let lo = 0, hi = xs.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[mid] < step) lo = mid + 1; else hi = mid; }
    return lo > 0 && Math.abs(xs[lo - 1] - step) <= Math.abs(xs[lo] - step) ? lo - 1 : lo;
  }

  function drawChart(v, c, surface) {        // surface: the page's canvas, or an export's (canvas_tools.js)
    const width = Math.max(240, c.box.clientWidth || 320);
    const ctx = (surface || window.BertCanvas.screen(c.canvas))(width, HEIGHT);
    const style = getComputedStyle(v.root), ink = style.getPropertyValue("--body-text-color").trim() || "#333";
    const grid = style.getPropertyValue("--border-color-primary").trim() || "#ddd";
    const shown = c.spec.series.map((s) => [s, v.data[s.id]]).filter(([, d]) => d && d.x.length);
    ctx.font = "11px sans-serif";
    if (!shown.length) {
      ctx.fillStyle = ink; ctx.textAlign = "center";
      ctx.fillText(c.spec.empty || "No steps logged yet", width / 2, HEIGHT / 2);
      c.frame = null;
      return;
    }
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const [, d] of shown) {
      x0 = Math.min(x0, d.x[0]); x1 = Math.max(x1, d.x[d.x.length - 1]);
      for (const y of d.y) { if (y < y0) y0 = y; if (y > y1) y1 = y; }
    }
    if (c.spec.y_range) [y0, y1] = c.spec.y_range;
    else { const pad = (y1 - y0) * 0.05 || Math.abs(y1) * 0.05 || 1; y0 -= pad; y1 += pad; }
    if (x1 === x0) x1 = x0 + 1;
    const W = width - PAD.l - PAD.r, H = HEIGHT - PAD.t - PAD.b;
    const px = (x) => PAD.l + ((x - x0) / (x1 - x0)) * W, py = (y) => PAD.t + (1 - (y - y0) / (y1 - y0)) * H;
    ctx.strokeStyle = grid; ctx.fillStyle = ink; ctx.lineWidth = 1;
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const t of nice(y0, y1, 4)) {
      ctx.beginPath(); ctx.moveTo(PAD.l, py(t)); ctx.lineTo(PAD.l + W, py(t)); ctx.stroke();
      ctx.fillText(label(t, c.spec.percent), PAD.l - 6, py(t));
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const t of nice(x0, x1, Math.max(2, Math.floor(W / 80)))) {
      if (Number.isInteger(t)) ctx.fillText(String(t), px(t), PAD.t + H + 6);
    }
    ctx.save();
    ctx.beginPath(); ctx.rect(PAD.l, PAD.t, W, H); ctx.clip();
    const line = (xs, ys, color, widthPx, alpha, dash) => {
      ctx.beginPath(); ctx.globalAlpha = alpha; ctx.strokeStyle = color; ctx.lineWidth = widthPx;
      ctx.setLineDash(dash === "dot" ? [2, 3] : []);
      xs.forEach((x, i) => (i ? ctx.lineTo(px(x), py(ys[i])) : ctx.moveTo(px(x), py(ys[i]))));
      ctx.stroke();
    };
    for (const [s, d] of shown) {
      if (d.m) { line(d.x, d.y, s.color, 1, 0.3, s.dash); line(d.x, d.m, s.color, 2.2, 1, s.dash); }
      else line(d.x, d.y, s.color, 2, 1, s.dash);
      if (s.kind === "eval" || d.x.length === 1) {
        ctx.globalAlpha = 1; ctx.fillStyle = s.color;
        d.x.forEach((x, i) => { ctx.beginPath(); ctx.arc(px(x), py(d.y[i]), 3, 0, 2 * Math.PI); ctx.fill(); });
      }
    }
    ctx.restore();
    ctx.globalAlpha = 1; ctx.setLineDash([]);
    c.frame = { px, x0, x1, W, shown };
  }

  function legend(v, c) {                    // the chart's title and the names of its series that have points
    const drawn = c.spec.series.filter((s) => v.data[s.id] && v.data[s.id].x.length);
    const key = drawn.map((s) => s.id).join("|");
    if (c.legendKey === key) return;
    c.legendKey = key;
    c.caption.replaceChildren(Object.assign(document.createElement("strong"), { textContent: c.spec.title }));
    for (const s of drawn) {
      const item = Object.assign(document.createElement("span"), { className: "curves-key", textContent: s.name });
      item.style.setProperty("--key-color", s.color);
      c.caption.append(item);
    }
  }

  function mount(element, props, trigger, watch) {
    const root = element.querySelector(".curves-view");
    const v = { root, grid: root.querySelector(".curves-grid"), tip: root.querySelector(".curves-tip"),
      run: null, charts: [], data: {}, draws: 0, frame: 0, hidden: null };
    const drawAll = () => {
      v.frame = 0;
      for (const c of v.charts) { legend(v, c); drawChart(v, c); }
      v.draws += 1;
      root.dataset.draws = String(v.draws);
    };
    const later = () => { if (!v.frame) v.frame = requestAnimationFrame(drawAll); };
    const build = (specs) => {
      v.charts = specs.map((spec) => {
        const box = Object.assign(document.createElement("figure"), { className: "curves-chart" });
        const caption = document.createElement("figcaption"), canvas = document.createElement("canvas");
        canvas.setAttribute("role", "img");
        canvas.setAttribute("aria-label", `${spec.title} by step`);
        box.append(caption, canvas);
        const c = { spec, box, caption, canvas, frame: null, legendKey: null };
        const { exportControl, fileName, title } = window.BertCanvas;   // SVG, PNG 2x, PNG 3x of this chart
        box.append(exportControl({ what: `the ${spec.title} chart`, root, draw: (surface) => drawChart(v, c, surface),
          name: () => ({ file: fileName(v.export, "training-curves", spec.title, v.run !== null ? `run${v.run}` : ""),
            title: title(v.export, `training curves, ${spec.title} by step` + (v.run !== null ? ` (run ${v.run})` : "")) }),
        }));
        legend(v, c);
        canvas.addEventListener("mousemove", (ev) => hover(c, ev));
        canvas.addEventListener("mouseleave", () => v.tip.classList.remove("shown"));
        return c;
      });
      v.grid.replaceChildren(...v.charts.map((c) => c.box));
    };
    const hover = (c, ev) => {
      if (!c.frame) return;
      const r = c.canvas.getBoundingClientRect(), x = ev.clientX - r.left;
      const { x0, x1, W, shown } = c.frame, step = x0 + ((x - PAD.l) / W) * (x1 - x0);
      const lines = [];
      let at = null;
      for (const [s, d] of shown) {
        const i = nearest(d.x, step);
        at = at === null ? d.x[i] : at;
        const shownValue = (y) => (c.spec.percent ? `${(y * 100).toFixed(1)}%` : y.toPrecision(3));
        lines.push(`${s.name} ${shownValue(d.y[i])}` + (d.m ? ` (mean of ${v.window}: ${shownValue(d.m[i])})` : ""));
      }
      v.tip.textContent = `step ${at}\n${lines.join("\n")}`;
      v.tip.style.left = `${Math.min(c.box.offsetLeft + x + 12, root.clientWidth - 260)}px`;
      v.tip.style.top = `${c.box.offsetTop + ev.clientY - r.top + 14}px`;
      v.tip.classList.add("shown");
    };
    const update = () => {
      const val = props.value && typeof props.value === "object" ? props.value : null;
      if (!val || val.kind !== "curves") return;
      if (val.reset || val.run !== v.run) {
        if (!val.charts) return;               // the first value of a run always brings its charts
        v.run = val.run; v.data = {}; build(val.charts);
      }
      v.window = val.window;
      if (val.export) v.export = val.export;   // the run's model, when the value names it (file names, titles)
      for (const [id, cols] of Object.entries(val.points || {})) {
        const s = v.data[id] || (v.data[id] = { x: [], y: [], m: cols.length > 2 ? [] : null });
        s.x.push(...cols[0]); s.y.push(...cols[1]);
        if (s.m) s.m.push(...cols[2]);
        thin(s);
        if (s.m && s.m.length) root.setAttribute(`data-mean-${id.replace(":", "-")}`, String(s.m[s.m.length - 1]));
      }
      root.dataset.run = String(v.run);
      root.dataset.points = String(Object.values(v.data).reduce((n, s) => n + s.x.length, 0));
      later();
    };
    const visibility = () => {                 // hidden: the browser tab in the background, or another app tab
      const hidden = document.hidden || root.offsetParent === null;
      if (hidden === v.hidden) return;
      const wasHidden = v.hidden;
      v.hidden = hidden;
      root.dataset.hidden = String(hidden);
      if (wasHidden !== null || hidden) trigger(hidden ? "hidden" : "shown");
      if (!hidden) later();                    // drawn at width 0 while hidden: draw again
    };
    document.addEventListener("visibilitychange", visibility);
    setInterval(visibility, 1500);
    if (typeof ResizeObserver === "function") new ResizeObserver(later).observe(root);
    watch("value", update);
    update();
    visibility();
  }

  window.BertCurves = { mount };
})();
