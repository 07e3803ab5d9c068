/* The Attention tab's canvas views: heatmap, head view, model view (explorer/attention/canvas.py sends the data;
   docs/design/browser-views.md). Defined once per page; each gr.HTML view calls mount(kind, element, props,
   trigger, watch). The heatmap's value holds the maps (uint8, value = q * scale / 255; deflated when the payload's
   compression says so, inflated with DecompressionStream); the head view and the model view refer to them by
   id (the head view's id is null after a heads change: the maps the page holds). The layer and head come from the tab's sliders (#attention-layer,
   #attention-head): a change the browser holds the maps for redraws here, with no request; else the heatmap
   fires "fetch" and the server answers with that layer's maps ("both" when the neuron view lacks that head too: one
   request, explorer/attention/joined_fetch.py).
   Late answers (docs/design/browser-views.md, "Late answers"): the layer, the head, the head view's window and
   hidden heads are the user's; an answer for the input shown only brings maps (never resets them); an answer
   for another input older than the one shown (its "asked") is dropped.
   Export (docs/design/browser-views.md, "Export"): each view's draw function takes its surface, so the export
   control draws the view's current state again into an SVG context or a 2x / 3x canvas, named after the model and
   the input (the heatmap value's "export") and the view. The head view counts the links it draws (data-links). */
