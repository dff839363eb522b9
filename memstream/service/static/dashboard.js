// memstream's dashboard: fetches api/summary every 2 s and draws its charts (SVG) and tables.
// Every number shown carries data-metric (and data-group, data-value: the figure unformatted);
// body[data-rendered] is set, in ms since navigation start, once the first summary is drawn.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const KEEP_POINTS = 300;
  const SVG = "http://www.w3.org/2000/svg";
  const PALETTE = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#db2777",
                   "#65a30d", "#475569", "#ea580c", "#0d9488", "#9333ea"];
  const GROUPED = ["events_out", "lag_entries", "lag_seconds", "freshness_p50", "freshness_p95", "dead_letters"];
  const SINGLE = ["redis_up", "events_in", "query_p50", "query_p95", "agents_active", "spool_backlog"];

  let history = null;
  let summary = null;
  let failingSince = null;
  let showRetired = false;  // retired versions fold away (table rows and chart lines) until asked for
  const colours = new Map();

  // -- formatting for people -----------------------------------------------------------------
  const grouped = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const known = (v) => v !== null && v !== undefined && Number.isFinite(v);

  function count(v) {
    return known(v) ? grouped.format(v) : "—";
  }
  function compact(v) {
    if (!known(v)) return "—";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    return grouped.format(v);
  }
  function rate(v) {
    if (!known(v)) return "—";
    if (v === 0) return "0 /s";
    if (Math.abs(v) < 10) return (Number.isInteger(v) ? String(v) : v.toFixed(1)) + " /s";
    return compact(v) + " /s";
  }
  const trim = (text) => (text.includes(".") ? text.replace(/\.?0+$/, "") : text);  // 2.50 -> 2.5, 5.0 -> 5
  function seconds(v) {
    if (!known(v)) return "—";
    if (v === 0) return "0 s";
    if (v < 0.01) return trim((v * 1000).toFixed(v < 0.001 ? 2 : 1)) + " ms";  // an axis's 2.5 ms, not 3 ms
    if (v < 1) return Math.round(v * 1000) + " ms";
    if (v < 60) return trim(v.toFixed(v < 10 ? 1 : 0)) + " s";
    if (v < 3600) return two(Math.floor(v / 60), "min", Math.round(v % 60), "s");
    if (v < 86400) return two(Math.floor(v / 3600), "h", Math.round((v % 3600) / 60), "min");
    return two(Math.floor(v / 86400), "d", Math.round((v % 86400) / 3600), "h");
  }
  function two(a, unit, b, smaller) {  // 5 min, 3 min 20 s (a rounded remainder of 0 is not shown)
    return a + " " + unit + (b ? " " + b + " " + smaller : "");
  }
  function bytes(v) {
    if (!known(v)) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
  }
  function percent(v) {
    return known(v) ? (v * 100).toFixed(v < 0.1 ? 1 : 0) + "%" : "—";
  }
  window.memstreamFormat = { count, compact, rate, seconds, bytes, percent };  // for the page's tests

  function clock(t) {
    const d = new Date(t * 1000);
    return d.toLocaleTimeString("en-GB", { hour12: false });
  }

  // -- DOM helpers (text only: no label from the server is ever parsed as HTML) ---------------
  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) node.setAttribute(k, String(v));
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function metric(tag, name, group, value, text, extra) {
    const attrs = Object.assign({ "data-metric": name, "data-value": known(value) ? value : (value === null || value === undefined ? "null" : value) }, extra || {});
    if (group !== null && group !== undefined) attrs["data-group"] = group;
    if (!known(value) && typeof value !== "string") attrs.title = "unknown";
    return el(tag, attrs, text);
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }
  function colour(key) {
    if (!colours.has(key)) colours.set(key, PALETTE[colours.size % PALETTE.length]);
    return colours.get(key);
  }
  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  // -- history: the columns of api/summary, appended with ?since= ------------------------------
  function merge(into, more) {
    if (!into) return more;
    const before = into.t.length;
    const added = more.t.length;
    into.t = into.t.concat(more.t);
    for (const f of SINGLE) into[f] = (into[f] || new Array(before).fill(null)).concat(more[f] || new Array(added).fill(null));
    for (const f of GROUPED) {
      const target = into[f] || (into[f] = {});
      const source = more[f] || {};
      for (const g of new Set([...Object.keys(target), ...Object.keys(source)])) {
        target[g] = (target[g] || new Array(before).fill(null)).concat(source[g] || new Array(added).fill(null));
      }
    }
    const drop = into.t.length - KEEP_POINTS;
    if (drop > 0) {
      into.t = into.t.slice(drop);
      for (const f of SINGLE) into[f] = into[f].slice(drop);
      for (const f of GROUPED) {
        for (const g of Object.keys(into[f])) {
          into[f][g] = into[f][g].slice(drop);
          if (into[f][g].every((v) => v === null)) delete into[f][g];
        }
      }
    }
    return into;
  }

  // -- charts ----------------------------------------------------------------------------------
  // a round step for about four gridlines up to v (whole numbers for counts)
  // steps of a time axis past a minute: whole minutes and hours, as a clock reads them
  const TIME_STEPS = [60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  function niceStep(v, whole, time) {
    const raw = v > 0 ? v / 4 : 0.25;
    if (time && raw > 30) {
      for (const step of TIME_STEPS) if (step >= raw) return step;
      return Math.ceil(raw / 86400) * 86400;
    }
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = 10 * p;
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) { step = m * p; break; }
    return whole ? Math.max(1, Math.round(step)) : step;
  }

  // the width of a tick's text, measured in the page's font (so that no label is clipped)
  let ruler = null;
  function textWidth(text) {
    if (!ruler) {
      ruler = document.createElement("canvas").getContext("2d");
      ruler.font = "11px " + getComputedStyle(document.body).fontFamily;
    }
    return ruler.measureText(text).width;
  }

  // series: [{key, label, colour, values, dash, bold, group, metric, last, hideLegend}]
  // opts: {whole: counts on the y axis, time: seconds on the y axis, empty: the text shown instead of the chart}
  function chart(id, times, series, fmt, opts) {
    const empty = opts && opts.empty;
    const fig = document.getElementById(id);
    const box = fig.querySelector("svg");
    const legend = fig.querySelector(".legend");
    const width = Math.max(240, Math.round(box.getBoundingClientRect().width) || 420);
    const height = 170;
    const m = { l: 40, r: 10, t: 8, b: 22 };
    box.setAttribute("viewBox", `0 0 ${width} ${height}`);
    box.setAttribute("height", height);
    const nodes = [];
    const values = series.flatMap((s) => s.values.filter(known));
    if (empty || !times.length || !values.length) {
      nodes.push(Object.assign(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "none" }),
        { textContent: empty || "no data yet" }));
      box.replaceChildren(...nodes);
      legend.replaceChildren();
      fig.classList.toggle("quiet", true);
      return;
    }
    fig.classList.toggle("quiet", false);
    const t1 = times[times.length - 1];
    const t0 = Math.min(times[0], t1 - 60);
    const highest = Math.max(...values);
    const step = niceStep(highest, opts && opts.whole, opts && opts.time);
    const top = Math.max(step, Math.ceil(highest / step - 1e-9) * step);
    const ticks = [];
    for (let v = 0, i = 0; v <= top + step / 1e6; v = step * ++i) ticks.push([v, fmt(v)]);
    m.l = Math.max(m.l, Math.ceil(Math.max(...ticks.map(([, text]) => textWidth(text)))) + 12);  // the widest label fits
    const x = (t) => m.l + ((t - t0) / Math.max(1, t1 - t0)) * (width - m.l - m.r);
    const y = (v) => m.t + (1 - v / top) * (height - m.t - m.b);
    ticks.forEach(([v, text], i) => {
      nodes.push(svg("line", { x1: m.l, x2: width - m.r, y1: y(v), y2: y(v), class: i ? "grid" : "axis" }));
      nodes.push(Object.assign(svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end", class: "tick y" }), { textContent: text }));
    });
    for (let i = 0; i <= 3; i += 1) {
      const t = t0 + ((t1 - t0) * i) / 3;
      nodes.push(Object.assign(svg("text", { x: x(t), y: height - 6, "text-anchor": i === 0 ? "start" : (i === 3 ? "end" : "middle"), class: "tick" }),
        { textContent: clock(t) }));
    }
    for (const s of series.slice().sort((a, b) => (a.bold ? 1 : 0) - (b.bold ? 1 : 0))) {  // bold lines on top
      let d = "";
      let pen = false;
      s.values.forEach((v, i) => {
        if (!known(v)) { pen = false; return; }
        d += (pen ? "L" : "M") + x(times[i]).toFixed(1) + " " + y(v).toFixed(1);
        pen = true;
      });
      if (d) {
        nodes.push(svg("path", { d, stroke: s.colour, class: "line" + (s.dash ? " dash" : "") + (s.bold ? " bold" : "") }));
      }
      const points = s.values.map((v, i) => [v, i]).filter(([v]) => known(v));
      if (points.length === 1) {  // one sample so far: a dot, as a line needs two
        nodes.push(svg("circle", { cx: x(times[points[0][1]]), cy: y(points[0][0]), r: 2.5, fill: s.colour }));
      }
    }
    box.replaceChildren(...nodes);
    legend.replaceChildren(...series.filter((s) => !s.hideLegend).map((s) => {
      const item = el("span", { class: "item" });
      item.append(el("i", { class: "key" + (s.dash ? " dash" : ""), style: `--c:${s.colour}` }), el("span", {}, s.label + " "));
      item.append(metric("b", s.metric, s.group, s.last, fmt(s.last)));
      return item;
    }));
  }

  function lastOf(values) {
    for (let i = values.length - 1; i >= 0; i -= 1) if (known(values[i])) return values[i];
    return null;
  }

  // the versions whose lines a chart shows: every one but the retired (and those no longer
  // reported), unless the retired are asked for
  function shownGroups(s) {
    const rows = s.projections || [];
    if (showRetired) return null;
    return new Set(rows.filter((r) => r.state !== "retired").map((r) => r.group));
  }
  function drawCharts(s, h) {
    const times = h.t;
    const shown = shownGroups(s);
    const byGroup = (figure, opts) => Object.keys(h[figure] || {}).sort().filter((g) => !shown || shown.has(g)).map((g) => ({
      key: g, label: g, colour: colour(g), values: h[figure][g], group: g, metric: "chart:" + figure,
      last: lastOf(h[figure][g]), dash: opts && opts.dash, hideLegend: opts && opts.hideLegend,
    }));
    chart("chart-events", times, [
      { key: "in", label: "in", colour: "#111827", values: h.events_in, bold: true, metric: "chart:events_in", last: lastOf(h.events_in) },
      ...byGroup("events_out").map((x) => Object.assign(x, { label: x.label + " out" })),
    ], rate);
    chart("chart-lag-entries", times, byGroup("lag_entries"), compact, { whole: true });
    chart("chart-lag-seconds", times, byGroup("lag_seconds"), seconds, { time: true });
    chart("chart-freshness", times, [
      ...byGroup("freshness_p95").map((x) => Object.assign(x, { label: x.label + " p95" })),
      ...byGroup("freshness_p50", { dash: true, hideLegend: true }),
    ], seconds, { time: true });
    chart("chart-dead", times, byGroup("dead_letters"), compact, { whole: true });
    chart("chart-queries", times, [
      { key: "p95", label: "p95", colour: "#7c3aed", values: h.query_p95, metric: "chart:query_p95", last: lastOf(h.query_p95) },
      { key: "p50", label: "p50", colour: "#7c3aed", values: h.query_p50, dash: true, metric: "chart:query_p50", last: lastOf(h.query_p50) },
    ], seconds, { time: true, empty: s.queries && Object.keys(s.queries.latency || {}).length ? null : "no queries answered yet" });
    const noFleet = s.fleet ? null : "no agent reports yet";
    chart("chart-agents", times, [
      { key: "agents", label: "active", colour: "#059669", values: h.agents_active, metric: "chart:agents_active", last: lastOf(h.agents_active) },
    ], compact, { whole: true, empty: noFleet });
    chart("chart-backlog", times, [
      { key: "backlog", label: "all agents", colour: "#d97706", values: h.spool_backlog, metric: "chart:spool_backlog", last: lastOf(h.spool_backlog) },
    ], compact, { whole: true, empty: noFleet });
  }

  // -- headline tiles: what serves now (api/summary's headline) ---------------------------------
  function tile(label, name, value, text, note, warn) {
    const box = el("div", { class: "tile" + (warn ? " warn" : "") });
    const under = el("div", { class: "note" });
    under.append(...(Array.isArray(note) ? note : [note || ""]));
    box.append(el("div", { class: "label" }, label), metric("div", name, null, value, text, { class: "value" }), under);
    return box;
  }
  function drawTiles(s) {
    const h = s.headline || {};
    const lag = h.lag_entries;
    const age = h.lag_seconds;
    const fresh = h.freshness_p95;
    const applied = h.applied;
    const queue = Object.values((s.queries || {}).queue || {}).reduce((a, v) => a + (v || 0), 0);
    const log = [metric("span", "log_entries", null, h.log_entries, count(h.log_entries)), " in the stream"];
    if (known(h.forgotten)) log.push(", ", metric("span", "forgotten", null, h.forgotten, count(h.forgotten)), " forgotten");
    if (h.expired) log.push(", ", metric("span", "expired", null, h.expired, count(h.expired)), " expired");
    // the build furthest behind: its progress, and its own freshness (from its read of each entry)
    const builds = (h.building || []).slice().sort((a, b) => (known(a.fraction) ? a.fraction : -1) - (known(b.fraction) ? b.fraction : -1));
    const build = builds[0];
    const tiles = [
      tile("Events in", "events_in_per_s", h.events_in_per_s, rate(h.events_in_per_s), log),
      tile("Events applied", "events_out_per_s", applied ? applied.per_s : null, rate(applied ? applied.per_s : null),
        applied ? [applied.versions > 1 ? `slowest of ${applied.versions} active: ` : "", metric("span", "events_out_group", null, applied.group, applied.group)]
          : "no active version applies here"),
      tile("Largest lag", "max_lag_entries", lag ? lag.value : null, lag ? compact(lag.value) + (lag.value === 1 ? " entry" : " entries") : "—",
        lag ? (lag.value ? metric("span", "max_lag_group", null, lag.group, lag.group) : "active versions caught up") : "unknown", lag && lag.value > 1000),
      tile("Oldest waiting", "max_lag_seconds", age ? age.value : null, seconds(age ? age.value : null),
        age ? (age.value ? metric("span", "max_lag_seconds_group", null, age.group, age.group) : "nothing waits") : "unknown", age && age.value > 60),
      tile("Freshness p95", "max_freshness_p95", fresh ? fresh.value : null, seconds(fresh ? fresh.value : null),
        fresh ? [metric("span", "max_freshness_group", null, fresh.group, fresh.group), ", last 60 s"] : "nothing applied in 60 s", fresh && fresh.value > 5),
      build
        ? tile("Building", "build_fraction", build.fraction, percent(build.fraction), [
          metric("span", "build_group", null, build.group, build.group), builds.length > 1 ? ` (+${builds.length - 1} more)` : "",
          ", freshness p95 ", metric("span", "build_freshness_p95", build.group, build.freshness_p95, seconds(build.freshness_p95)), " from its read"])
        : tile("Building", "build_fraction", null, "none", "no replay running"),
      tile("Dead letters", "dead_letters_total", h.dead_letters, count(h.dead_letters), "memstream dlq list", h.dead_letters > 0),
      tile("Query p95", "query_p95", s.queries.p95, seconds(s.queries.p95), count(queue) + " waiting"),
      tile("Active agents", "agents_active", s.fleet ? s.fleet.agents_active : null, s.fleet ? count(s.fleet.agents_active) : "—", s.fleet ? "reporting" : "no agent reports yet"),
    ];
    document.getElementById("tiles").replaceChildren(...tiles);
  }

  // -- tables --------------------------------------------------------------------------------------
  function td(name, group, value, text, cls) {
    return metric("td", name, group, value, text, { class: cls || "num" });
  }
  function drawProjections(s) {
    const all = s.projections || [];
    const retired = all.filter((r) => r.state === "retired");
    const rows = all.filter((r) => showRetired || r.state !== "retired").map((r) => {
      const tr = el("tr", { class: r.state === "retired" ? "retired" : "" });
      const name = el("th", { scope: "row" });
      name.append(el("i", { class: "key", style: `--c:${colour(r.group)}` }), el("span", {}, r.group));
      tr.append(name);
      const state = metric("td", "state", r.group, r.state || "unknown", r.state || "—");
      state.prepend(el("span", { class: "badge " + (r.state || "unknown") }));
      tr.append(state);
      tr.append(td("lag_entries", r.group, r.lag_entries, count(r.lag_entries), r.lag_entries > 1000 ? "num warn" : "num"));
      tr.append(td("lag_seconds", r.group, r.lag_seconds, seconds(r.lag_seconds), r.lag_seconds > 60 ? "num warn" : "num"));
      tr.append(td("pending", r.group, r.pending, count(r.pending)));
      tr.append(td("dead_letters", r.group, r.dead_letters, count(r.dead_letters), r.dead_letters > 0 ? "num bad" : "num"));
      tr.append(td("consumers", r.group, r.consumers, count(r.consumers),
        r.consumers === 0 && (r.state === "active" || r.state === "building") ? "num bad" : "num"));
      tr.append(td("applied_per_s", r.group, r.applied_per_s, rate(r.applied_per_s)));
      tr.append(td("freshness_p50", r.group, r.freshness_p50, seconds(r.freshness_p50)));
      tr.append(td("freshness_p95", r.group, r.freshness_p95, seconds(r.freshness_p95), r.freshness_p95 > 5 ? "num warn" : "num"));
      const replay = el("td", { class: "replay" });
      if (r.replay) {
        const f = r.replay.fraction;
        const bar = el("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": known(f) ? Math.round(f * 100) : "" });
        bar.append(el("div", { class: "done", style: `width:${known(f) ? (f * 100).toFixed(1) : 0}%` }));
        replay.append(bar, metric("span", "replay_fraction", r.group, f, percent(f)),
          el("span", { class: "of" }, ` ${count(r.replay.applied)} of ${count(r.replay.total)}`));
      } else {
        replay.append(el("span", { class: "none" }, "—"));
      }
      tr.append(replay);
      return tr;
    });
    if (retired.length) {  // one row folds the retired versions away, and unfolds them
      const tr = el("tr", { class: "fold" });
      const cell = el("td", { colspan: 11 });
      const button = el("button", { type: "button", id: "retired-toggle", "aria-expanded": String(showRetired), "data-retired": retired.length },
        (showRetired ? "hide the " : "show the ") + retired.length + (retired.length === 1 ? " retired version" : " retired versions"));
      button.addEventListener("click", () => { showRetired = !showRetired; render(); });
      cell.append(button);
      tr.append(cell);
      rows.push(tr);
    }
    fill(document.querySelector("#projections tbody"), rows.length ? rows : [emptyRow(11, "no projection reported yet")]);
  }
  function emptyRow(span, text) {
    const tr = el("tr");
    tr.append(el("td", { colspan: span, class: "none" }, text));
    return tr;
  }
  function simpleRows(id, entries, span, empty) {
    fill(document.querySelector(`#${id} tbody`), entries.length ? entries : [emptyRow(span, empty)]);
  }
  function row(label, ...cells) {
    const tr = el("tr");
    tr.append(el("th", { scope: "row" }, label), ...cells);
    return tr;
  }
  function drawTables(s) {
    simpleRows("streams", (s.streams || []).map((x) => row(x.stream,
      td("stream_entries", x.stream, x.entries, count(x.entries)), td("stream_bytes", x.stream, x.bytes, bytes(x.bytes)))), 3, "no stream read");
    simpleRows("types", Object.entries(s.events_in.by_type || {}).map(([t, x]) => row(t,
      td("events_total", t, x.total, count(x.total)), td("events_per_s", t, x.per_s, rate(x.per_s)))), 3, "no event yet");
    const q = s.queries || {};
    simpleRows("queue", Object.entries(q.queue || {}).map(([c, n]) => row(c, td("queue_length", c, n, count(n)))), 2, "—");
    simpleRows("outcomes", Object.entries(q.outcomes || {}).map(([o, x]) => row(o,
      td("queries_total", o, x.total, count(x.total)), td("queries_per_s", o, x.per_s, rate(x.per_s)))), 3, "—");
    simpleRows("ops", Object.entries(q.latency || {}).map(([op, x]) => row(op,
      td("query_p50", op, x.p50, seconds(x.p50)), td("query_p95", op, x.p95, seconds(x.p95)),
      td("query_count", op, x.count, count(x.count)))), 4, "no queries answered yet");
    drawFleet(s.fleet);
  }
  function table(head, rows) {
    const t = el("table");
    const tr = el("tr");
    head.forEach((h, i) => tr.append(el("th", { scope: "col", class: i ? "num" : "" }, h)));
    t.append(Object.assign(el("thead"), {}), el("tbody"));
    t.tHead.append(tr);
    t.tBodies[0].replaceChildren(...(rows.length ? rows : [emptyRow(head.length, "none")]));
    return t;
  }
  function drawFleet(f) {
    document.getElementById("fleet-empty").hidden = !!f;
    const body = document.getElementById("fleet-body");
    if (!f) { body.replaceChildren(); return; }
    const parts = [];
    parts.push(el("h3", {}, "Spool backlog"), table(["agent", "events"], (f.spool_backlog.agents || []).map((a) =>
      row(a.agent + (a.agents ? ` (${a.agents} agents)` : ""), td("spool_backlog", a.agent, a.events, count(a.events))))));
    parts.push(el("h3", {}, "Spool refusals"), table(["agent", "refused"], (f.refusals.agents || []).map((a) =>
      row(a.agent + (a.agents ? ` (${a.agents} agents)` : ""), td("spool_refusals", a.agent, a.events, count(a.events))))));
    parts.push(el("h3", {}, "Hooks"), table(["hook", "p50", "p95"], Object.entries(f.hooks || {}).map(([h, x]) =>
      row(h, td("hook_p50", h, x.p50, seconds(x.p50)), td("hook_p95", h, x.p95, seconds(x.p95))))));
    parts.push(el("h3", {}, "Prefetch"), table(["outcome", "total", "now"], Object.entries(f.prefetch || {}).map(([o, x]) =>
      row(o, td("prefetch_total", o, x.total, count(x.total)), td("prefetch_per_s", o, x.per_s, rate(x.per_s))))));
    body.replaceChildren(...parts);
  }

  // -- status line -----------------------------------------------------------------------------------
  function drawStatus(s) {
    const redis = document.getElementById("redis");
    const up = s.redis_up;
    redis.className = "pill " + (up === true ? "up" : up === false ? "down" : "unknown");
    redis.textContent = up === true ? "Redis up" : up === false ? "Redis down" : "Redis unknown";
    redis.setAttribute("data-metric", "redis_up");
    redis.setAttribute("data-value", up === null || up === undefined ? "null" : (up ? 1 : 0));
    const updated = document.getElementById("updated");
    if (failingSince) {
      updated.textContent = `cannot reach the service since ${clock(failingSince)}; retrying (last sample ${s.sampled_at ? clock(s.sampled_at) : "none"})`;
      updated.className = "stale";
    } else {
      updated.textContent = s.sampled_at ? `updated ${clock(s.sampled_at)}` : "waiting for the first sample";
      updated.className = "";
    }
    const p = s.process || {};
    document.getElementById("process").textContent = p.role ? `${p.role}, memstream ${p.version}` : "";
  }

  function render() {
    const s = summary;
    drawStatus(s);
    if (!s.sampled_at) return false;
    (s.projections || []).forEach((r) => colour(r.group));  // one colour per version, in the table's order
    drawTiles(s);
    drawCharts(s, history);
    drawProjections(s);
    drawTables(s);
    document.body.dataset.sampledAt = String(s.sampled_at);
    return true;
  }

  async function refresh() {
    const last = history && history.t.length ? history.t[history.t.length - 1] : null;
    try {
      const reply = await fetch("api/summary" + (last !== null ? "?since=" + last : ""), { cache: "no-store" });
      if (!reply.ok) throw new Error("HTTP " + reply.status);
      const s = await reply.json();
      history = merge(history, s.history);
      summary = s;
      failingSince = null;
    } catch (err) {
      if (!failingSince) failingSince = Date.now() / 1000;
      if (!summary) {
        const updated = document.getElementById("updated");
        updated.textContent = `cannot reach the service (${err.message}); retrying`;
        updated.className = "stale";
      }
    }
    if (summary) {
      const done = render();
      if (done && !document.body.dataset.rendered) {
        document.body.dataset.rendered = String(Math.round(performance.now()));
      }
    }
    setTimeout(refresh, REFRESH_MS);
  }

  window.memstreamChart = chart;  // for the page's tests: a chart drawn from given points

  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (summary && summary.sampled_at) drawCharts(summary, history); }, 150);
  });
  refresh();
})();
