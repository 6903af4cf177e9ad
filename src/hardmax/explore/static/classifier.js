// hardmax explorer, classifier: a trained run reads a review; the server explains it with the library
// (explain_text, project_review, attention sets, coding rates, the Att-SVM token) and this page draws it.
"use strict";

const C = { run: "", text: "", k: null, decisive: 2 };
let view = null, points = null, hover = -1, playing = null, timer = null, controller = null, seq = 0, started = false;
const embedded = Hx.embedded();
const svg = document.getElementById("plane");
const frame = new Hx.Frame(svg);
const $ = (id) => document.getElementById(id);

function saveHash() { Hx.writeHash({ run: C.run, text: C.text, k: C.k, decisive: C.decisive }); }

function schedule(delay) {
  if (embedded) return;
  clearTimeout(timer);
  timer = setTimeout(() => { timer = null; explain(); }, delay);
}

async function explain() {
  C.run = $("run").value; C.text = $("text").value; C.decisive = Number($("decisive").value);
  saveHash();
  if (!C.run) { Hx.message("No trained run found: start the server with --runs DIR (train one with `hardmax train`).", "error"); return; }
  if (controller) controller.abort();
  controller = new AbortController();
  const mine = ++seq, t0 = performance.now();
  document.body.dataset.state = "busy";
  try {
    const answer = await Hx.post("/api/review", { run: C.run, text: C.text, decisive: C.decisive }, controller.signal);
    if (mine !== seq) return;
    accept(answer);
    $("status").textContent = `answered in ${(performance.now() - t0).toFixed(0)} ms (server ${(1000 * answer.seconds).toFixed(0)} ms)`;
    Hx.message("");
    document.body.dataset.state = "ready";
  } catch (e) {
    if (e.name === "AbortError" || mine !== seq) return;
    Hx.message(e.message, "error"); document.body.dataset.state = "error";
  }
}

function accept(answer) {
  view = answer; hover = -1;
  const crate = view.kind === "crate";
  $("crate-view").hidden = !crate; $("rate-view").hidden = crate; $("svm-view").hidden = crate;
  const p = view.probability;
  const pred = $("prediction");
  pred.innerHTML = "";
  const label = Object.assign(document.createElement("span"), { id: "label", className: view.label, textContent: view.label });
  const classes = view.classes || ["negative", "positive"];
  const binary = classes.length === 2;
  pred.append(label, ` — P(${binary ? classes[1] : view.label}) = `);
  pred.append(Object.assign(document.createElement("span"), { id: "p-hardmax", textContent: p.hardmax.toFixed(3) }),
    " under hardmax, ",
    Object.assign(document.createElement("span"), { id: "p-softmax", textContent: p.softmax.toFixed(3) }),
    crate ? " under softmax" : ` under softmax (β = ${view.beta})`);
  pred.dataset.hardmax = p.hardmax; pred.dataset.softmax = p.softmax;
  $("summary").textContent = view.summary || "";
  if (crate) {  // CRATE blocks are not the paper's layer: their measures, no plane
    showCrate(); points = null; svg.innerHTML = ""; words();
    $("axes").textContent = "CRATE run: compression and sparsity per block (right); the plane shows the paper's layer only.";
    $("layer").max = 0; $("layer-label").textContent = "";
    return;
  }
  points = Hx.decode(view.points);
  $("layer").max = view.layers;
  if (C.k === null || C.k > view.layers) C.k = view.layers;
  $("axes").textContent = binary
    ? `d = ${view.d}: ${view.axes}; dashed: the decision line v·x + b = 0 (green side ${classes[1]}).`
    : `d = ${view.d}: ${view.axes}; dashed: the decision between ${view.label} and the runner-up class (green side ${view.label}).`;
  $("svm-view").hidden = !view.svm;
  if (view.svm) $("svm").innerHTML = `selected token: <b id="svm-word">${escapeHtml(view.svm.word)}</b> (${escapeHtml(view.svm.rule)})`;
  Hx.chart($("rate"), { "R": view.rate.rate, "R / RMS²-scaled": view.rate.rate_scaled }, `layer (ε = ${view.rate.eps})`);
  fit(); words(); render();
}

function escapeHtml(s) { const d = document.createElement("div"); d.textContent = s; return d.innerHTML; }

