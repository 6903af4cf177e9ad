// hardmax explorer, dynamics playground: edit tokens, α, A and the rule; the server simulates with the library
// (hardmax.simulate, leaders, K, S, check_theorem) and this page draws the answer.
"use strict";

const SHOW_KEYS = { trails: "t", leaders: "l", attention: "a", K: "K", S: "S", colour: "c" };
const S = {
  tokens: [], d: 2, alpha: 0.5, layers: 30, A: [[1, 0], [0, 1]], rule: "hardmax", causal: false, betaLog: 1, params: {}, k: 0,
  show: { trails: true, leaders: true, attention: false, K: true, S: true, colour: true }, yaw: 0.6, pitch: 0.5,
};
let data = null, path = null, stale = true, attention = {}, selected = -1, playing = null, pendingFit = true;
let seq = 0, controller = null, timer = null, inflight = 0, started = false, playWhenReady = false;
const embedded = Hx.embedded();
const svg = document.getElementById("plane");
const frame = new Hx.Frame(svg);
const $ = (id) => document.getElementById(id);

function beta() { return Number(Math.pow(10, S.betaLog).toPrecision(6)); }
function camera() { return new Hx.Camera(S.yaw, S.pitch); }
function project(p) { return S.d === 3 ? camera().rotate(p).slice(0, 2) : p; }

// The rules the server knows (GET /api/rules, from hardmax.dynamics.RULES): {name: [{name, required, default,
// low, high}]}. Until it answers (and in an exported view, which has no server) the two rules of the page's HTML.
let RULES = { hardmax: [{ name: "tie_rtol", required: false, default: null }],
  softmax: [{ name: "beta", required: true, default: null }] };
// Where a parameter without a default starts: β on its slider (betaLog), θ at 0.1, any other at 1.
const START = { theta: 0.1 };
function parameters(rule) { return RULES[rule] || []; }
function startValue(p) { return p.default !== null && p.default !== undefined ? p.default : (p.required ? (START[p.name] ?? 1) : null); }
function ruleFields(rule) {  // the rule's parameters as the request carries them (an empty optional one: left out)
  const out = {};
  for (const p of parameters(rule)) {
    if (p.name === "beta") out.beta = beta();
    else if (S.params[p.name] !== null && S.params[p.name] !== undefined && Number.isFinite(S.params[p.name])) out[p.name] = S.params[p.name];
  }
  return out;
}

function request() {
  return { tokens: S.tokens, alpha: S.alpha, layers: S.layers, A: S.A, rule: S.rule, causal: S.causal, ...ruleFields(S.rule) };
}

// ---- state <-> URL ---------------------------------------------------------------------------------
function saveHash() {
  Hx.writeHash({
    t: S.tokens.map((p) => p.join(",")).join(";"), a: S.alpha, L: S.layers, A: S.A.map((r) => r.join(",")).join(";"),
    r: S.rule, c: S.causal ? 1 : "", b: "beta" in ruleFields(S.rule) ? S.betaLog : "",
    P: Object.entries(ruleFields(S.rule)).filter(([k]) => k !== "beta").map(([k, v]) => `${k}:${v}`).join(";"), k: S.k,
    o: Object.entries(S.show).filter(([, v]) => v).map(([k]) => SHOW_KEYS[k]).join(""),
    cam: S.d === 3 ? `${S.yaw.toFixed(3)},${S.pitch.toFixed(3)}` : "",
  });
}

function loadHash(h) {
  const rows = (text) => text.split(";").filter(Boolean).map((r) => r.split(",").map(Number));
  if (h.t !== undefined) { S.tokens = rows(h.t); S.d = S.tokens.length ? S.tokens[0].length : S.d; }
  if (h.a) S.alpha = Number(h.a);
  if (h.L) S.layers = parseInt(h.L, 10);
  if (h.A) S.A = rows(h.A);
  if (h.r) S.rule = h.r;
  S.causal = h.c === "1";
  if (h.b) S.betaLog = Number(h.b);
  if (h.P) for (const kv of h.P.split(";")) { const [k, v] = kv.split(":"); if (k) S.params[k] = Number(v); }
  if (h.k) S.k = parseInt(h.k, 10);
  if (h.o !== undefined) for (const [k, c] of Object.entries(SHOW_KEYS)) S.show[k] = h.o.includes(c);
  if (h.cam) [S.yaw, S.pitch] = h.cam.split(",").map(Number);
  if (S.A.length !== S.d) S.A = identity(S.d);
}

