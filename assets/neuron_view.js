/* The Attention tab's neuron view (explorer/attention/neuron_canvas.py sends the data; docs/design/browser-views.md,
   "The neuron view"). Defined once per page as window.BertNeuronView; the gr.HTML calls mount(element, props,
   trigger, watch). The value holds every token's query and key vectors (float16) of one head, or of every head
   of a short input: for the query token the user picks (a click on a token, the arrow keys, or the tab's query
   dropdown) this script computes q ⊙ k_j, the scores Σ(q ⊙ k_j)/√d and their softmax, and draws them, with no
   request, nor does Enter in the dropdown. The layer and head follow the tab's sliders (#attention-layer,
   #attention-head); when the page lacks that head, assets/attention_view.js asks wants() and fires the heatmap's
   "neuron" event ("both" when the heatmap lacks that layer too: one request).
   Late answers (docs/design/browser-views.md, "Late answers"): the query token and the key window are the
   user's. An answer only brings vectors; its query is taken only as the answer to the user's latest "Show the
   neuron view" (#neuron-show) asked after their last pick here, once; an answer for another input older than the
   one shown (its "asked") is dropped.
   Export (docs/design/browser-views.md, "Export"): drawView takes its surface, so the export control draws the
   current row again into an SVG context or a 2x / 3x canvas, named after the value's "export" and the view. */