function showCrate() {
  const c = view.crate, t = $("crate");
  t.innerHTML = "<tr><th>block</th><th>R^c(Z|U) in</th><th>R^c after MSSA</th><th>zeros after ISTA</th><th>R</th></tr>";
  c.sparsity.forEach((s, i) => {
    const row = t.insertRow();
    for (const v of [i + 1, c.compression[i].toFixed(3), c.compression_after[i].toFixed(3), (100 * s).toFixed(1) + " %", c.rate[i + 1].toFixed(3)]) row.insertCell().textContent = v;
  });
}

function fit() {
  const pts = [];
  for (let k = 0; k <= view.layers; k++) for (let i = 0; i < points.shape[1]; i++) pts.push(Hx.point(points, k, i));
  frame.fit(pts);
}

function words() {
  const box = $("words");
  box.innerHTML = "";
  const leaders = new Set(view.leaders || []), decisive = new Set(view.decisive || []);
  view.words.forEach((w, i) => {
    const span = document.createElement("span");
    span.textContent = view.multiplicity && view.multiplicity[i] > 1 ? `${w}×${view.multiplicity[i]}` : w;
    span.dataset.i = i;
    if (leaders.has(i)) span.classList.add("leader");
    if (decisive.has(i)) span.classList.add("decisive");
    if (view.word_logits) span.title = `logit ${view.word_logits[i].toFixed(2)}`;
    span.addEventListener("mouseenter", () => { hover = i; render(); });
    span.addEventListener("mouseleave", () => { hover = -1; render(); });
    box.appendChild(span);
  });
}

function render() {
  if (!view || !points) return;
  svg.innerHTML = "";
  Hx.arrowMarker(svg);
  const k = C.k, n = points.shape[1], [w, h] = frame.size();
  $("layer").value = k; $("layer-label").textContent = `layer ${k} / ${view.layers}`;
  // half-planes and the decision line normal·x + offset = 0, clipped to the view
  const [nx, ny] = view.normal, b = view.offset;
  const corners = [[0, 0], [w, 0], [w, h], [0, h]].map((c) => frame.data(c));
  const side = (p) => nx * p[0] + ny * p[1] + b;
  for (const [cls, sign] of [["half-positive", 1], ["half-negative", -1]]) {
    const poly = clip(corners, (p) => sign * side(p));
    if (poly.length) Hx.el("polygon", { points: poly.map((p) => frame.px(p).join(",")).join(" "), class: cls }, svg);
  }
  const line = clip(corners, side).filter((p) => Math.abs(side(p)) < 1e-9 * (Math.abs(b) + 1));
  if (line.length >= 2) { const [a, c] = [frame.px(line[0]), frame.px(line[1])]; Hx.el("line", { x1: a[0], y1: a[1], x2: c[0], y2: c[1], class: "decision" }, svg); }
  const leaders = new Set(view.leaders), decisive = new Set(view.decisive);
  const P = Array.from({ length: n }, (_, i) => Hx.point(points, k, i));
  if (hover >= n) hover = -1;
  if ($("show-follows").checked) {  // each follower tied to the leader whose attention set it joined
    for (const [leader, members] of Object.entries(view.follows)) {
      const a = frame.px(P[Number(leader)]);
      for (const j of members) {
        if (j === Number(leader)) continue;
        const c = frame.px(P[j]);
        Hx.el("line", { x1: c[0], y1: c[1], x2: a[0], y2: a[1], class: "follow" }, svg);
      }
    }
  }
  if (hover >= 0) {
    const pts = [];
    for (let j = 0; j <= view.layers; j++) pts.push(frame.px(Hx.point(points, j, hover)).join(","));
    Hx.el("polyline", { points: pts.join(" "), class: "trail", stroke: "#3b5bdb", "stroke-width": 2 }, svg);
    for (const j of view.sets[k][hover]) {
      if (j === hover) continue;
      const a = frame.px(P[hover]), c = frame.px(P[j]);
      Hx.el("line", { x1: a[0], y1: a[1], x2: c[0], y2: c[1], class: "attention", "marker-end": "url(#arrow)" }, svg);
    }
  }
  const order = [...Array(n).keys()].sort((a, c) => leaders.has(a) - leaders.has(c));  // leaders drawn on top
  for (const i of order) {
    const p = frame.px(P[i]), lead = leaders.has(i);
    const colour = view.layer_logits[k][i] > 0 ? "#2b8a3e" : "#c92a2a";  // the side it is on at this layer
    const attrs = { "data-i": i, fill: colour, class: "token" + (lead ? " leader" : "") + (i === hover ? " selected" : "") };
    const shape = lead ? Hx.el("path", { ...attrs, d: Hx.starPath(p, decisive.has(i) ? 12 : 9) }, svg)
      : Hx.el("circle", { ...attrs, cx: p[0], cy: p[1], r: 4 }, svg);
    shape.addEventListener("mouseenter", () => { hover = i; render(); });
    shape.addEventListener("mouseleave", () => { hover = -1; render(); });
    Hx.el("title", {}, shape).textContent = `${view.words[i]} (logit ${view.layer_logits[k][i].toFixed(2)} at layer ${k}, ` +
      `${view.word_logits[i].toFixed(2)} at the last)` +
      (lead ? ", leader" : "") + `; attends to: ${view.sets[k][i].map((j) => view.words[j]).join(", ")}`;
    if (lead || i === hover) Hx.el("text", { x: p[0] + 8, y: p[1] - 6, class: "word-label" }, svg).textContent = view.words[i];
  }
}