function identity(d) { return Array.from({ length: d }, (_, i) => Array.from({ length: d }, (_, j) => (i === j ? 1 : 0))); }

// ---- controls ----------------------------------------------------------------------------------------
function buildMatrixEditor() {
  const table = $("A-editor");
  table.innerHTML = "";
  S.A.forEach((row, i) => {
    const tr = table.insertRow();
    row.forEach((v, j) => {
      const input = document.createElement("input");
      Object.assign(input, { type: "number", step: "0.1", value: v, id: `A-${i}-${j}` });
      input.addEventListener("change", () => {
        const x = Number(input.value);
        S.A[i][j] = x; S.A[j][i] = x;  // A stays symmetric: the mirrored entry follows
        const mirror = $(`A-${j}-${i}`); if (mirror) mirror.value = input.value;
        changed();
      });
      tr.insertCell().appendChild(input);
    });
  });
}

function syncControls() {
  $("alpha").value = S.alpha; $("layers").value = S.layers; $("rule").value = S.rule; $("causal").checked = S.causal;
  $("beta-log").value = S.betaLog; $("beta-value").textContent = beta();
  buildRuleControls();
  for (const k of Object.keys(SHOW_KEYS)) $(`show-${k}`).checked = S.show[k];
  $("count").textContent = `${S.tokens.length} token(s), d = ${S.d}`;
  buildMatrixEditor();
}

function buildRuleControls() {  // β's slider, and one numeric row per other parameter of the chosen rule
  const menu = $("rule");
  if (!parameters(S.rule).length && !RULES[S.rule]) RULES[S.rule] = [];  // (an exported view of another rule)
  if ([...menu.options].map((o) => o.value).join() !== Object.keys(RULES).join()) {
    menu.innerHTML = "";
    for (const name of Object.keys(RULES)) menu.add(new Option(name[0].toUpperCase() + name.slice(1), name));
  }
  menu.value = S.rule;
  const list = parameters(S.rule);
  $("beta-row").style.display = list.some((p) => p.name === "beta") ? "" : "none";
  const box = $("rule-parameters");
  box.innerHTML = "";
  for (const p of list) {
    if (p.name === "beta") continue;
    if (!(p.name in S.params)) S.params[p.name] = startValue(p);
    const label = document.createElement("label"), input = document.createElement("input");
    label.id = `param-row-${p.name}`;
    label.append(p.name === "theta" ? "θ " : `${p.name} `, input);
    Object.assign(input, { type: "number", step: "any", id: `param-${p.name}`, value: S.params[p.name] ?? "",
      placeholder: p.required ? "" : "default" });
    if (p.low !== undefined) { input.min = p.low; input.max = p.high; }
    input.addEventListener("change", () => { S.params[p.name] = input.value === "" ? null : Number(input.value); changed(); });
    box.appendChild(label);
  }
}

function changed({ fit = false } = {}) {
  stale = true; attention = {}; pendingFit = pendingFit || fit;
  S.k = Math.min(S.k, S.layers);
  saveHash(); render(); schedule();
}

function schedule() {
  if (embedded) return;
  clearTimeout(timer);
  timer = setTimeout(() => { timer = null; simulate(); }, 30);
}

async function simulate() {
  if (!S.tokens.length) { data = null; path = null; stale = false; Hx.message("Click the plane to add tokens.", "info"); render(); return; }
  if (controller) controller.abort();
  controller = new AbortController();
  const mine = ++seq, t0 = performance.now();
  document.body.dataset.state = "busy";
  inflight += 1;
  try {
    const asked = request();
    const answer = await Hx.post("/api/simulate", asked, controller.signal).finally(() => { inflight -= 1; });
    if (mine !== seq) return;
    const { tokens, alpha, layers, A, rule, ...fields } = asked;
    answer.fields = fields;  // what was asked of the rule: the attention requests repeat it
    accept(answer);
    const s = answer.seconds, ms = (x) => (1000 * (x || 0)).toFixed(0);
    $("status").textContent = `answered in ${(performance.now() - t0).toFixed(0)} ms (simulate ${ms(s.simulate)}, ` +
      `leaders/K/S ${ms(s.scene)}, theorem ${ms(s.theorem)} ms)`;
    Hx.message("");
    document.body.dataset.state = "ready";
  } catch (e) {
    if (e.name === "AbortError") return;
    if (mine !== seq) return;
    Hx.message(e.message, "error");
    $("status").textContent = "";
    document.body.dataset.state = "error";
  }
  document.body.dataset.seq = String(mine);
}