(() => {
  if (window.BertNeuronView) return;
  const { decode } = window.BertArrays;      // assets/browser_arrays.js, loaded first
  const { sized, picture, short, screen, fileName, title, keep } = window.BertCanvas;   // canvas_tools.js, loaded first
  const NEG = [37, 99, 235], MID = [241, 245, 249], POS = [220, 38, 38], WEIGHT = "#2171b5";
  const store = { id: null, meta: null, heads: {}, asked: 0 };   // heads["layer:head"] = {q, k}: Float32Array (S * hd)
  const views = [];
  let seen = "", dropdownAt = null;          // the dropdown's last position, as polled
  let clock = 0, askedAt = 0, touchedAt = 0; // page order: the last "Show" click, the last touch of the dropdown
  const tick = () => ++clock;
  document.addEventListener("click", (ev) => {
    if (ev.target instanceof Element && ev.target.closest("#neuron-show")) askedAt = tick();
  }, true);
  ["pointerdown", "keydown"].forEach((name) => document.addEventListener(name, (ev) => {
    if (ev.target instanceof Element && ev.target.closest("#neuron-query")) touchedAt = tick();
  }, true));
  // Enter in the dropdown picks a token, drawn here: while the page holds vectors it is no "Show the neuron view"
  // click. assets/page.js leaves Enter to a field whose block has the class has-submit; this window listener runs
  // before page.js's on the document, and marks the block so.
  window.addEventListener("keydown", (ev) => {
    const field = ev.key === "Enter" && ev.target instanceof Element && ev.target.closest("#neuron-query");
    const block = field && (ev.target.closest(".block") || field);
    if (block) block.classList.toggle("has-submit", Boolean(store.meta));
  }, true);

  function number(selector) {
    const box = document.querySelector(selector);
    const v = box ? Number(box.value) : NaN;
    return box && box.value !== "" && Number.isFinite(v) ? v : null;
  }
  function chosen() {                        // the engine's (layer, head): the sliders', else the value's
    const m = store.meta;
    const l = number("#attention-layer input[type=number]"), h = number("#attention-head input[type=number]");
    const layer = l !== null ? l - 1 : m.layer, head = h !== null ? h : m.head;
    const ok = layer >= 0 && layer < m.num_layers && head >= 0 && head < m.num_heads;
    return ok ? { layer, head } : { layer: m.layer, head: m.head };
  }
  function wants() {                         // {id} when a view is shown and lacks the chosen head's vectors
    if (!store.meta) return null;
    const { layer, head } = chosen();
    return store.heads[`${layer}:${head}`] ? null : { id: store.id };
  }
  function dropdownQuery() {                 // the tab's query dropdown ("3: sat" or "3"), or null
    const box = document.querySelector("#neuron-query input");
    const found = box && /^\s*(\d+)/.exec(box.value || "");
    return found ? Number(found[1]) : null;
  }
  function poll() {                          // sliders and the dropdown, however they moved: redraw here
    const l = number("#attention-layer input[type=number]"), h = number("#attention-head input[type=number]");
    const q = dropdownQuery(), now = `${l}|${h}|${q}`;
    if (now === seen) return;
    const queryMoved = q !== dropdownAt;     // its position, not its text ("3" and "3: sat" are one pick)
    seen = now; dropdownAt = q;
    views.forEach((v) => {                   // a move the server made (new choices) is no pick of the user's
      const picked = queryMoved && q !== null && touchedAt > v.pickedAt;
      if (picked && store.meta && q < store.meta.tokens.length) v.pick(q);
      else v.draw();
    });
  }
  document.addEventListener("input", (ev) => {
    if (ev.target instanceof Element && ev.target.closest("#attention-layer, #attention-head")) poll();
  });
  setInterval(poll, 300);
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => views.forEach((v) => v.draw()), 150);
  });

  function colour(x) {                       // x in [-1, 1] -> blue, pale, red (centred on 0)
    const t = Math.max(-1, Math.min(1, x)), end = t < 0 ? NEG : POS, a = Math.abs(t);
    return MID.map((c, i) => Math.round(c + (end[i] - c) * a));
  }
  function image(values, offset, rows, cols, range) {   // signed values -> an offscreen picture, one pixel each
    return picture(rows, cols, (r, c) => colour(values[offset + r * cols + c] / range));
  }
  const fmt = (x) => (Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(3) : x.toFixed(4));

  function rowOf(m, hv, i) {                 // query i: products (S x hd), scores and softmax weights (S)
    const S = m.tokens.length, hd = m.head_size, q = hv.q.subarray(i * hd, (i + 1) * hd);
    const products = new Float64Array(S * hd), scores = new Float64Array(S);
    let vecMax = 0, prodMax = 0;
    for (let d = 0; d < hd; d++) vecMax = Math.max(vecMax, Math.abs(q[d]));
    for (let j = 0; j < S; j++) {
      let s = 0;
      for (let d = 0; d < hd; d++) {
        const k = hv.k[j * hd + d], p = q[d] * k;
        products[j * hd + d] = p; s += p;
        vecMax = Math.max(vecMax, Math.abs(k)); prodMax = Math.max(prodMax, Math.abs(p));
      }
      scores[j] = s * m.scale;
    }
    const top = Math.max(...scores), weights = scores.map((s) => Math.exp(s - top));
    const total = weights.reduce((a, b) => a + b, 0);
    weights.forEach((w, j) => { weights[j] = w / total; });
    return { q, products, scores, weights, vecMax: vecMax || 1, prodMax: prodMax || 1,
      scoreMax: Math.max(...scores.map(Math.abs)) || 1 };
  }

  function controls(v, m, S, win) {          // built once per input: the window slider, its note, the export
    if (v.controlsFor === store.id) return;
    v.controlsFor = store.id;
    v.controls.replaceChildren();
    if (S > win) {
      const range = Object.assign(document.createElement("input"), { type: "range", min: 0, max: S - win,
        value: v.start, className: "neuron-window", ariaLabel: "first key token shown" });
      range.addEventListener("input", () => { v.start = Number(range.value); v.pickedAt = tick(); v.draw(); });
      v.controls.append(range, Object.assign(document.createElement("span"), { className: "neuron-window-note" }));
    }
    keep(v.controls, v.exporter);
  }

  function drawView(v, surface) {            // surface: the page's canvas, or an export's (which only draws)
    const m = store.meta, { layer, head } = chosen(), hv = store.heads[`${layer}:${head}`];
    const S = m.tokens.length, hd = m.head_size, win = Math.min(m.window, S);
    if (!hv && surface) return false;
    if (!hv) {
      v.caption.textContent = `Layer ${layer + 1}, head ${head}: loading this head…`;
      sized(v.canvas, 1, 1); v.hover = null;
      return false;
    }
    const i = Math.min(v.query, S - 1), r = rowOf(m, hv, i);
    v.start = Math.max(0, Math.min(v.start, S - win));
    controls(v, m, S, win);
    const range = v.controls.querySelector(".neuron-window");
    if (range) range.value = String(v.start);
    const note = v.controls.querySelector(".neuron-window-note");
    if (note) note.textContent = `key tokens ${v.start}–${v.start + win - 1} of ${S}`;
    const order = [...r.weights.keys()].sort((a, b) => r.weights[b] - r.weights[a]).slice(0, 3);
    v.caption.textContent = `Layer ${layer + 1}, head ${head}, query ${i} ${m.tokens[i]} · head size ${hd}, so each `
      + `score is Σ(q ⊙ k) × ${m.scale.toFixed(3)} (= 1/√${hd}) · It looks most at: `
      + order.map((j) => `${m.tokens[j]} (${j}): weight ${r.weights[j].toFixed(3)}`).join(" · ")
      + (m.truncated ? " · the input was truncated to the max length" : "");
    v.name = { file: fileName(m.export, "neuron-view", `L${layer + 1}H${head}Q${i}`),
      title: title(m.export, `neuron view, layer ${layer + 1}, head ${head}, query ${i} ${m.tokens[i]}`
        + (S > win ? `, key tokens ${v.start}–${v.start + win - 1} of ${S}` : "")) };
    const width = Math.max(240, v.root.clientWidth - 4), narrow = width < 480;   // a phone: narrower columns
    const rowH = 16, qTop = 18, top = qTop + rowH + 8, gap = narrow ? 4 : 8;
    const scoreW = narrow ? 58 : 84, weightW = narrow ? 48 : 72, textW = narrow ? 30 : 38;   // score: number, bar
    const ctx0 = v.canvas.getContext("2d");
    ctx0.font = "11px sans-serif";
    const names = m.tokens.map((t, j) => `${j}: ${short(t, narrow ? 8 : 12)}`);
    const labelW = Math.min(narrow ? 84 : 120, 16 + Math.max(ctx0.measureText(`q ${names[i]}`).width,
      ...names.slice(v.start, v.start + win).map((t) => ctx0.measureText(t).width)));
    const cell = Math.max(1, Math.min(10, (width - labelW - scoreW - weightW - 4 * gap) / (2 * hd)));
    const blockW = cell * hd, xK = labelW + gap, xP = xK + blockW + gap, xS = xP + blockW + gap;
    const xW = xS + scoreW + gap, total = xW + weightW, height = top + win * rowH + 4;
    const ctx = (surface || screen(v.canvas))(total, height), text = getComputedStyle(v.root).color || "#111827";
    ctx.imageSmoothingEnabled = false;
    ctx.font = "11px sans-serif"; ctx.textBaseline = "middle"; ctx.fillStyle = text;
    const titles = [[narrow ? "k_j" : "k_j (dimensions →)", xK], ["q ⊙ k_j", xP], ["q·k/√d", xS], ["softmax", xW]];
    ctx.textAlign = "left";
    titles.forEach(([t, x]) => ctx.fillText(t, x, 8));
    ctx.textAlign = "right"; ctx.fillText(`q ${names[i]}`, labelW - 4, qTop + rowH / 2);
    ctx.drawImage(image(hv.q, i * hd, 1, hd, r.vecMax), xK, qTop, blockW, rowH - 2);
    ctx.drawImage(image(hv.k, v.start * hd, win, hd, r.vecMax), xK, top, blockW, win * rowH);
    ctx.drawImage(image(r.products, v.start * hd, win, hd, r.prodMax), xP, top, blockW, win * rowH);
    for (let k = 0; k < win; k++) {
      const j = v.start + k, y = top + k * rowH;
      if (j === i) {                         // the query's own row, marked
        ctx.save(); ctx.globalAlpha = 0.12; ctx.fillStyle = text; ctx.fillRect(0, y, labelW, rowH); ctx.restore();
      }
      ctx.fillStyle = text; ctx.textAlign = "right";
      ctx.font = j === i ? "bold 11px sans-serif" : "11px sans-serif";
      ctx.fillText(names[j], labelW - 4, y + rowH / 2);
      const s = r.scores[j], half = (scoreW - textW) / 2, zero = xS + textW + half;
      const len = (Math.abs(s) / r.scoreMax) * (half - 1);
      ctx.fillStyle = `rgb(${(s < 0 ? NEG : POS).join(",")})`; ctx.globalAlpha = 0.7;
      ctx.fillRect(s < 0 ? zero - len : zero, y + 2, len, rowH - 4);
      ctx.globalAlpha = 0.55; ctx.fillStyle = WEIGHT; ctx.fillRect(xW, y + 2, r.weights[j] * weightW, rowH - 4);
      ctx.globalAlpha = 1; ctx.fillStyle = text; ctx.font = "10px sans-serif"; ctx.textAlign = "right";
      ctx.fillText(s.toFixed(2), xS + textW - 3, y + rowH / 2);
      ctx.textAlign = "left"; ctx.fillText(r.weights[j].toFixed(3), xW + 2, y + rowH / 2);
    }
    const hoverAt = (x, y) => {
      const d = Math.floor(((x < xP ? x - xK : x - xP)) / cell), k = Math.floor((y - top) / rowH), j = v.start + k;
      if (y >= qTop && y < qTop + rowH && x >= xK && x < xK + blockW) {
        return { text: `query ${i}: ${m.tokens[i]} · dimension ${d} · q = ${fmt(r.q[d])}`,
          data: { part: "q", query: i, dim: d, value: r.q[d] } };
      }
      if (y < top || k < 0 || k >= win) return null;
      const key = `key ${j}: ${m.tokens[j]}`;
      if (x < labelW) return { text: `${key} · click to make it the query`, data: { part: "token", key: j } };
      if (x >= xK && x < xK + blockW) {
        const kv = hv.k[j * hd + d];
        return { text: `${key} · dimension ${d} · k = ${fmt(kv)}`, data: { part: "k", key: j, dim: d, value: kv } };
      }
      if (x >= xP && x < xP + blockW) {
        const p = r.products[j * hd + d];
        return { text: `${key} · dimension ${d} · q × k = ${fmt(r.q[d])} × ${fmt(hv.k[j * hd + d])} = ${fmt(p)}`,
          data: { part: "product", query: i, key: j, dim: d, value: p } };
      }
      if (x >= xS && x < xS + scoreW) {
        const line = `query ${i} → ${key} · q·k/√d = Σ(q ⊙ k) × ${m.scale.toFixed(4)} = ${fmt(r.scores[j])}`;
        return { text: line, data: { part: "score", query: i, key: j, value: r.scores[j] } };
      }
      if (x >= xW && x < xW + weightW) {
        return { text: `query ${i} → ${key} · softmax weight ${fmt(r.weights[j])}`,
          data: { part: "weight", query: i, key: j, value: r.weights[j] } };
      }
      return null;
    };
    v.hover = hoverAt;
    v.geometry = { labelW, xK, xP, xS, xW, scoreW, weightW, qTop, top, rowH, cell, start: v.start, win };
    v.click = (x, y) => {
      const k = Math.floor((y - top) / rowH);
      if (x < labelW && y >= top && k >= 0 && k < win) v.pick(v.start + k);
    };
    v.root.dataset.query = String(i);
    return `L${layer + 1}-H${head}-Q${i}-${v.start}`;
  }

  function mount(element, props, trigger, watch) {
    const root = element.querySelector(".neuron-view");
    const v = { root, trigger, query: 0, start: 0, draws: 0, answers: 0, pickedAt: 0, usedAsk: 0,
      caption: root.querySelector(".neuron-caption"),
      controls: root.querySelector(".neuron-controls"), canvas: root.querySelector("canvas"),
      tip: root.querySelector(".neuron-tip") };
    v.exporter = window.BertCanvas.exportControl({ what: "the neuron view", name: () => v.name, root,
      draw: (surface) => Boolean(store.meta) && drawView(v, surface) });
    v.draw = () => {
      if (!store.meta) {
        sized(v.canvas, 1, 1); v.caption.textContent = ""; v.controls.replaceChildren(); v.controlsFor = null;
        v.hover = null; delete root.dataset.drawn; v.tip.classList.remove("shown");
        return;
      }
      const drawn = drawView(v);
      v.draws += 1;
      root.dataset.draws = String(v.draws);
      v.canvas.setAttribute("aria-label", v.caption.textContent);
      if (drawn) root.dataset.drawn = drawn; else delete root.dataset.drawn;
    };
    v.show = (j) => {                        // make token j the query, keeping it inside the window
      if (!store.meta) return;
      const S = store.meta.tokens.length, win = Math.min(store.meta.window, S);
      v.query = Math.max(0, Math.min(S - 1, j));
      if (v.query < v.start || v.query >= v.start + win) v.start = Math.max(0, v.query - Math.floor(win / 2));
      v.draw();
    };
    v.pick = (j) => { v.pickedAt = tick(); v.show(j); };   // the user's pick (click, arrow keys, dropdown)
    const update = async () => {             // decode first; a newer value arriving meanwhile wins
      const val = props.value && typeof props.value === "object" ? props.value : null, seq = (v.seq || 0) + 1;
      v.seq = seq;
      let decoded = null;
      try {
        decoded = val ? await Promise.all([decode(val.queries), decode(val.keys)]) : null;
      } catch (err) {                        // e.g. no DecompressionStream: say so in the view, draw nothing
        if (seq === v.seq) { store.meta = null; v.draw(); v.caption.textContent = String(err.message || err); }
        return;
      }
      if (seq !== v.seq) return;
      if (!val) { store.meta = null; store.heads = {}; store.id = null; store.asked = 0; v.draw(); return; }
      const same = val.id === store.id, asked = Number(val.asked) || 0;   // same: another head, or again
      if (!same && store.meta && asked < store.asked) return;   // another input, older than the one shown
      if (!same) { store.heads = {}; store.id = val.id; store.asked = asked; }
      store.asked = Math.max(store.asked, asked);
      store.meta = val;
      const [qs, ks] = decoded, [n, S, hd] = val.queries.shape, size = S * hd;
      for (let h = 0; h < n; h++) {
        const [l, hh] = val.heads[h];
        store.heads[`${l}:${hh}`] = { q: qs.raw.subarray(h * size, (h + 1) * size),
          k: ks.raw.subarray(h * size, (h + 1) * size) };
      }
      v.answers += 1;
      root.dataset.answers = String(v.answers);
      if (window.BertAttentionViews) window.BertAttentionViews.neuronAnswered(val.id);   // a "both" answered
      // its query only answers the user's latest "Show", asked after their last pick here, and only once
      const answersAsk = askedAt > v.pickedAt && askedAt > v.usedAsk;
      if (val.query !== null && val.query !== undefined && answersAsk) { v.usedAsk = askedAt; v.show(val.query); }
      else { if (v.query >= S) v.query = 0; v.draw(); }   // the user's query and window, kept
    };
    const point = (ev) => {
      const r = v.canvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    };
    v.canvas.addEventListener("mousemove", (ev) => {
      const found = v.hover && v.hover(...point(ev));
      if (!found) { v.tip.classList.remove("shown"); return; }
      v.tip.textContent = found.text;
      Object.keys(v.tip.dataset).forEach((k) => delete v.tip.dataset[k]);
      Object.entries(found.data).forEach(([k, x]) => { v.tip.dataset[k] = String(x); });
      const [x, y] = point(ev), scroll = v.canvas.parentElement.scrollLeft || 0;
      v.tip.style.left = `${Math.max(0, Math.min(x - scroll + 12, root.clientWidth - 280))}px`;
      v.tip.style.top = `${y + v.canvas.offsetTop + 14}px`;
      v.tip.classList.add("shown");
    });
    v.canvas.addEventListener("mouseleave", () => v.tip.classList.remove("shown"));
    v.canvas.addEventListener("click", (ev) => v.click && v.click(...point(ev)));
    v.canvas.addEventListener("keydown", (ev) => {   // arrow keys move the query token
      if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
      ev.preventDefault();
      v.pick(v.query + (ev.key === "ArrowDown" ? 1 : -1));
    });
    views.push(v);
    watch("value", update);
    update();
    poll();
  }

  window.BertNeuronView = { mount, wants, store, views };
})();