// Sutherland–Hodgman: the part of a convex polygon where f(p) >= 0 (f affine)
function clip(poly, f) {
  const out = [];
  for (let i = 0; i < poly.length; i++) {
    const a = poly[i], c = poly[(i + 1) % poly.length], fa = f(a), fc = f(c);
    if (fa >= 0) out.push(a);
    if ((fa >= 0) !== (fc >= 0)) { const t = fa / (fa - fc); out.push([a[0] + t * (c[0] - a[0]), a[1] + t * (c[1] - a[1])]); }
  }
  return out;
}

function step(delta) { if (!view) return; C.k = Math.max(0, Math.min(view.layers, C.k + delta)); saveHash(); render(); }

function togglePlay() {
  if (playing) { clearInterval(playing); playing = null; $("play").textContent = "▶"; return; }
  if (!view) return;
  if (C.k >= view.layers) C.k = 0;
  $("play").textContent = "❚❚";
  playing = setInterval(() => { if (C.k >= view.layers) { togglePlay(); return; } C.k += 1; saveHash(); render(); }, 400);
}

async function exportView() {
  try {
    const response = await fetch("/api/export", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ page: "classifier", request: { run: C.run, text: C.text, decisive: C.decisive }, state: location.hash.slice(1) }) });
    if (!response.ok) throw new Error((await response.json()).error);
    const url = URL.createObjectURL(await response.blob());
    const a = Object.assign(document.createElement("a"), { href: url, download: "hardmax-classifier.html" });
    document.body.appendChild(a); a.click(); a.remove();
  } catch (e) { Hx.message(e.message, "error"); }
}

async function start() {
  $("layer").addEventListener("input", () => { C.k = parseInt($("layer").value, 10); saveHash(); render(); });
  $("back").addEventListener("click", () => step(-1));
  $("forward").addEventListener("click", () => step(1));
  $("play").addEventListener("click", togglePlay);
  $("explain").addEventListener("click", () => explain());
  $("text").addEventListener("input", () => schedule(400));
  $("run").addEventListener("change", () => schedule(0));
  $("decisive").addEventListener("change", () => schedule(0));
  $("show-follows").addEventListener("change", () => render());
  $("export").addEventListener("click", exportView);
  window.addEventListener("resize", () => { if (view && points) { fit(); render(); } });
  if (embedded) {
    document.body.classList.add("embedded");
    const h = Object.fromEntries(new URLSearchParams(embedded.state || ""));
    C.k = h.k ? parseInt(h.k, 10) : null;
    $("run").add(new Option(embedded.data.run, embedded.data.run));
    $("edit-controls").disabled = true; $("export").hidden = true;
    $("status").textContent = "exported view (read-only, offline)";
    accept(embedded.data);
    document.body.dataset.state = "ready";
    started = true;
    return;
  }
  const h = Hx.readHash();
  if (h.text) $("text").value = h.text;
  if (h.k) C.k = parseInt(h.k, 10);
  if (h.decisive) $("decisive").value = h.decisive;
  try {
    const { runs } = await Hx.get("/api/runs");
    for (const r of runs) $("run").add(new Option(`${r.name} (d = ${r.d}, ${r.kind})`, r.name));
    if (h.run && runs.some((r) => r.name === h.run)) $("run").value = h.run;
    if (runs.length) explain();
    else Hx.message("No trained run found under --runs: train one with `hardmax train --run runs/d2 --d 2`, then restart.", "error");
  } catch (e) { Hx.message(e.message, "error"); }
  started = true;
}

window.explorer = { state: C, idle: () => started && timer === null && document.body.dataset.state !== "busy", view: () => view };
start();