function accept(answer) {
  data = answer; path = Hx.decode(answer.path); stale = false; attention = {};
  $("layer").max = data.layers; S.k = Math.min(S.k, data.layers);
  if (pendingFit) { fitView(); pendingFit = false; }
  showTheorem(); showTokens();
  $("python").value = data.python || "";
  $("note").textContent = data.note || "";
  render(); loadAttention();
  if (playWhenReady) { playWhenReady = false; $("play").textContent = "▶"; togglePlay(); }
}

function fitView() {
  const pts = [];  // every stored layer once (a path stops at its last moving layer)
  const stored = path ? path.shape[0] : 0;
  if (path) for (let k = 0; k < stored; k++) for (let i = 0; i < path.shape[1]; i++) pts.push(Hx.point(path, k, i));
  else for (const p of S.tokens) pts.push(p);
  if (S.d === 3) {  // a box that holds every rotation: the bounding sphere of the points, about their centre
    const c = [0, 0, 0];
    for (const p of pts) for (let a = 0; a < 3; a++) c[a] += p[a] / Math.max(pts.length, 1);
    let r = 1e-9;
    for (const p of pts) r = Math.max(r, Math.hypot(p[0] - c[0], p[1] - c[1], p[2] - c[2]));
    centre3 = c; radius3 = r;
    placeFrame3();
  } else {
    for (const p of data ? data.vertices.concat(data.limit) : []) pts.push(p);
    frame.fit(pts);
  }
}

// In 3-D the view turns about the cloud's centre: the frame follows the centre's projection under the camera.
let centre3 = [0, 0, 0], radius3 = 2;
function placeFrame3() {
  const cc = project(centre3), r = 1.15 * radius3;
  frame.set([cc[0] - r, cc[1] - r], [cc[0] + r, cc[1] + r]);
}

function showTheorem() {
  const t = data.theorem, table = $("theorem-table"), verdict = $("verdict");
  table.innerHTML = "";
  if (!t) { verdict.textContent = "(hardmax only)"; verdict.className = ""; verdict.dataset.passed = ""; return; }
  verdict.textContent = t.passed ? "PASSED" : "FAILED";
  verdict.className = t.passed ? "pass" : "fail";
  verdict.dataset.passed = String(t.passed);
  const head = table.insertRow();
  for (const h of ["check", "value", "expected", "status"]) head.insertCell().outerHTML = `<th>${h}</th>`;
  t.checks.forEach((c) => {
    const row = table.insertRow();
    row.dataset.check = c.name;
    for (const v of [c.claim, c.value, c.expected, c.status]) row.insertCell().textContent = v;
    row.className = c.status.replace(" ", "-");
  });
}

function showTokens() {
  const table = $("token-table"), n = path.shape[1], L = data.layers;
  table.innerHTML = "<tr><th>i</th><th>start</th><th>layer K</th><th>limit cluster</th><th>leader from</th></tr>";
  $("token-count").textContent = n;
  for (let i = 0; i < n; i++) {
    const row = table.insertRow(), start = Hx.point(path, 0, i), end = Hx.point(path, L, i);
    row.dataset.i = i; row.dataset.final = JSON.stringify(end);
    row.dataset.label = data.labels[i]; row.dataset.leaderSince = data.leader_since[i];
    for (const v of [i, start.map((x) => x.toPrecision(4)).join(", "), end.map((x) => x.toPrecision(6)).join(", "),
      data.labels[i], data.leader_since[i] >= 0 ? data.leader_since[i] : "follower"]) row.insertCell().textContent = v;
  }
}

async function loadAttention() {
  if (!S.show.attention || !data || stale) return;
  const k = S.k;
  if (attention[k]) return render();
  if (embedded) {  // an exported view carries every stored layer's attention (the last repeats to the end)
    if (data.attention && data.attention.length) {
      attention[k] = data.attention[Math.min(k, data.attention.length - 1)];
      render();
    }
    return;
  }
  const tokens = Array.from({ length: path.shape[1] }, (_, i) => Hx.point(path, k, i));
  const asked = data, cache = attention;  // a reply counts only for the run it was asked about
  const body = { tokens, A: data.A, rule: data.rule, ...(data.fields || {}) };
  try {
    const answer = await Hx.post("/api/attention", body);
    if (asked === data && cache === attention && !stale) { attention[k] = answer; if (S.k === k) render(); }
  } catch (e) { if (asked === data) Hx.message(e.message, "error"); }
}

