/* A drawing context that writes SVG (explorer/views/canvas_view.py puts this before each canvas view's script;
   defined once per page as window.BertSvg; docs/design/browser-views.md, "Export"). BertSvg.context(width, height)
   answers the part of CanvasRenderingContext2D the views draw with, so a view's draw function, handed this instead
   of a canvas's context, draws the same picture as a vector document: each stroked or filled path one <path>,
   fillRect / strokeRect a <rect>, fillText a <text> (its alignment as text-anchor / dominant-baseline, its transform
   kept), drawImage of an offscreen picture one <image> (a data: URL; a picture drawn in parts, as the model view's
   tiles, is stored once and shown through <use>), clip() a <clipPath>. Colours and fonts are read as a canvas reads
   them (an invalid one is ignored); paths are written in page units (transformed as they are built, as a canvas
   does); rects, text and images carry the transform in force. document({title, background}) is the file.
   Not drawn: gradients and patterns (as black), shadows, composite modes, and a clearRect that is not the whole
   picture (ignored). */
(() => {
  if (window.BertSvg) return;
  const scratch = document.createElement("canvas").getContext("2d");   // reads colours and fonts; measures text
  const ANCHOR = { left: "start", start: "start", center: "middle", right: "end", end: "end" };
  const BASELINE = { top: "text-before-edge", hanging: "hanging", middle: "central", alphabetic: null,
    ideographic: "ideographic", bottom: "text-after-edge" };
  const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;   // not allowed in XML 1.0
  const SURROGATE = /([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]/g;     // a pair kept, a lone half not
  const esc = (s) => String(s).replace(CONTROL, "\ufffd").replace(SURROGATE, (m, pair) => pair || "\ufffd")
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const num = (x) => { const r = Math.round(x * 1000) / 1000; return Object.is(r, -0) ? "0" : String(r); };
  const finite = (...xs) => xs.every(Number.isFinite);

  function paint(value) {                    // a canvas's normalised colour -> [SVG colour, its alpha]
    const m = /^rgba\((\d+), (\d+), (\d+), ([\d.]+)\)$/.exec(value);
    return m ? [`rgb(${m[1]},${m[2]},${m[3]})`, Number(m[4])] : [value, 1];
  }
  function normalised(key, previous, value) {   // what a canvas keeps when `value` is set over `previous`
    if (typeof value !== "string") return previous;
    scratch[key] = previous; scratch[key] = value;
    return scratch[key];
  }

  function context(width, height) {
    const parts = [], defs = [], images = new Map(), stack = [];
    let ids = 0, path = [], current = null, start = null;
    let s = { fillStyle: "#000000", strokeStyle: "#000000", lineWidth: 1, globalAlpha: 1, font: "10px sans-serif",
      textAlign: "start", textBaseline: "alphabetic", lineCap: "butt", lineJoin: "miter", miterLimit: 10,
      dash: [], lineDashOffset: 0, m: [1, 0, 0, 1, 0, 0], clip: null, imageSmoothingEnabled: true };
    const at = (x, y) => [s.m[0] * x + s.m[2] * y + s.m[4], s.m[1] * x + s.m[3] * y + s.m[5]];
    const pt = (x, y) => { const [X, Y] = at(x, y); return `${num(X)} ${num(Y)}`; };
    const identity = () => s.m.join(",") === "1,0,0,1,0,0";
    const placed = () => (identity() ? "" : ` transform="matrix(${s.m.map(num).join(" ")})"`);
    const unit = () => Math.sqrt(Math.abs(s.m[0] * s.m[3] - s.m[1] * s.m[2]));   // a length's scale in page units
    const clipped = () => (s.clip ? ` clip-path="url(#${s.clip})"` : "");
    const alpha = (a) => (a < 1 ? ` opacity="${num(a)}"` : "");
    function fillAttrs(style) {
      const [colour, a] = paint(style);
      return ` fill="${esc(colour)}"${alpha(a * s.globalAlpha)}`;
    }
    function strokeAttrs(scale) {            // scale: the line width's, for paths written in page units
      const [colour, a] = paint(s.strokeStyle);
      let out = ` fill="none" stroke="${esc(colour)}" stroke-width="${num(s.lineWidth * scale)}"${alpha(a * s.globalAlpha)}`;
      if (s.lineCap !== "butt") out += ` stroke-linecap="${s.lineCap}"`;
      if (s.lineJoin !== "miter") out += ` stroke-linejoin="${s.lineJoin}"`;
      if (s.dash.length) {
        out += ` stroke-dasharray="${s.dash.map((d) => num(d * scale)).join(" ")}"`;
        if (s.lineDashOffset) out += ` stroke-dashoffset="${num(s.lineDashOffset * scale)}"`;
      }
      return out;
    }
    function moveTo(x, y) {
      if (!finite(x, y)) return;
      path.push(`M${pt(x, y)}`); current = [x, y]; start = [x, y];
    }
    function lineTo(x, y) {
      if (!finite(x, y)) return;
      if (!current) { moveTo(x, y); return; }
      path.push(`L${pt(x, y)}`); current = [x, y];
    }
    function ellipse(x, y, rx, ry, rotation, a0, a1, ccw = false) {   // cubic Béziers of at most 90° each
      if (!finite(x, y, rx, ry, rotation, a0, a1) || rx < 0 || ry < 0) return;
      const full = 2 * Math.PI;
      let sweep = a1 - a0;
      if (!ccw && sweep >= full) sweep = full;
      else if (ccw && -sweep >= full) sweep = -full;
      else if (!ccw) sweep = ((sweep % full) + full) % full;
      else sweep = -((((-sweep) % full) + full) % full);
      const cos = Math.cos(rotation), sin = Math.sin(rotation);
      const on = (t) => [x + rx * Math.cos(t) * cos - ry * Math.sin(t) * sin, y + rx * Math.cos(t) * sin + ry * Math.sin(t) * cos];
      const slope = (t) => [-rx * Math.sin(t) * cos - ry * Math.cos(t) * sin, -rx * Math.sin(t) * sin + ry * Math.cos(t) * cos];
      const first = on(a0);
      if (current) lineTo(...first); else moveTo(...first);
      const pieces = Math.max(1, Math.ceil(Math.abs(sweep) / (Math.PI / 2) - 1e-9)), step = sweep / pieces;
      const k = (4 / 3) * Math.tan(step / 4);
      for (let i = 0; i < pieces; i++) {
        const t0 = a0 + i * step, t1 = t0 + step, p0 = on(t0), p3 = on(t1), d0 = slope(t0), d1 = slope(t1);
        path.push(`C${pt(p0[0] + k * d0[0], p0[1] + k * d0[1])} ${pt(p3[0] - k * d1[0], p3[1] - k * d1[1])} ${pt(...p3)}`);
        current = p3;
      }
    }
    function image(source) {                 // a picture stored once: {id, url, w, h, uses}
      if (!images.has(source)) {
        const w = source.width, h = source.height;
        let url = "";
        if (source instanceof HTMLCanvasElement) url = source.toDataURL("image/png");
        else {
          const copy = Object.assign(document.createElement("canvas"), { width: w, height: h });
          copy.getContext("2d").drawImage(source, 0, 0);
          url = copy.toDataURL("image/png");
        }
        images.set(source, { id: `img${++ids}`, url, w, h, uses: 0 });
      }
      return images.get(source);
    }
    function writeText(text, x, y, stroked) {   // one <text>, at (x, y) under the transform in force
      if (!finite(x, y)) return;
      const baseline = BASELINE[s.textBaseline];
      const look = stroked ? strokeAttrs(1) : fillAttrs(s.fillStyle);
      parts.push(`<text x="${num(x)}" y="${num(y)}"${look} style="font: ${esc(s.font)}; white-space: pre"`
        + `${ANCHOR[s.textAlign] !== "start" ? ` text-anchor="${ANCHOR[s.textAlign]}"` : ""}`
        + `${baseline ? ` dominant-baseline="${baseline}"` : ""}${placed()}${clipped()}>`
        + `${esc(String(text).replace(/[\t\n\f\r]/g, " "))}</text>`);
    }
    function setMatrix(a, b, c, d, e, f) { if (finite(a, b, c, d, e, f)) s.m = [a, b, c, d, e, f]; }
    function multiply(a, b, c, d, e, f) {
      if (!finite(a, b, c, d, e, f)) return;
      const [A, B, C, D, E, F] = s.m;
      s.m = [A * a + C * b, B * a + D * b, A * c + C * d, B * c + D * d, A * e + C * f + E, B * e + D * f + F];
    }

    const ctx = {
      canvas: { width, height },
      save() { stack.push({ ...s, dash: [...s.dash], m: [...s.m] }); },
      restore() { if (stack.length) s = stack.pop(); },
      translate(x, y) { multiply(1, 0, 0, 1, x, y); },
      scale(x, y) { multiply(x, 0, 0, y, 0, 0); },
      rotate(a) { multiply(Math.cos(a), Math.sin(a), -Math.sin(a), Math.cos(a), 0, 0); },
      transform: multiply,
      setTransform(a, b, c, d, e, f) {
        if (a && typeof a === "object") setMatrix(a.a ?? 1, a.b ?? 0, a.c ?? 0, a.d ?? 1, a.e ?? 0, a.f ?? 0);
        else if (a === undefined) setMatrix(1, 0, 0, 1, 0, 0);
        else setMatrix(a, b, c, d, e, f);
      },
      resetTransform() { setMatrix(1, 0, 0, 1, 0, 0); },
      getTransform() { return new DOMMatrix(s.m); },
      setLineDash(list) {
        if (list.some((d) => !Number.isFinite(d) || d < 0)) return;
        s.dash = list.length % 2 ? [...list, ...list] : [...list];
      },
      getLineDash() { return [...s.dash]; },
      beginPath() { path = []; current = null; start = null; },
      moveTo, lineTo,
      closePath() { if (current) { path.push("Z"); current = start; } },
      quadraticCurveTo(cx, cy, x, y) {
        if (!finite(cx, cy, x, y)) return;
        if (!current) moveTo(cx, cy);
        path.push(`Q${pt(cx, cy)} ${pt(x, y)}`); current = [x, y];
      },
      bezierCurveTo(c1x, c1y, c2x, c2y, x, y) {
        if (!finite(c1x, c1y, c2x, c2y, x, y)) return;
        if (!current) moveTo(c1x, c1y);
        path.push(`C${pt(c1x, c1y)} ${pt(c2x, c2y)} ${pt(x, y)}`); current = [x, y];
      },
      arc(x, y, r, a0, a1, ccw = false) { ellipse(x, y, r, r, 0, a0, a1, ccw); },
      ellipse,
      rect(x, y, w, h) {
        if (!finite(x, y, w, h)) return;
        moveTo(x, y); lineTo(x + w, y); lineTo(x + w, y + h); lineTo(x, y + h); path.push("Z"); moveTo(x, y);
      },
      stroke() {
        if (path.some((p) => p[0] !== "M")) parts.push(`<path d="${path.join("")}"${strokeAttrs(unit())}${clipped()}/>`);
      },
      fill(rule) {
        if (!path.some((p) => p[0] !== "M")) return;
        const evenodd = rule === "evenodd" ? ' fill-rule="evenodd"' : "";
        parts.push(`<path d="${path.join("")}"${fillAttrs(s.fillStyle)}${evenodd}${clipped()}/>`);
      },
      clip(rule) {
        const id = `clip${++ids}`, outer = s.clip ? ` clip-path="url(#${s.clip})"` : "";
        const evenodd = rule === "evenodd" ? ' clip-rule="evenodd"' : "";
        defs.push(`<clipPath id="${id}"${outer}><path d="${path.join("") || "M0 0"}"${evenodd}/></clipPath>`);
        s.clip = id;
      },
      fillRect(x, y, w, h) {
        if (!finite(x, y, w, h) || !w || !h) return;
        parts.push(`<rect x="${num(Math.min(x, x + w))}" y="${num(Math.min(y, y + h))}" width="${num(Math.abs(w))}" `
          + `height="${num(Math.abs(h))}"${fillAttrs(s.fillStyle)}${placed()}${clipped()}/>`);
      },
      strokeRect(x, y, w, h) {
        if (!finite(x, y, w, h)) return;
        parts.push(`<rect x="${num(Math.min(x, x + w))}" y="${num(Math.min(y, y + h))}" width="${num(Math.abs(w))}" `
          + `height="${num(Math.abs(h))}"${strokeAttrs(1)}${placed()}${clipped()}/>`);
      },
      clearRect(x, y, w, h) {                // the whole picture: what was drawn is gone (else ignored)
        const [X, Y] = at(x, y), [X1, Y1] = at(x + w, y + h);
        if (Math.min(X, X1) <= 0 && Math.min(Y, Y1) <= 0 && Math.max(X, X1) >= width && Math.max(Y, Y1) >= height) {
          parts.length = 0;
          images.forEach((pic) => { pic.uses = 0; });
        }
      },
      fillText(text, x, y) { writeText(text, x, y, false); },
      strokeText(text, x, y) { writeText(text, x, y, true); },
      measureText(text) { scratch.font = s.font; return scratch.measureText(text); },
      drawImage(source, ...args) {
        const pic = image(source);
        let [sx, sy, sw, sh] = [0, 0, pic.w, pic.h], dx, dy, dw, dh;
        if (args.length === 2) [dx, dy, dw, dh] = [...args, pic.w, pic.h];
        else if (args.length === 4) [dx, dy, dw, dh] = args;
        else [sx, sy, sw, sh, dx, dy, dw, dh] = args;
        if (!finite(sx, sy, sw, sh, dx, dy, dw, dh) || !sw || !sh || !dw || !dh) return;
        pic.uses += 1;
        parts.push({ pic, whole: sx === 0 && sy === 0 && sw === pic.w && sh === pic.h, box: [sx, sy, sw, sh],
          place: [dx, dy, dw, dh], attrs: `${placed()}${clipped()}${alpha(s.globalAlpha)}`,
          crisp: !s.imageSmoothingEnabled });
      },
      document({ title = "", background = null } = {}) {   // the SVG file, as a string
        const body = parts.map((p) => {
          if (typeof p === "string") return p;
          const [dx, dy, dw, dh] = p.place.map(num), [sx, sy, sw, sh] = p.box.map(num);
          const crisp = p.crisp ? ' image-rendering="optimizeSpeed" style="image-rendering: pixelated"' : "";
          if (p.whole && p.pic.uses === 1) {
            return `<image x="${dx}" y="${dy}" width="${dw}" height="${dh}" preserveAspectRatio="none"${crisp}`
              + `${p.attrs} xlink:href="${p.pic.url}"/>`;
          }
          return `<g${p.attrs}><svg x="${dx}" y="${dy}" width="${dw}" height="${dh}" viewBox="${sx} ${sy} ${sw} ${sh}" `
            + `preserveAspectRatio="none"${crisp}><use xlink:href="#${p.pic.id}"/></svg></g>`;
        });
        const shared = [...images.values()].filter((pic) => !(pic.uses === 1 && parts.some((p) => p.pic === pic && p.whole)))
          .filter((pic) => pic.uses > 0)
          .map((pic) => `<image id="${pic.id}" width="${pic.w}" height="${pic.h}" xlink:href="${pic.url}"/>`);
        const [fill, a] = background ? paint(normalised("fillStyle", "#ffffff", background)) : [null, 0];
        const back = a > 0 ? [`<rect width="100%" height="100%" fill="${esc(fill)}"${alpha(a)}/>`] : [];
        return ['<?xml version="1.0" encoding="UTF-8"?>',
          `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" version="1.1" `
          + `width="${num(width)}" height="${num(height)}" viewBox="0 0 ${num(width)} ${num(height)}" stroke-miterlimit="10">`,
          `<title>${esc(title)}</title>`,
          ...(defs.length || shared.length ? ["<defs>", ...shared, ...defs, "</defs>"] : []),
          ...back, ...body, "</svg>", ""].join("\n");
      },
    };
    const kept = { fillStyle: "color", strokeStyle: "color", font: "font" };
    for (const key of ["fillStyle", "strokeStyle", "font", "lineWidth", "globalAlpha", "textAlign", "textBaseline",
      "lineCap", "lineJoin", "miterLimit", "lineDashOffset", "imageSmoothingEnabled"]) {
      Object.defineProperty(ctx, key, {
        get: () => s[key],
        set: (value) => {
          if (kept[key] === "color") s[key] = normalised("fillStyle", s[key], value);
          else if (kept[key] === "font") s[key] = normalised("font", s[key], value);
          else if (key === "lineWidth" || key === "miterLimit") { if (Number.isFinite(value) && value > 0) s[key] = value; }
          else if (key === "globalAlpha") { if (Number.isFinite(value) && value >= 0 && value <= 1) s[key] = value; }
          else if (key === "lineDashOffset") { if (Number.isFinite(value)) s[key] = value; }
          else if (key === "imageSmoothingEnabled") s[key] = Boolean(value);
          else if (key === "textAlign" && value in ANCHOR) s[key] = value;
          else if (key === "textBaseline" && value in BASELINE) s[key] = value;
          else if (key === "lineCap" && ["butt", "round", "square"].includes(value)) s[key] = value;
          else if (key === "lineJoin" && ["miter", "round", "bevel"].includes(value)) s[key] = value;
        },
      });
    }
    return ctx;
  }

  window.BertSvg = { context, escape: esc };
})();