(() => {
  if (window.BertAttentionViews) return;
  const RED = "#dc2626", FAINT = 0.1;        // FAINT: a head view whose links all weigh less looks empty
  const store = { entries: {}, current: null };
  const views = [];
  let sliders = { layer: null, head: null };
  const pending = {};                        // a timer each: after a change, after an answer

  const { decode } = window.BertArrays;      // assets/browser_arrays.js, loaded first
  const { sized, picture, short, screen, fileName, title, exportControl, keep } = window.BertCanvas;   // canvas_tools.js

  function put(value, maps, stats) {         // the heatmap's value, decoded: keep only the newest input
    const held = entry(), asked = Number(value.asked) || 0;
    if (held && held.id === value.id && asked < held.asked) {   // older, same input: only for maps the page lacks
      const { layer, head } = chosen(held);
      if (mapIndex(held, layer, head) >= 0) return;
    }
    store.entries = { [value.id]: { ...value, maps, stats, asked: Math.max(asked, held && held.id === value.id
      ? held.asked : 0) } };
    store.current = value.id;
  }
  function stale(value) {                    // an answer for another input, older than the one shown
    const held = entry();
    return Boolean(value && held && value.id && value.id !== held.id && (Number(value.asked) || 0) < held.asked);
  }
  const entry = (id) => store.entries[id || store.current] || null;
  function mapIndex(e, layer, head) {        // flat offset of map (layer, head) in e.maps, or -1
    const l = e.map_layers.indexOf(layer), h = e.map_heads.indexOf(head);
    if (l < 0 || h < 0) return -1;
    const n = e.tokens.length;
    return (l * e.map_heads.length + h) * n * n;
  }

  function readSlider(id) {
    const box = document.querySelector(`#${id} input[type=number]`);
    const v = box ? Number(box.value) : NaN;
    return Number.isFinite(v) ? v : null;
  }
  function chosen(e) {                       // the engine's (layer, head): the sliders', else the answer's
    const layer = sliders.layer !== null ? sliders.layer - 1 : e.layer;
    const head = sliders.head !== null ? sliders.head : e.head;
    const ok = layer >= 0 && layer < e.num_layers && head >= 0 && head < e.num_heads;
    return ok ? { layer, head } : { layer: e.layer, head: e.head };
  }
  function poll() {                          // typed, dragged, arrow keys or set by the server: all end here
    const layer = readSlider("attention-layer"), head = readSlider("attention-head");
    if (layer === sliders.layer && head === sliders.head) return;
    const first = sliders.layer === null;
    sliders = { layer, head };
    if (!first) changed();
  }
  function changed() {
    views.forEach((v) => v.draw());
    want(false);
  }
  let wanted = null, joined = null;          // the last "id:layer:head" an answer asked for; the id "both" was for
  function want(afterAnswer) {               // ask for what the chosen layer and head lack, once after a quick run
    const heatmap = views.find((v) => v.kind === "heatmap");
    if (!heatmap) return;
    clearTimeout(pending[afterAnswer]);
    pending[afterAnswer] = setTimeout(() => {   // the last of a quick run of changes asks, once
      const e = entry();
      // the neuron view (assets/neuron_view.js), when shown and lacking this head's vectors: {id} it holds
      const neuron = !afterAnswer && window.BertNeuronView && window.BertNeuronView.wants();
      if (e) {
        const { layer, head } = chosen(e), key = `${e.id}:${layer}:${head}`;
        // not here: that layer's maps (after an answer, once: an answer that still lacks them asks no more)
        if (mapIndex(e, layer, head) < 0 && !(afterAnswer && key === wanted)) {
          if (afterAnswer) wanted = key;
          // both views lack it, for one input: one request, within the change budget
          if (neuron && neuron.id === e.id) { joined = e.id; heatmap.trigger("both", neuron); return; }
          heatmap.trigger("fetch", { id: e.id });
        }
      }
      if (neuron) heatmap.trigger("neuron", neuron);
    }, 120);
  }
  function neuronAnswered(id) {              // "both" answered another input (the text was edited): ask its maps
    if (joined !== null && id !== joined) want(true);
    joined = null;
  }
  function fetchHeads(heads) {               // a heads change: ask for the chosen layer's heads the page lacks
    const e = entry(), heatmap = views.find((v) => v.kind === "heatmap");
    if (!e || !heatmap) return;
    const { layer } = chosen(e);
    if (heads.some((h) => h < e.num_heads && mapIndex(e, layer, h) < 0)) heatmap.trigger("fetch", { id: e.id });
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

  function setSliders(layer, head) {         // a click on the model view picks that layer and head
    [["attention-layer", layer + 1], ["attention-head", head]].forEach(([id, value]) => {
      const box = document.querySelector(`#${id} input[type=number]`);
      if (!box) return;
      box.value = String(value);
      box.dispatchEvent(new Event("input", { bubbles: true }));
    });
  }

  function theme(el) {
    const style = getComputedStyle(el);
    return { text: style.color || "#111827", muted: style.getPropertyValue("--body-text-color-subdued") || "#6b7280" };
  }
  function image(palette, values, offset, rows, cols, rowStride) {   // uint8 levels -> an offscreen picture
    const rgb = palette.map((c) => [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16)));
    return picture(rows, cols, (r, c) => rgb[values[offset + r * rowStride + c]]);
  }
  const fmt = (v) => v.toFixed(3);
  const pct = (v) => `${(100 * v).toFixed(v >= 0.1 ? 0 : 1)}%`;

  function statsLine(e, layer, head) {
    const k = (layer * e.num_heads + head) * e.stat_names.length;
    const s = Object.fromEntries(e.stat_names.map((n, i) => [n, e.stats.get(k + i)]));
    const [first, last] = e.special_names || ["[CLS]", "[SEP]"];   // as the input writes them: RoBERTa's <s>, </s>
    return `entropy ${s.entropy.toFixed(2)} nats · ${first} ${pct(s.cls)} · ${last} ${pct(s.sep)} · self ${pct(s.self)}`
      + ` · previous ${pct(s.prev)} · next ${pct(s.next)} · mean distance ${s.distance.toFixed(1)} tokens`;
  }

  function drawHeatmap(v, e, surface) {
    const { layer, head } = chosen(e), n = e.tokens.length, at = mapIndex(e, layer, head);
    v.caption.textContent = `Layer ${layer + 1}, head ${head}: row = query, column = key it looks at`
      + (at < 0 ? " · loading this layer…" : ` · ${statsLine(e, layer, head)}`);
    if (at < 0) return false;
    keep(v.controls, v.exporter);
    v.name = { file: fileName(e.export, "attention-heatmap", `L${layer + 1}H${head}`),
      title: title(e.export, `attention heatmap, layer ${layer + 1}, head ${head}`) };
    const labels = n <= 64, font = 11;
    const names = e.tokens.map((t, i) => short(`${i}: ${t}`, 14));
    const ctx0 = v.canvas.getContext("2d");
    ctx0.font = `${font}px sans-serif`;
    const room = labels ? Math.min(110, 8 + Math.max(...names.map((t) => ctx0.measureText(t).width))) : 4;
    const width = Math.max(200, v.root.clientWidth - 4);
    const cell = Math.max(0.5, Math.min(28, (width - room - 4) / n));
    const size = cell * n, height = room + size + 4;
    const ctx = surface(room + size + 4, height), th = theme(v.root);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(image(e.palette, e.maps.raw, at, n, n, n), room, room, size, size);
    if (labels) {
      ctx.fillStyle = th.text; ctx.font = `${Math.min(font, Math.max(7, cell - 2))}px sans-serif`;
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      names.forEach((t, i) => ctx.fillText(t, room - 4, room + (i + 0.5) * cell));
      names.forEach((t, i) => {
        ctx.save(); ctx.translate(room + (i + 0.5) * cell, room - 4); ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left"; ctx.fillText(t, 0, 0); ctx.restore();
      });
    }
    v.geometry = { left: room, top: room, cell, n };
    v.hover = (x, y) => {
      const i = Math.floor((y - room) / cell), j = Math.floor((x - room) / cell);
      if (i < 0 || j < 0 || i >= n || j >= n) return null;
      const value = e.maps.get(at + i * n + j);
      return { text: `query ${i}: ${e.tokens[i]} → key ${j}: ${e.tokens[j]} · weight ${fmt(value)}`,
        data: { query: i, key: j, value } };
    };
    return `L${layer + 1}-H${head}`;
  }

  function drawHeadView(v, e, surface) {
    const { layer, head } = chosen(e), n = e.tokens.length, val = v.value;
    // a chip per head of the model: the chosen "heads" on until hidden, the others off until shown (v.added)
    const every = [...Array(e.num_heads).keys()];
    const on = (h) => (val.heads.includes(h) ? !v.hidden.has(h) : v.added.has(h));
    const heads = every.filter((h) => on(h) && mapIndex(e, layer, h) >= 0);
    const missing = every.filter((h) => on(h) && mapIndex(e, layer, h) < 0);
    const win = Math.min(val.window, n);
    v.start = Math.max(0, Math.min(v.start || 0, n - win));
    const key = `${val.id}:${n}:${e.num_heads}:${val.heads.join(",")}`;
    if (v.controlsKey !== key) {             // built once per answer: a slide or a chip click keeps them
      v.controlsKey = key;
      v.controls.replaceChildren();
      if (n > win) {                         // long inputs: a window of tokens the user slides
        const range = Object.assign(document.createElement("input"), { type: "range", min: 0, max: n - win,
          value: v.start, className: "attn-window", ariaLabel: "first token shown" });
        range.addEventListener("input", () => { v.start = Number(range.value); v.draw(); });
        v.controls.append(range, Object.assign(document.createElement("span"), { className: "attn-window-note" }));
      }
      every.forEach((h) => {                 // one chip per head: click to hide or show it here
        const chip = Object.assign(document.createElement("button"), { type: "button", className: "attn-chip",
          textContent: `${h}`, ariaLabel: `show or hide head ${h}` });
        chip.dataset.head = String(h);
        chip.style.borderColor = val.colors[h % val.colors.length];
        chip.addEventListener("click", () => {
          const set = v.value.heads.includes(h) ? v.hidden : v.added, had = set.has(h);
          if (had) set.delete(h); else set.add(h);
          v.draw();
        });
        v.controls.append(chip);
      });
    }
    keep(v.controls, v.exporter);
    const note = v.controls.querySelector(".attn-window-note");
    if (note) note.textContent = `tokens ${v.start}–${v.start + win - 1} of ${n}`;
    v.controls.querySelectorAll(".attn-chip").forEach((chip) => {
      chip.style.opacity = on(Number(chip.dataset.head)) ? 1 : 0.35;
      chip.setAttribute("aria-pressed", String(on(Number(chip.dataset.head))));
    });
    v.caption.textContent = `Layer ${layer + 1}: a thicker, more opaque line is more attention; head ${head}`
      + " (the chosen head) drawn strongest. Hover a token for its strongest links."
      + (missing.length ? ` Heads ${missing.join(", ")} are not sent at this length.` : "");
    const row = 20, top = 22, width = Math.max(260, Math.min(v.root.clientWidth - 4, 720));
    const ctx = surface(width, top + win * row + 6), th = theme(v.root);
    ctx.font = "12px sans-serif"; ctx.textBaseline = "middle";
    const label = Math.min(width * 0.32, 8 + Math.max(...e.tokens.map((t) => ctx.measureText(short(t, 16)).width)));
    const x0 = label, x1 = width - label, y = (k) => top + (k - v.start + 0.5) * row;
    ctx.fillStyle = th.text; ctx.textAlign = "left"; ctx.fillText("query (looks)", 0, 9);
    ctx.textAlign = "right"; ctx.fillText("key (looked at)", width, 9);
    const focus = v.focus;                   // {side, index} while a token is hovered
    const strongest = strongestLink(e, layer, heads, v.start, win), threshold = v.threshold ?? val.threshold;
    const gain = v.threshold === null ? 1 : 1 / Math.max(strongest, 1e-9);   // lowered: opacity relative to the top
    uniformNote(v, val, n, strongest, heads.length > 0);
    v.root.dataset.threshold = String(threshold);
    const order = heads.slice().sort((a, b) => (a === head) - (b === head));
    let links = 0;                           // one stroke (an SVG <path>) per link drawn
    for (const h of order) {
      const at = mapIndex(e, layer, h), strong = h === head || !heads.includes(head);
      ctx.strokeStyle = val.colors[h % val.colors.length];
      for (let i = v.start; i < v.start + win; i++) {
        if (focus && focus.side === "query" && focus.index !== i) continue;
        for (let j = v.start; j < v.start + win; j++) {
          if (focus && focus.side === "key" && focus.index !== j) continue;
          const w = e.maps.get(at + i * n + j), a = Math.min(1, w * gain);
          if (w < threshold) continue;
          ctx.globalAlpha = strong ? a : 0.3 * a;
          ctx.lineWidth = v.threshold !== null ? (strong ? 1 : 0.5) : strong ? 1 + 2.5 * a : 0.5 + a;   // lowered: thin
          ctx.beginPath(); ctx.moveTo(x0, y(i)); ctx.lineTo(x1, y(j)); ctx.stroke();
          links += 1;
        }
      }
    }
    v.root.dataset.links = String(links);
    const last = v.start + win - 1, windowed = n > win;   // a long input: the window of tokens shown
    v.name = { file: fileName(e.export, "head-view", `L${layer + 1}H${head}`, windowed ? `tokens${v.start}-${last}` : ""),
      title: title(e.export, `head view, layer ${layer + 1}, heads ${heads.join(", ") || "none"} (head ${head}`
        + ` strongest)${windowed ? `, tokens ${v.start}–${last} of ${n}` : ""}`) };
    ctx.globalAlpha = 1; ctx.fillStyle = th.text;
    for (let k = v.start; k < v.start + win; k++) {
      const t = short(e.tokens[k], 16);
      ctx.textAlign = "right"; ctx.fillText(t, x0 - 4, y(k));
      ctx.textAlign = "left"; ctx.fillText(t, x1 + 4, y(k));
    }
    v.geometry = { x0, x1, top, row, start: v.start, win };
    v.hover = (x, yy) => {
      const k = v.start + Math.floor((yy - top) / row);
      const side = x < (x0 + x1) / 2 ? "query" : "key";
      if (k < v.start || k >= v.start + win || (x > x0 && x < x1)) { v.setFocus(null); return null; }
      v.setFocus({ side, index: k });
      const lines = heads.map((h) => {
        const at = mapIndex(e, layer, h);
        const links = e.tokens.map((t, j) => [t, e.maps.get(at + (side === "query" ? k * n + j : j * n + k))])
          .sort((a, b) => b[1] - a[1]).slice(0, 3).map(([t, w]) => `${t} ${fmt(w)}`);
        return `head ${h}: ${links.join(", ")}`;
      });
      return { text: `${side} ${k}: ${e.tokens[k]} ${side === "query" ? "looks at" : "looked at by"} · ${lines.join(" · ")}`,
        data: { side, index: k } };
    };
    return `L${layer + 1}-H${head}-${v.start}`;
  }

  function strongestLink(e, layer, heads, start, win) {   // the largest weight the head view's window can draw
    const n = e.tokens.length;
    let top = 0;
    for (const h of heads) {
      const at = mapIndex(e, layer, h);
      for (let i = start; i < start + win; i++) {
        for (let j = start; j < start + win; j++) top = Math.max(top, e.maps.get(at + i * n + j));
      }
    }
    return top;
  }
  function uniformNote(v, val, n, strongest, drawing) {   // an empty-looking head view says why; a lower threshold
    // at most the usual threshold: uniform's weight, or the uint8 step, so a link above average shows
    const low = Math.min(strongest, val.threshold, Math.max(1 / n, 1 / 255));
    let text = "", label = "", pick = null;
    if (v.threshold !== null) {
      text = `Links ≥ ${fmt(v.threshold)}, opacity relative to the strongest (weight ${fmt(strongest)}).`;
      label = `Back to ${val.threshold}`;
    } else if (drawing && strongest < FAINT) {
      text = (strongest < val.threshold ? `Every link here is below the threshold ${val.threshold}`
        : `Every link here is below ${FAINT}, so its line is faint`) + `: the attention is near uniform (max weight `
        + `${fmt(strongest)}; uniform over ${n} tokens is ${fmt(1 / n)}).`;
      if (low > 0) { label = `Show links ≥ ${fmt(low)}`; pick = low; }
    }
    if (v.noteKey === `${text}|${label}`) return;
    v.noteKey = `${text}|${label}`;
    v.note.replaceChildren(...(text ? [Object.assign(document.createElement("span"), { textContent: text })] : []));
    if (!label) return;
    const button = Object.assign(document.createElement("button"), { type: "button", textContent: label,
      className: "attn-chip attn-threshold" });
    button.addEventListener("click", () => { v.threshold = pick; v.draw(); });
    v.note.append(button);
  }

  function drawModelView(v, e, surface) {
    const { layer, head } = chosen(e), val = v.value, grid = v.grid;
    const [L, H, P] = val.grid.shape, gap = 3, left = 30, top = 16;
    const width = Math.max(240, v.root.clientWidth - 4);
    const tile = Math.max(6, Math.min(72, Math.floor((width - left) / H) - gap));
    keep(v.controls, v.exporter);
    v.name = { file: fileName(e.export, "model-view", `L${layer + 1}H${head}`),
      title: title(e.export, `model view, every layer and head (layer ${layer + 1}, head ${head} framed)`) };
    const ctx = surface(left + H * (tile + gap), top + L * (tile + gap)), th = theme(v.root);
    ctx.imageSmoothingEnabled = false;
    const pic = image(e.palette, grid.raw, 0, L * H * P, P, P);   // tiles stacked: (L*H*P) x P
    ctx.fillStyle = th.text; ctx.font = "10px sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (let h = 0; h < H; h++) if (tile >= 14 || h % 2 === 0) ctx.fillText(`H${h}`, left + h * (tile + gap) + tile / 2, 7);
    for (let l = 0; l < L; l++) {
      ctx.textAlign = "right"; ctx.fillText(`L${l + 1}`, left - 4, top + l * (tile + gap) + tile / 2);
      for (let h = 0; h < H; h++) {
        ctx.drawImage(pic, 0, (l * H + h) * P, P, P, left + h * (tile + gap), top + l * (tile + gap), tile, tile);
      }
    }
    ctx.strokeStyle = RED; ctx.lineWidth = 2;
    ctx.strokeRect(left + head * (tile + gap) - 1.5, top + layer * (tile + gap) - 1.5, tile + 3, tile + 3);
    const unit = val.block > 1 ? "block" : "token";
    v.caption.textContent = `All ${L} layers (rows) × ${H} heads (columns)`
      + (val.block > 1 ? `, pooled in blocks of ${val.block} tokens` : "") + "; click one to show it large (red frame).";
    const where = (x, y) => {
      const h = Math.floor((x - left) / (tile + gap)), l = Math.floor((y - top) / (tile + gap));
      const dx = x - left - h * (tile + gap), dy = y - top - l * (tile + gap);
      if (h < 0 || l < 0 || h >= H || l >= L || dx >= tile || dy >= tile) return null;
      return { l, h, q: Math.floor((dy / tile) * P), k: Math.floor((dx / tile) * P) };
    };
    v.click = (x, y) => { const w = where(x, y); if (w) setSliders(w.l, w.h); };
    v.hover = (x, y) => {
      const w = where(x, y);
      if (!w) return null;
      const value = grid.get(((w.l * H + w.h) * P + w.q) * P + w.k);
      return { text: `L${w.l + 1} H${w.h} · query ${unit} ${w.q} → key ${unit} ${w.k} · weight ${fmt(value)}`,
        data: { layer: w.l, head: w.h, query: w.q, key: w.k, value } };
    };
    v.geometry = { left, top, tile, gap, P };
    return `L${layer + 1}-H${head}`;
  }

  function mount(kind, element, props, trigger, watch) {
    const root = element.querySelector(".attn-view");
    const v = { kind, root, trigger, value: null, hidden: new Set(), added: new Set(), start: 0, focus: null,
      threshold: null, caption: root.querySelector(".attn-caption"), controls: root.querySelector(".attn-controls"),
      note: root.querySelector(".attn-note"),
      canvas: root.querySelector("canvas"), tip: root.querySelector(".attn-tip"), draws: 0 };
    v.setFocus = (f) => {
      const same = JSON.stringify(f) === JSON.stringify(v.focus);
      v.focus = f;
      if (!same) v.draw();
    };
    v.paint = (surface) => {                 // the current state on `surface`; false when there is nothing to draw
      const val = v.value, e = val && entry(val.id);
      if (!val || !e || (val.id && e.id !== val.id)) return false;
      return kind === "heatmap" ? drawHeatmap(v, e, surface) : kind === "head_view" ? drawHeadView(v, e, surface)
        : drawModelView(v, e, surface);
    };
    const what = { heatmap: "the attention heatmap", head_view: "the head view", model_view: "the model view" }[kind];
    v.exporter = exportControl({ what, draw: v.paint, name: () => v.name, root });
    v.draw = () => {
      const val = v.value, e = val && entry(val.id);
      if (!val || !e || (val.id && e.id !== val.id)) {
        sized(v.canvas, 1, 1); v.caption.textContent = ""; v.controls.replaceChildren(); v.controlsKey = null;
        v.note.replaceChildren(); v.noteKey = null;
        v.hover = null; delete root.dataset.drawn; delete root.dataset.links; v.tip.classList.remove("shown");
        return;
      }
      const drawn = v.paint(screen(v.canvas));
      v.draws += 1;
      root.dataset.draws = String(v.draws);
      v.canvas.setAttribute("aria-label", v.caption.textContent);
      if (drawn) root.dataset.drawn = drawn; else delete root.dataset.drawn;
    };
    const update = async () => {             // decode (inflate) first; a newer value arriving meanwhile wins
      const val = props.value && typeof props.value === "object" ? props.value : null, seq = (v.seq || 0) + 1;
      v.seq = seq;
      let decoded = null;
      try {
        decoded = !val ? null : kind === "heatmap" ? await Promise.all([decode(val.maps), decode(val.stats)])
          : kind === "model_view" ? await decode(val.grid) : null;
      } catch (err) {                        // e.g. no DecompressionStream: say so in the view, draw nothing
        if (seq === v.seq) { v.value = null; v.draw(); v.caption.textContent = String(err.message || err); }
        return;
      }
      if (seq !== v.seq) return;
      if (kind !== "heatmap" ? stale(val) && v.value : stale(val)) return;   // another input, older: dropped
      const shown = v.value && (v.value.id || store.current);
      const keep = val && v.value && (val.id === null || val.id === shown);   // the same input: the user's window
      v.value = val; v.focus = null;
      if (!keep) { v.hidden.clear(); v.added.clear(); v.start = 0; v.threshold = null; }
      if (val) { v.answers = (v.answers || 0) + 1; root.dataset.answers = String(v.answers); }
      if (val && kind === "heatmap") put(val, ...decoded);
      if (kind === "model_view") v.grid = decoded;
      if (kind === "heatmap") { views.forEach((o) => o.draw()); want(true); } else v.draw();
      if (kind === "head_view" && val && val.id === null) fetchHeads(val.heads);
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
      const [x, y] = point(ev);
      v.tip.style.left = `${Math.max(0, Math.min(x + 12, root.clientWidth - 260))}px`;
      v.tip.style.top = `${y + v.canvas.offsetTop + 14}px`;
      v.tip.classList.add("shown");
    });
    v.canvas.addEventListener("mouseleave", () => {
      v.tip.classList.remove("shown");
      if (kind === "head_view") v.setFocus(null);
    });
    v.canvas.addEventListener("click", (ev) => v.click && v.click(...point(ev)));
    views.push(v);
    watch("value", update);
    update();
    poll();
  }

  window.BertAttentionViews = { mount, decode, store, views, neuronAnswered };
})();