// ---- drawing -----------------------------------------------------------------------------------------
function positions(k) {
  if (!stale && path) return Array.from({ length: path.shape[1] }, (_, i) => Hx.point(path, k, i));
  return S.tokens;
}

function colourOf(i) {
  if (!S.show.colour || stale || !data) return "#4a4f63";
  return data.palette[data.labels[i] % data.palette.length];
}

function render() {
  svg.innerHTML = "";
  Hx.arrowMarker(svg);
  const k = stale ? 0 : S.k, Z = positions(k), n = Z.length;
  const layer = $("layer");
  layer.value = k;
  $("layer-label").textContent = `layer ${k} / ${data && !stale ? data.layers : S.layers}`;
  const px = (p) => frame.px(project(p));
  // axes through the origin
  const [w, h] = frame.size(), o = px(S.d === 3 ? [0, 0, 0] : [0, 0]);
  Hx.el("line", { x1: 0, y1: o[1], x2: w, y2: o[1], class: "axis" }, svg);
  Hx.el("line", { x1: o[0], y1: 0, x2: o[0], y2: h, class: "axis" }, svg);
  if (data && !stale) {
    if (S.show.K && data.vertices.length) {
      const V = data.vertices.map(px);
      if (S.d === 2 && data.k_dim === 2) {
        const c = V.reduce((a, p) => [a[0] + p[0] / V.length, a[1] + p[1] / V.length], [0, 0]);
        const order = V.slice().sort((p, q) => Math.atan2(p[1] - c[1], p[0] - c[0]) - Math.atan2(q[1] - c[1], q[0] - c[0]));
        Hx.el("polygon", { points: order.map((p) => p.join(",")).join(" "), class: "K" }, svg);
      } else {
        for (const [a, b] of data.edges) Hx.el("line", { x1: V[a][0], y1: V[a][1], x2: V[b][0], y2: V[b][1], class: "K-edge" }, svg);
      }
    }
    if (S.show.trails && k > 0) {
      for (let i = 0; i < n; i++) {
        const pts = [];
        for (let j = 0; j <= k; j++) pts.push(px(Hx.point(path, j, i)).map((x) => x.toFixed(1)).join(","));
        Hx.el("polyline", { points: pts.join(" "), class: "trail", stroke: colourOf(i) }, svg);
      }
    }
    if (S.show.attention && attention[k]) drawAttention(attention[k], Z, px);
    if (S.show.S) for (const p of data.limit) Hx.el("path", { d: Hx.diamondPath(px(p), 7), class: "S" }, svg);
  }
  const leading = (i) => data && !stale && S.show.leaders && data.leader_since[i] >= 0 && data.leader_since[i] <= k;
  const order = [...Array(n).keys()].sort((a, b) => leading(a) - leading(b));  // leaders drawn on top
  for (const i of order) {
    const p = px(Z[i]);
    const leads = data && !stale && S.show.leaders && data.leader_since[i] >= 0 && data.leader_since[i] <= k;
    const attrs = { "data-i": i, fill: colourOf(i), class: "token" + (i === selected ? " selected" : "") + (leads ? " leader" : "") };
    const shape = leads ? Hx.el("path", { ...attrs, d: Hx.starPath(p, 10) }, svg) : Hx.el("circle", { ...attrs, cx: p[0], cy: p[1], r: 5 }, svg);
    Hx.el("title", {}, shape).textContent = `token ${i}: (${Z[i].map((x) => x.toPrecision(5)).join(", ")})` + (leads ? ", leader" : "");
  }
}

function drawAttention(sets, Z, px) {
  const arrow = (i, j, opacity) => {
    if (i === j) return;
    const a = px(Z[i]), b = px(Z[j]), len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (len < 8) return;
    const t = (len - 7) / len;
    Hx.el("line", { x1: a[0], y1: a[1], x2: a[0] + t * (b[0] - a[0]), y2: a[1] + t * (b[1] - a[1]), class: "attention",
      "marker-end": "url(#arrow)", "stroke-opacity": opacity }, svg);
  };
  if (sets.sets) sets.sets.forEach((row, i) => row.forEach((j) => arrow(i, j, 0.8)));
  if (sets.weights) sets.weights.forEach((row, i) => row.forEach(([j, w]) => arrow(i, j, Math.max(0.15, w))));
}

// ---- interaction -------------------------------------------------------------------------------------
let drag = null;
function pointerData(ev) {
  const r = svg.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}

function toData(pix, depth) {
  const q = frame.data(pix);
  return S.d === 3 ? camera().unrotate([q[0], q[1], depth]) : q;
}

