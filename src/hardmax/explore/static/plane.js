// hardmax explorer: drawing helpers shared by the two pages (SVG, no third-party code).
// The pages draw what the server computed with the library; nothing here runs the dynamics.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

const Hx = {
  el(tag, attrs, parent) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  },

  // {"shape": [...], "b64": ...} (little-endian float64) -> {shape, data: Float64Array}; a frame's record has
  // its data already
  decode(record) {
    if (record.data) return record;
    const bytes = Uint8Array.from(atob(record.b64), (c) => c.charCodeAt(0));
    return { shape: record.shape, data: new Float64Array(bytes.buffer) };
  },

  // A binary answer (hardmax.explore.frames.encode_frame): "HMXF", the header's length (uint32, little-endian),
  // the JSON header padded to 8 bytes, then float64 arrays, each {"shape", "at"} record of the header viewed in
  // place (no copy, no base64 to decode).
  FRAME: "application/vnd.hardmax.frame",
  frame(buffer) {
    if (new TextDecoder().decode(new Uint8Array(buffer, 0, 4)) !== "HMXF") throw new Error("not a hardmax frame");
    const size = new DataView(buffer).getUint32(4, true);
    const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, size)));
    for (const [key, value] of Object.entries(header)) {
      if (value && Number.isInteger(value.at) && Array.isArray(value.shape)) {
        const count = value.shape.reduce((a, b) => a * b, 1);
        header[key] = { shape: value.shape, data: new Float64Array(buffer, 8 + size + value.at, count) };
      }
    }
    return header;
  },

  // point i of layer k of a decoded (layers + 1, n, p) array
  // (a path stops at the last layer where anything moved: later layers repeat it)
  point(arr, k, i) {
    const [stored, n, p] = arr.shape;
    k = Math.min(k, stored - 1);
    const o = (k * n + i) * p;
    return Array.from(arr.data.subarray(o, o + p));
  },

  embedded() { return window.HARDMAX_EMBEDDED || null; },

  async post(url, body, signal) {
    const response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json", "Accept": `${Hx.FRAME}, application/json` },
      body: JSON.stringify(body), signal,
    });
    let payload;
    try {
      const binary = (response.headers.get("Content-Type") || "").startsWith(Hx.FRAME);
      payload = binary ? Hx.frame(await response.arrayBuffer()) : await response.json();
    } catch (e) { payload = { error: `HTTP ${response.status}` }; }
    if (!response.ok) throw new Error(payload.error || `HTTP ${response.status}`);
    return payload;
  },

  async get(url) {
    const response = await fetch(url);
    const payload = await response.json();
    if (!response.ok) throw new Error(payload.error || `HTTP ${response.status}`);
    return payload;
  },

  message(text, kind) {
    const box = document.getElementById("message");
    box.textContent = text || "";
    box.className = text ? (kind || "error") : "";
  },

  // URL fragment <-> state object (values are strings)
  readHash() {
    const out = {};
    new URLSearchParams(location.hash.slice(1)).forEach((v, k) => { out[k] = v; });
    return out;
  },
  writeHash(state) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(state)) if (v !== undefined && v !== null) params.set(k, v);
    const hash = "#" + params.toString();
    if (location.protocol.startsWith("http") && location.hash !== hash) history.replaceState(null, "", hash);
  },

  // A view: data box [lo, hi] per axis mapped to the SVG's pixels, same scale on both axes.
  Frame: class {
    constructor(svg) { this.svg = svg; this.set([-2, -2], [2, 2]); }
    size() { const r = this.svg.getBoundingClientRect(); return [r.width || 600, r.height || 600]; }
    set(lo, hi) {
      const [w, h] = this.size();
      const span = Math.max(hi[0] - lo[0], (hi[1] - lo[1]) * w / h, 1e-12);
      this.scale = w / span;
      this.cx = (lo[0] + hi[0]) / 2; this.cy = (lo[1] + hi[1]) / 2;
    }
    fit(points) {  // points: array of [x, y]
      if (!points.length) return this.set([-2, -2], [2, 2]);
      let lo = [Infinity, Infinity], hi = [-Infinity, -Infinity];
      for (const [x, y] of points) { lo = [Math.min(lo[0], x), Math.min(lo[1], y)]; hi = [Math.max(hi[0], x), Math.max(hi[1], y)]; }
      const half = 0.6 * Math.max(hi[0] - lo[0], hi[1] - lo[1], 1e-9);
      const c = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2];
      this.set([c[0] - half, c[1] - half], [c[0] + half, c[1] + half]);
    }
    px([x, y]) { const [w, h] = this.size(); return [w / 2 + (x - this.cx) * this.scale, h / 2 - (y - this.cy) * this.scale]; }
    data([u, v]) { const [w, h] = this.size(); return [this.cx + (u - w / 2) / this.scale, this.cy - (v - h / 2) / this.scale]; }
  },

  // Orthographic view of R^3: yaw about the vertical axis, then pitch. rotate(p) -> [x, y, depth].
  Camera: class {
    constructor(yaw, pitch) { this.yaw = yaw; this.pitch = pitch; }
    rotate([x, y, z]) {
      const cy = Math.cos(this.yaw), sy = Math.sin(this.yaw), cp = Math.cos(this.pitch), sp = Math.sin(this.pitch);
      const x1 = cy * x + sy * y, y1 = -sy * x + cy * y;
      return [x1, cp * z - sp * y1, sp * z + cp * y1];
    }
    unrotate([u, v, w]) {  // inverse of rotate
      const cy = Math.cos(this.yaw), sy = Math.sin(this.yaw), cp = Math.cos(this.pitch), sp = Math.sin(this.pitch);
      const z = cp * v + sp * w, y1 = -sp * v + cp * w;
      return [cy * u - sy * y1, sy * u + cy * y1, z];
    }
  },

  starPath([u, v], r) {
    let d = "";
    for (let a = 0; a < 10; a++) {
      const rr = a % 2 ? r * 0.45 : r, t = -Math.PI / 2 + a * Math.PI / 5;
      d += (a ? "L" : "M") + (u + rr * Math.cos(t)).toFixed(2) + "," + (v + rr * Math.sin(t)).toFixed(2);
    }
    return d + "Z";
  },

  diamondPath([u, v], r) {
    return `M${u},${v - r}L${u + r},${v}L${u},${v + r}L${u - r},${v}Z`;
  },

  arrowMarker(svg) {
    const defs = Hx.el("defs", {}, svg);
    const marker = Hx.el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
      markerHeight: "7", orient: "auto-start-reverse" }, defs);
    Hx.el("path", { d: "M0,0L10,5L0,10z", fill: "#555" }, marker);
  },

  // A small line chart of series {name: [values]} into an SVG element, drawn at its current size; its viewBox
  // scales it with its container afterwards (the CSS gives it width 100%).
  chart(svg, series, xlabel) {
    svg.innerHTML = "";
    const w = svg.clientWidth || 320, h = svg.clientHeight || 140, m = 30;
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    const all = Object.values(series).flat().filter(Number.isFinite);
    if (!all.length) return;
    let lo = Infinity, hi = -Infinity, len = 0;  // (no spread: series may be long)
    for (const v of all) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    for (const values of Object.values(series)) len = Math.max(len, values.length);
    const X = (i) => m + (w - 1.5 * m) * (len > 1 ? i / (len - 1) : 0.5);
    const Y = (v) => h - m + (hi > lo ? -(h - 1.6 * m) * (v - lo) / (hi - lo) : -(h - 1.6 * m) / 2);
    Hx.el("line", { x1: m, y1: h - m, x2: w - m / 2, y2: h - m, stroke: "#999" }, svg);
    Hx.el("line", { x1: m, y1: h - m, x2: m, y2: m / 2, stroke: "#999" }, svg);
    const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    Object.entries(series).forEach(([name, values], s) => {
      const pts = values.map((v, i) => `${X(i).toFixed(1)},${Y(v).toFixed(1)}`).join(" ");
      Hx.el("polyline", { points: pts, fill: "none", stroke: colours[s % 4], "stroke-width": 2 }, svg);
      Hx.el("text", { x: w - m / 2, y: m / 2 + 12 * s, "text-anchor": "end", fill: colours[s % 4], "font-size": 11 }, svg).textContent = name;
    });
    Hx.el("text", { x: m, y: h - 8, "font-size": 10, fill: "#555" }, svg).textContent = xlabel;
    Hx.el("text", { x: 2, y: Y(hi) + 4, "font-size": 10, fill: "#555" }, svg).textContent = hi.toPrecision(3);
    Hx.el("text", { x: 2, y: Y(lo), "font-size": 10, fill: "#555" }, svg).textContent = lo.toPrecision(3);
  },
};
