// The vsplit console page: polls /api/state (every second while the run is live) and draws it.
// Every value goes into the page as text (textContent), never as HTML.
"use strict";
(function () {
  const charts = {};
  let view = "";
  const $ = (id) => document.getElementById(id);

  function text(id, value) { $(id).textContent = value == null ? "" : String(value); }

  function cell(row, value, cls) {
    const td = document.createElement("td");
    td.textContent = value == null ? "" : String(value);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function rows(tableId, items, fill) {
    const body = $(tableId).tBodies[0];
    body.replaceChildren();
    for (const item of items) { const tr = document.createElement("tr"); fill(tr, item); body.appendChild(tr); }
  }

  function kv(tableId, obj) {
    const entries = [];
    const walk = (prefix, value) => {
      if (value && typeof value === "object" && !Array.isArray(value)) {
        for (const [k, v] of Object.entries(value)) walk(prefix ? prefix + "." + k : k, v);
      } else if (!Array.isArray(value)) entries.push([prefix, value]);
    };
    walk("", obj || {});
    rows(tableId, entries, (tr, [k, v]) => { cell(tr, k); cell(tr, typeof v === "number" ? fmt(v) : v, "num"); });
  }

  function fmt(v) { return Number.isInteger(v) ? v.toLocaleString("en") : Number(v).toFixed(4); }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString("en-GB"); }

  function chart(id, data, labels, xLabel) {
    const el = $(id);
    el.dataset.points = String(data.length ? data[0].length : 0);
    if (!data.length || !data[0].length) return;
    const key = [xLabel, ...labels].join("|");
    if (!charts[id] || charts[id].vsplitKey !== key) {
      if (charts[id]) charts[id].destroy();
      const colors = ["#2864c8", "#d2642a", "#2a9d5c", "#8a44c0"];
      charts[id] = new uPlot({
        width: Math.min(540, window.innerWidth - 40), height: 220,
        scales: { x: { time: xLabel === "time" } },
        axes: [{ label: xLabel === "time" ? "" : xLabel }, {}],
        series: [{ label: xLabel }, ...labels.map((l, i) => ({ label: l, stroke: colors[i % 4], width: 2,
          points: { show: data[0].length < 60 } }))],
      }, data, el);
      charts[id].vsplitKey = key;
    } else {
      charts[id].setData(data);
    }
  }

  function draw(s) {
    text("party", s.party);
    text("identity", `role ${s.role} · topology ${s.topology || "?"} · run ${s.run_id || "?"} · ${s.mode}`);
    const status = $("status");
    status.textContent = s.status; status.className = "badge status-" + s.status;
    text("stage", s.stage ? "stage: " + s.stage : "");
    $("error").hidden = !s.error; text("error", s.error);

    rows("peers", s.peers, (tr, p) => {
      cell(tr, p.name); cell(tr, p.state, "badge state-" + p.state); cell(tr, p.fingerprint, "fp");
      cell(tr, p.history.map(([t, st]) => `${st} ${clock(t)}`).join(" → "));
    });

    const t = s.training || {};
    const parts = [];
    if (t.epoch != null) parts.push(`epoch ${t.epoch + 1}${t.epochs ? " of " + t.epochs : ""}`);
    else if (t.epochs) parts.push(`${t.epochs} epochs`);
    if (t.unit) parts.push(`${t.done ?? 0}${t.total ? " of " + t.total : ""} ${t.unit}`);
    else if (t.step) parts.push(`${t.step} steps`);
    if (t.kept != null) parts.push(`${t.kept} trees kept`);
    if (t.chosen_epoch != null) parts.push(`chosen epoch ${t.chosen_epoch + 1}`);
    if (s.role !== "label" && !(t.loss || []).length) parts.push("loss and metrics: at the label party");
    text("progress", parts.join(" · ") || "no training yet");
    const loss = t.loss || [];
    chart("loss-chart", loss.length ? [loss.map((p) => p[0]), loss.map((p) => p[1])] : [], [t.loss_name || "loss"],
          t.loss_x || "step");
    const hist = t.history || [];
    const keys = [...new Set(hist.flatMap((h) => Object.keys(h).filter((k) => k.startsWith("val_"))))];
    chart("val-chart", hist.length && keys.length
      ? [hist.map((h) => h.epoch + 1), ...keys.map((k) => hist.map((h) => h[k] == null ? null : h[k]))] : [],
      keys, "epoch");

    kv("psi", s.psi || {});
    rows("traffic", s.traffic || [], (tr, r) => {
      cell(tr, r.peer); cell(tr, r.direction); cell(tr, r.type); cell(tr, r.frames == null ? "" : fmt(r.frames), "num");
      cell(tr, fmt(r.bytes), "num");
    });
    rows("detectors", s.detectors || [], (tr, d) => {
      cell(tr, d.name); cell(tr, d.batches, "num"); cell(tr, d.last, "num");
      cell(tr, d.fired ? `yes, epoch ${d.where.epoch + 1} batch ${d.where.step}` : "no", d.fired ? "fired" : "");
    });
    rows("checkpoints", s.checkpoints || [], (tr, c) => { cell(tr, c.name); cell(tr, fmt(c.bytes), "num"); cell(tr, clock(c.time)); });

    const svc = s.service;
    $("service-section").hidden = !svc;
    if (svc) {
      kv("service", { version: svc.version, mode: svc.mode, health: svc.health, partners: svc.partners,
                      latency_ms: svc.latency_ms });
      const r = svc.requests_per_s || [];
      chart("rate-chart", r.length ? [r.map((p) => p[0]), r.map((p) => p[1])] : [], ["requests/s"], "time");
    }

    const o = s.outputs || {};
    const links = $("links"); links.replaceChildren();
    const named = [["report", o.report], ["model card", o.model_card], ["value report", o.value_report]];
    const rest = (o.documents || []).filter((f) => !named.some(([, n]) => n === f)).map((f) => [f, f]);
    for (const [name, file] of [...named, ...rest]) {
      if (!file) continue;
      const a = document.createElement("a");
      a.href = `/files/${s.view}/${file}`; a.textContent = name; a.target = "_blank"; a.rel = "noopener";
      links.appendChild(a); links.appendChild(document.createTextNode(" "));
    }
    kv("metrics", o.metrics ? { test: o.metrics } : {});
    kv("value", o.value ? { value: o.value } : {});
    const pics = $("pictures");
    const want = (o.pictures || []).map((p) => `/files/${s.view}/${p}`);
    if (pics.dataset.shown !== want.join(",")) {
      pics.replaceChildren(...want.map((src) => { const img = document.createElement("img"); img.src = src;
        img.alt = src.split("/").pop(); return img; }));
      pics.dataset.shown = want.join(",");
    }
    document.body.dataset.status = s.status;
  }

  async function load() {
    let again = 1000;
    try {
      const r = await fetch(`/api/state?view=${encodeURIComponent(view)}`, { cache: "no-store" });
      if (r.ok) {
        const s = await r.json();
        draw(s);
        if (s.mode === "finished") again = 0;
      }
    } catch (e) { /* the party's process has ended: keep the last picture, try again */ }
    if (again) setTimeout(load, again);
  }

  async function start() {
    try {
      const r = await fetch("/api/views", { cache: "no-store" });
      const names = (await r.json()).views || [];
      const pick = $("view");
      const asked = new URLSearchParams(location.search).get("view");
      view = names.includes(asked) ? asked : (names[0] || "");
      if (names.length > 1) {
        pick.hidden = false;
        pick.replaceChildren(...names.map((n) => { const o = document.createElement("option"); o.value = n;
          o.textContent = n; o.selected = n === view; return o; }));
        pick.onchange = () => { location.search = "?view=" + encodeURIComponent(pick.value); };
      }
    } catch (e) { /* shown by load() */ }
    load();
  }
  start();
})();
