/* Arrays from the server (explorer/views/browser_arrays.py encodes them; docs/design/browser-views.md): one decoder
   for every canvas view, defined once per page as window.BertArrays. A payload is {dtype, shape, scale,
   compression, data}: data is base64 of row-major bytes, deflated (zlib format) when compression is "deflate",
   inflated with the browser's DecompressionStream. uint8 reads q * scale / 255 in float32 (Python's decode
   does the same); float16 is IEEE half, little-endian. */
(() => {
  if (window.BertArrays) return;
  function bytes(b64) {
    const text = atob(b64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }
  function half(bits) {                      // IEEE float16 -> number
    const s = bits & 0x8000 ? -1 : 1, e = (bits >> 10) & 0x1f, f = bits & 0x3ff;
    if (e === 0) return s * f * 2 ** -24;
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * 2 ** (e - 15);
  }
  const canInflate = typeof DecompressionStream === "function";
  async function inflate(raw) {              // zlib-format deflate -> the bytes (the browser's own decoder)
    if (!canInflate) {
      throw new Error("this browser cannot inflate the view's data (no DecompressionStream): "
        + "use a browser from 2023 or later (Chrome 80, Firefox 113, Safari 16.4)");
    }
    const stream = new Blob([raw]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  async function decode(p) {                 // payload -> {shape, raw, get(i)} (uint8 also has step)
    const raw = p.compression === "deflate" ? await inflate(bytes(p.data)) : bytes(p.data);
    if (p.dtype === "uint8") {
      const step = Math.fround(Math.fround(p.scale) / 255);
      return { shape: p.shape, raw, step, get: (i) => Math.fround(raw[i] * step) };
    }
    const view = new DataView(raw.buffer);
    const values = new Float32Array(raw.length / 2);
    for (let i = 0; i < values.length; i++) values[i] = half(view.getUint16(2 * i, true));
    return { shape: p.shape, raw: values, get: (i) => values[i] };
  }
  window.BertArrays = { bytes, half, inflate, decode, canInflate };
})();