svg.addEventListener("pointerdown", (ev) => {
  const target = ev.target.closest("[data-i]");
  const pix = pointerData(ev);
  if (target && !embedded) {
    const i = Number(target.dataset.i);
    if (ev.shiftKey) { removeToken(i); return; }
    selected = i;
    if (S.k !== 0 || stale) { S.k = 0; }
    const depth = S.d === 3 ? camera().rotate(S.tokens[i])[2] : 0;
    drag = { kind: "token", i, depth, moved: false, start: pix };
  } else {
    drag = { kind: "background", start: pix, yaw: S.yaw, pitch: S.pitch, moved: false };
  }
  svg.setPointerCapture(ev.pointerId);
});

svg.addEventListener("pointermove", (ev) => {
  if (!drag) return;
  const pix = pointerData(ev);
  const far = Math.hypot(pix[0] - drag.start[0], pix[1] - drag.start[1]) > 3;
  if (!far && !drag.moved) return;
  drag.moved = true;
  if (drag.kind === "token") {
    S.tokens[drag.i] = toData(pix, drag.depth).map((x) => Number(x.toPrecision(6)));
    changed();
  } else if (S.d === 3) {
    S.yaw = drag.yaw + (pix[0] - drag.start[0]) * 0.01;
    S.pitch = Math.max(-1.5, Math.min(1.5, drag.pitch + (pix[1] - drag.start[1]) * 0.01));
    placeFrame3();
    saveHash(); render();
  }
});

svg.addEventListener("pointerup", (ev) => {
  if (drag && drag.kind === "background" && !drag.moved && !embedded) {
    S.tokens.push(toData(pointerData(ev), 0).map((x) => Number(x.toPrecision(6))));
    selected = S.tokens.length - 1;
    S.k = 0; syncControls(); changed();
  } else if (drag && drag.kind === "token") {
    render();
  }
  drag = null;
});

function removeToken(i) {
  S.tokens.splice(i, 1); selected = -1; syncControls(); changed();
}

document.addEventListener("keydown", (ev) => {
  if ((ev.key === "Delete" || ev.key === "Backspace") && selected >= 0 && document.activeElement === document.body) {
    removeToken(selected);
  }
});

function gaussian() {
  const u = 1 - Math.random(), v = Math.random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function setTokens(tokens) {
  S.tokens = tokens; S.d = tokens.length ? tokens[0].length : S.d; S.k = 0; selected = -1;
  if (S.A.length !== S.d) S.A = identity(S.d);
  syncControls(); changed({ fit: true });
}

function wire() {
  $("alpha").addEventListener("change", () => { S.alpha = Number($("alpha").value); changed(); });
  $("layers").addEventListener("change", () => { S.layers = parseInt($("layers").value, 10) || 0; $("layer").max = S.layers; changed(); });
  $("causal").addEventListener("change", () => { S.causal = $("causal").checked; changed(); });
  $("rule").addEventListener("change", () => { S.rule = $("rule").value; syncControls(); changed(); });
  $("beta-log").addEventListener("input", () => { S.betaLog = Number($("beta-log").value); $("beta-value").textContent = beta(); changed(); });
  for (const k of Object.keys(SHOW_KEYS)) {
    $(`show-${k}`).addEventListener("change", () => { S.show[k] = $(`show-${k}`).checked; saveHash(); render(); loadAttention(); });
  }
  $("layer").addEventListener("input", () => {
    if (stale) { $("layer").value = 0; return; }  // the layers of an edit are not in yet
    S.k = parseInt($("layer").value, 10); saveHash(); render(); loadAttention();
  });
  $("back").addEventListener("click", () => step(-1));
  $("forward").addEventListener("click", () => step(1));
  $("play").addEventListener("click", togglePlay);
  $("fit").addEventListener("click", () => { fitView(); render(); });
  $("clear").addEventListener("click", () => setTokens([]));
  $("random").addEventListener("click", () => {
    const n = Math.max(1, Math.min(400, parseInt($("random-n").value, 10) || 1)), d = parseInt($("random-d").value, 10);
    setTokens(Array.from({ length: n }, () => Array.from({ length: d }, () => Number(gaussian().toPrecision(6)))));
  });
  $("preset").addEventListener("change", () => {
    const chosen = presets[$("preset").value];
    if (chosen) { S.A = identity(2); S.alpha = 0.5; setTokens(chosen.tokens.map((p) => p.slice())); }
  });
  $("copy-python").addEventListener("click", async () => {
    const area = $("python");
    try { await navigator.clipboard.writeText(area.value); } catch (e) { area.select(); document.execCommand("copy"); }
    Hx.message("Copied the hardmax.simulate(...) call.", "info");
  });
  $("export").addEventListener("click", exportView);
  window.addEventListener("resize", () => render());
  // A link pasted into this tab changes only the fragment: load its state (the page's own writes do not fire this).
  window.addEventListener("hashchange", () => {
    if (embedded) return;
    loadHash(Hx.readHash());
    S.d = S.tokens.length ? S.tokens[0].length : S.d;
    if (S.A.length !== S.d) S.A = identity(S.d);
    selected = -1; syncControls(); changed({ fit: true });
  });
}

function step(delta) {
  if (stale) return;  // the layers of an edit are not in yet
  const L = data ? data.layers : 0;
  S.k = Math.max(0, Math.min(L, S.k + delta)); saveHash(); render(); loadAttention();
}

function togglePlay() {
  if (playing) { clearInterval(playing); playing = null; $("play").textContent = "▶"; return; }
  if (stale) { playWhenReady = true; $("play").textContent = "…"; return; }  // plays once the edit's run is in
  const L = data && !stale ? data.layers : 0;
  if (S.k >= L) S.k = 0;
  $("play").textContent = "❚❚";
  playing = setInterval(() => {
    const last = data && !stale ? data.layers : 0;
    if (S.k >= last) { togglePlay(); document.body.dataset.played = "end"; return; }
    S.k += 1; saveHash(); render(); loadAttention();
  }, Math.max(16, Math.min(150, 3000 / Math.max(1, (data && data.layers) || 1))));
}

async function exportView() {
  try {
    const response = await fetch("/api/export", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ page: "playground", request: request(), state: location.hash.slice(1) }) });
    if (!response.ok) throw new Error((await response.json()).error);
    const url = URL.createObjectURL(await response.blob());
    const a = Object.assign(document.createElement("a"), { href: url, download: "hardmax-playground.html" });
    document.body.appendChild(a); a.click(); a.remove();
  } catch (e) { Hx.message(e.message, "error"); }
}

