// hardmax explorer: a pretrained transformer's layers and heads for a text (POST /api/pretrained). The page draws
// what the server computed; it computes nothing itself.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  let view = null, busy = false, chosen = null;
  const fmt = (x) => (x === null || x === undefined ? "" : typeof x === "number" ? x.toFixed(3) : String(x));

  function setMessage(text, kind) { const m = $("message"); m.textContent = text || ""; m.className = kind || ""; }

  function cell(row, text, tag = "td") { const c = document.createElement(tag); c.textContent = text; row.appendChild(c); return c; }

  function drawLayers() {
    const table = $("layers"); table.replaceChildren();
    const columns = ["layer", "mean_cosine", "clusters", "effective_rank", "rate", "compression", "delta_rate",
                     "leaders", "mass_on_C", "entropy", "margin", "mlp_inactive"];
    const head = document.createElement("tr"); columns.forEach((c) => cell(head, c, "th")); table.appendChild(head);
    view.layers.forEach((r) => {
      const tr = document.createElement("tr"); tr.dataset.layer = r.layer;
      columns.forEach((c) => { const td = cell(tr, c === "layer" ? String(r[c]) : fmt(r[c])); td.dataset.key = c; });
      table.appendChild(tr);
    });
  }

  function drawHeads() {
    const table = $("heads"); table.replaceChildren();
    const H = view.model.heads, top = document.createElement("tr");
    cell(top, "layer \\ head", "th"); for (let h = 0; h < H; h++) cell(top, String(h), "th"); table.appendChild(top);
    for (let l = 1; l <= view.model.layers; l++) {
      const tr = document.createElement("tr"); cell(tr, String(l), "th");
      for (let h = 0; h < H; h++) {
        const row = view.heads[(l - 1) * H + h];
        const word = row.top_tokens.length ? row.top_tokens[0][0] : "";
        const td = cell(tr, word); td.dataset.layer = l; td.dataset.head = h;
        td.title = `mass on C_i ${fmt(row.mass_on_C)}, entropy ${fmt(row.entropy)}, margin ${fmt(row.margin)}`;
        td.style.background = `rgba(240, 140, 0, ${Math.min(0.6, row.mass_on_C * 0.6).toFixed(3)})`;
        td.addEventListener("click", () => choose(l, h));
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
  }

  function choose(l, h) {
    chosen = [l, h];
    document.querySelectorAll("#heads td").forEach((td) => td.classList.toggle(
      "chosen", Number(td.dataset.layer) === l && Number(td.dataset.head) === h));
    const picks = view.selections[l - 1][h], counts = new Map();
    picks.forEach((j) => counts.set(j, (counts.get(j) || 0) + 1));
    const sentence = $("sentence"); sentence.replaceChildren();
    view.tokens.forEach((w, i) => {
      const s = document.createElement("span"); s.textContent = w; s.dataset.i = i;
      s.dataset.selects = picks[i]; s.title = `${w} selects ${view.tokens[picks[i]]}`;
      if (counts.has(i)) { s.classList.add("target"); s.dataset.count = counts.get(i); }
      sentence.appendChild(s);
    });
    $("head-hint").textContent = `layer ${l}, head ${h}: highlighted words are selected (argmax of the scores) by ` +
      "some token; hover a word to see the word it selects.";
  }

  function draw() {
    $("title").textContent = `Layers of ${view.model.name} (${view.tokens.length} tokens` +
      (view.truncated ? `, truncated at ${view.max_length}` : "") + ")";
    drawLayers(); drawHeads(); choose(1, 0);
    $("model").textContent = `${view.model.name} (${view.model.family}): ${view.model.layers} layers, ` +
      `${view.model.heads} heads, width ${view.model.width}`;
    const run = view.head_run;
    $("run").textContent = `layer ${run.layer} head ${run.head}, ${run.steps} steps: ${run.clusters.length} cluster(s)\n` +
      run.clusters.slice(0, 5).map((c) => `  ${c.size} tokens around "${c.around}"`).join("\n") +
      `\nthe head's own selections: ${run.selections.slice(0, 5).map((s) => s[0] + " (" + s[1] + ")").join(", ")}` +
      (run.note ? `\n${run.note}` : "");
  }

  async function inspect() {
    busy = true; document.body.dataset.state = "busy"; setMessage("inspecting…", "info");
    try {
      const answer = await fetch("/api/pretrained", { method: "POST", headers: { "content-type": "application/json" },
                                                      body: JSON.stringify({ text: $("text").value }) });
      const body = await answer.json();
      if (!answer.ok) { setMessage(body.error || `HTTP ${answer.status}`, "error"); return; }
      view = body; draw(); setMessage("");
    } catch (e) {
      setMessage(String(e), "error");
    } finally {
      busy = false; document.body.dataset.state = "idle";
    }
  }

  $("inspect").addEventListener("click", inspect);
  window.explorer = { idle: () => !busy, view: () => view, choose };
})();