let presets = {};
async function start() {
  wire();
  if (embedded) {
    const d0 = embedded.data;
    document.body.classList.add("embedded");
    loadHash(Object.fromEntries(new URLSearchParams(embedded.state || "")));
    S.d = d0.shown || d0.d; S.A = d0.A; S.alpha = d0.alpha[0]; S.layers = d0.layers; S.rule = d0.rule;
    const p0 = Hx.decode(d0.path);
    S.tokens = Array.from({ length: p0.shape[1] }, (_, i) => Hx.point(p0, 0, i));
    syncControls(); pendingFit = true; accept(d0);
    for (const id of ["edit-controls", "dynamics-controls"]) $(id).disabled = true;
    if (!d0.attention) {
      $("show-attention").disabled = true;
      $("show-attention").parentNode.title = d0.d > 3 || d0.d < 2 ? "drawn in projection: the sets are of R^" + d0.d
        : "not embedded: too many tokens × layers for one file";
    }
    $("export").hidden = true;
    $("hint").textContent = "Exported view: play the layers back; edit with `hardmax explore`.";
    $("status").textContent = "exported view (read-only, offline)";
    document.body.dataset.state = "ready";
    started = true;
    return;
  }
  try {
    RULES = Object.fromEntries((await Hx.get("/api/rules")).rules.map((r) => [r.name, r.parameters]));
  } catch (e) { Hx.message(e.message); }
  try {
    presets = await Hx.get("/api/presets");
    for (const [name, p] of Object.entries(presets)) $("preset").add(new Option(p.title, name));
  } catch (e) { Hx.message(e.message); }
  const h = Hx.readHash();
  loadHash(h);  // a shared link's state (its tokens may be none: t=)
  if (h.t === undefined) S.tokens = (presets.dyadic_non_leader_clusters || { tokens: [[1, 1], [-1, 1], [-1, -1], [1, -1], [0.5, 0], [-0.5, 0]] }).tokens;
  S.d = S.tokens.length ? S.tokens[0].length : 2;
  if (S.A.length !== S.d) S.A = identity(S.d);
  syncControls(); changed({ fit: true });
  started = true;
}

// For tests and the console: the page's state, and whether every edit has been answered.
window.explorer = { state: S, idle: () => started && timer === null && inflight === 0, view: () => data, attention: () => attention };
start();
