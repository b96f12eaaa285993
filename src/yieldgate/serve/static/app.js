// yieldgate serve: draws the pages from the JSON API and keeps them live. Text is only ever set with
// textContent (never innerHTML), so a run named like markup shows as those characters.
"use strict";

const PLOT_CONFIG = {displaylogo: false, responsive: true};
// A run page asks for news every LIVE_POLL_MS (a new evaluation shows within 2 s), or every POLL_SHARE times the
// last answer's duration if longer: a slow server (a big ledger) is not asked back to back.
const LIVE_POLL_MS = 250;
const POLL_SHARE = 3;
const RUNS_POLL_MS = 2000;     // the runs table refreshes this often
const RUNS_PAGE = 500;         // runs asked for at a time (/api/runs pages); "more" asks for the next page
const BUSY_TRIES = 5;          // a 503 (the server's computations at their bound) is asked again after Retry-After
// Between evaluations the whole run is redrawn (re-downsampled; a curve of the training loss grows) at most every
// REDRAW_GAP_MS, or every REDRAW_SHARE times the last redraw's duration if longer: a big run is not redrawn
// back to back.
const REDRAW_GAP_MS = 1500;
const REDRAW_SHARE = 5;

async function getJSON(url) {
  for (let tries = 1; ; tries++) {
    const response = await fetch(url, {credentials: "same-origin"});
    const body = await response.json();
    if (response.status === 503 && tries < BUSY_TRIES) {
      const seconds = Number(response.headers.get("retry-after")) || 1;
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    if (!response.ok) throw new Error(body.error || `${url}: HTTP ${response.status}`);
    return body;
  }
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function fmt(value) {
  if (value === null || value === undefined) return "-";
  if (typeof value === "number") {
    if (Number.isInteger(value) || Math.abs(value) >= 1e4) return Math.round(value).toLocaleString("en-US");
    return value.toPrecision(4);
  }
  return String(value);
}

function setStatus(status) {
  const node = document.getElementById("status");
  if (!node || node.textContent === status) return;
  node.textContent = status;
  node.className = `status status-${status}`;
}

// -- plots --------------------------------------------------------------------------------------------

// A plot is drawn when it comes within NEAR_VIEWPORTS window heights of the window; one further down waits until
// the reader scrolls towards it. Drawing is most of a page's time after plotly.js starts (a million-step run page
// has seven plots, two of them in view), and a live redraw redraws only the plots near the window: the others
// keep the newest figure and draw it when reached.
const NEAR_VIEWPORTS = 0.5;
const waiting = new WeakMap();  // plot div -> the figure it draws when it comes near the window
const nearWindow = new IntersectionObserver((entries) => {
  for (const entry of entries) if (entry.isIntersecting) drawWaiting(entry.target);
}, {rootMargin: `${Math.round(NEAR_VIEWPORTS * 100)}% 0px`});

function isNearWindow(div) {
  const box = div.getBoundingClientRect();
  const margin = NEAR_VIEWPORTS * window.innerHeight;
  return box.bottom > -margin && box.top < window.innerHeight + margin;
}

function drawWaiting(div) {
  const figure = waiting.get(div);
  if (!figure) return;
  waiting.delete(div);
  nearWindow.unobserve(div);
  Plotly.react(div, figure.data, figure.layout, PLOT_CONFIG);
}

function drawFigures(container, payload) {
  const loading = document.getElementById("loading");
  if (loading) loading.remove();
  const divs = [];
  for (const f of payload.figures) {
    let div = document.getElementById(`fig-${f.id}`);
    if (!div) {
      container.appendChild(el("h3", f.title));
      div = el("div", null, "plot");
      div.id = `fig-${f.id}`;
      container.appendChild(div);
      const notes = el("div");
      notes.id = `notes-${f.id}`;
      container.appendChild(notes);
    }
    const notes = document.getElementById(`notes-${f.id}`);
    notes.replaceChildren(...f.notes.map((n) => el("p", n, "note")));
    waiting.set(div, f.figure);
    divs.push(div);
  }
  let general = document.getElementById("page-notes");
  if (!general) {
    general = el("div");
    general.id = "page-notes";
    container.prepend(general);
  }
  general.replaceChildren(...(payload.notes || []).map((n) => el("p", n, "note")));
  // Every box has its place now (plots keep their height before they are drawn): those near the window draw at
  // once, the rest when they come near it.
  for (const div of divs) {
    if (isNearWindow(div)) drawWaiting(div);
    else nearWindow.observe(div);
  }
}

function showError(container, error) {
  let node = document.getElementById("error");
  if (!node) {
    node = el("p", null, "error");
    node.id = "error";
    container.prepend(node);
  }
  node.textContent = String(error.message || error);
}

// -- a run, live ----------------------------------------------------------------------------------------

async function runPage(container) {
  const name = container.dataset.run;
  const smoothing = document.getElementById("smooth");
  const smooth = () => (smoothing ? smoothing.value : "0");
  const query = () => `name=${encodeURIComponent(name)}&metric=${encodeURIComponent(container.dataset.metric)}` +
    `&smooth=${encodeURIComponent(smooth())}`;
  const live = document.getElementById("live");
  let cursor = null;
  let metric = container.dataset.metric;
  let drawnAt = 0;
  let redrawMs = 0;

  let first = container.dataset.src;  // the address the page preloads: its answer is on its way already

  async function redraw() {
    const started = Date.now();
    const payload = await getJSON(first || `/api/run/figures?${query()}`);
    first = null;
    redrawMs = Date.now() - started;
    drawFigures(container, payload);
    cursor = payload.cursor;
    metric = payload.metric;
    drawnAt = Date.now();
    setStatus(cursor.status);
    document.body.dataset.draws = String(Number(document.body.dataset.draws || 0) + 1);
  }

  // The loss plots and the curve column each draws against (their traces' meta.series is `<metric>@<column>`).
  const CURVE_PLOTS = {"loss-steps": "step", "loss-tokens": "tokens", "loss-time": "wall_s", "loss-cost": "cost_usd"};

  function extendCurve(curve) {
    // New evaluations: appended to the loss plots at once; the full redraw (yields, bands) follows.
    for (const [id, column] of Object.entries(CURVE_PLOTS)) {
      const div = document.getElementById(`fig-${id}`);
      const index = div && div.data ? div.data.findIndex((t) => t.meta && t.meta.series === `${metric}@${column}`) : -1;
      if (index < 0) continue;
      const keep = curve.step.map((_, i) => i).filter((i) => curve[column][i] !== null && curve.loss[i] !== null);
      if (keep.length === 0) continue;
      Plotly.extendTraces(div, {x: [keep.map((i) => curve[column][i])], y: [keep.map((i) => curve.loss[i])]}, [index]);
    }
  }

  function throughputTrace() {
    // The throughput trace (meta.series tokens_per_s) and its plot, or null before one is drawn.
    const div = document.getElementById("fig-throughput-learning");
    const index = div && div.data ? div.data.findIndex((t) => t.meta && t.meta.series === "tokens_per_s") : -1;
    return index < 0 ? null : {div, index};
  }

  function lastThroughput() {
    // The last tokens/s drawn: a smoothed trace continues from it (the server's moving average starts there).
    const found = throughputTrace();
    if (!found) return "";
    const y = found.div.data[found.index].y;
    return y.length ? String(y[y.length - 1]) : "";
  }

  function extendThroughput(points) {
    // New steps between redraws: appended to the throughput trace.
    const found = throughputTrace();
    if (!found || points.step.length === 0) return false;
    Plotly.extendTraces(found.div, {x: [points.wall_s], y: [points.tokens_per_s]}, [found.index]);
    return true;
  }

  async function poll() {
    const started = Date.now();
    let asked = 0;  // how long the server took to answer (a redraw after it does not count)
    try {
      const news = await getJSON(`/api/run/live?name=${encodeURIComponent(name)}&metric=${encodeURIComponent(metric)}` +
        `&after=${cursor.last_step ?? ""}&evals=${cursor.evals}&curve_after=${cursor.curve_step ?? ""}` +
        `&smooth=${encodeURIComponent(smooth())}&smooth_from=${encodeURIComponent(lastThroughput())}`);
      asked = Date.now() - started;
      if (news.curve) extendCurve(news.curve);
      setStatus(news.status);
      const steps = document.getElementById("steps");
      // A new evaluation or status: redraw now. New steps only: grow the throughput trace at once, and redraw
      // when the gap allows, or now if there was no trace to grow.
      let redrawNow = news.evals !== cursor.evals || news.status !== cursor.status;
      if (!redrawNow && news.new_steps > 0) {
        const extended = news.throughput.step.length === 0 || extendThroughput(news.throughput);
        redrawNow = !extended || Date.now() - drawnAt > Math.max(REDRAW_GAP_MS, REDRAW_SHARE * redrawMs);
        cursor.last_step = news.last_step;
      }
      if (redrawNow) await redraw();
      if (steps && news.last_step !== null) steps.textContent = fmt(news.last_step);
      live.textContent = `live: checked ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      live.textContent = `live: ${error.message}`;
    }
    setTimeout(poll, Math.max(LIVE_POLL_MS, POLL_SHARE * asked));
  }

  try {
    await redraw();
  } catch (error) {
    showError(container, error);
    return;
  }
  if (smoothing) {
    smoothing.addEventListener("change", async () => {
      // The address keeps the choice (a reload or a shared link draws the same), then the plots are drawn again.
      const url = new URL(window.location.href);
      url.searchParams.set("smooth", smooth());
      window.history.replaceState(null, "", url);
      try {
        await redraw();
      } catch (error) {
        showError(container, error);
      }
    });
  }
  setTimeout(poll, LIVE_POLL_MS);
}

async function comparePage(container) {
  try {
    drawFigures(container, await getJSON(container.dataset.src));
  } catch (error) {
    showError(container, error);
  }
}

// -- the runs table ------------------------------------------------------------------------------------

function runsPage(table) {
  const body = table.querySelector("tbody");
  const filter = document.getElementById("filter");
  const link = document.getElementById("compare-link");
  const count = document.getElementById("count");
  const selected = [];
  let rows = [];
  let total = 0;
  let wanted = RUNS_PAGE;  // the runs loaded: the newest first, a page more at each "more"
  const more = el("button", "more");
  more.id = "more-runs";
  more.hidden = true;
  table.after(more);
  let sortKey = "updated_at";
  let ascending = false;

  function sortValue(run, key) {
    if (key === "last_eval") return run.last_eval ? run.last_eval.value : null;
    if (key === "select") return selected.includes(run.name) ? 0 : 1;
    if (key === "tags") return run.tags.join(", ");
    return run[key];
  }

  function updateLink() {
    if (selected.length === 2) {
      link.href = `/compare?a=${encodeURIComponent(selected[0])}&b=${encodeURIComponent(selected[1])}`;
      link.textContent = `compare ${selected[0]} (A) with ${selected[1]} (B)`;
      link.className = "";
    } else {
      link.removeAttribute("href");
      link.textContent = "select two runs to compare";
      link.className = "muted";
    }
  }

  function render() {
    const words = filter.value.trim().toLowerCase();
    const shown = rows.filter((r) => !words || [r.name, r.status, r.source, ...r.tags].some(
      (v) => String(v).toLowerCase().includes(words)));
    shown.sort((x, y) => {
      const a = sortValue(x, sortKey);
      const b = sortValue(y, sortKey);
      if (a === b) return 0;
      if (a === null || a === undefined) return 1;
      if (b === null || b === undefined) return -1;
      return (a < b ? -1 : 1) * (ascending ? 1 : -1);
    });
    body.replaceChildren(...shown.map((r) => {
      const tr = el("tr");
      const pick = el("input");
      pick.type = "checkbox";
      pick.checked = selected.includes(r.name);
      pick.addEventListener("change", () => {
        const at = selected.indexOf(r.name);
        if (pick.checked && at < 0) selected.push(r.name);
        if (!pick.checked && at >= 0) selected.splice(at, 1);
        while (selected.length > 2) selected.shift();
        updateLink();
        render();
      });
      const tdPick = el("td");
      tdPick.appendChild(pick);
      const name = el("a", r.name);
      name.href = `/run?name=${encodeURIComponent(r.name)}`;
      const tdName = el("td");
      tdName.appendChild(name);
      const status = el("td");
      status.appendChild(el("span", r.status, `status status-${r.status}`));
      const ev = r.last_eval;
      tr.append(tdPick, tdName, status, el("td", r.tags.join(", ")), el("td", fmt(r.tokens), "num"),
                el("td", fmt(r.steps), "num"),
                el("td", ev ? `${ev.task}/${ev.metric} ${fmt(ev.value)} @${fmt(ev.step)}` : "-"),
                el("td", (r.manifest_hash || "-").slice(0, 8)), el("td", r.updated_at));
      return tr;
    }));
    const loaded = rows.length < total ? ` (the newest ${rows.length} of ${total} loaded)` : "";
    count.textContent = `${shown.length} of ${rows.length} runs${loaded}`;
    more.hidden = rows.length >= total;
    more.textContent = `more (${Math.min(RUNS_PAGE, total - rows.length)} of ${total - rows.length} older runs)`;
  }

  async function load() {
    try {
      // A page at a time (the server serves no list whole): the newest `wanted` runs.
      let newest = [];
      for (let offset = 0; offset < wanted; offset += RUNS_PAGE) {
        const page = await getJSON(`/api/runs?order=newest&offset=${offset}&limit=${RUNS_PAGE}`);
        newest = newest.concat(page.runs);
        total = page.total;
        if (page.runs.length < RUNS_PAGE) break;
      }
      rows = newest.reverse();  // the newest runs, in the ledger's order (oldest first) as before paging
      render();
    } catch (error) {
      count.textContent = String(error.message);
    }
  }

  more.addEventListener("click", () => {
    wanted += RUNS_PAGE;
    load();
  });

  for (const th of table.querySelectorAll("th")) {
    th.addEventListener("click", () => {
      ascending = sortKey === th.dataset.key ? !ascending : true;
      sortKey = th.dataset.key;
      render();
    });
  }
  filter.addEventListener("input", render);
  load();
  setInterval(load, RUNS_POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  const figures = document.getElementById("figures");
  const runs = document.getElementById("runs");
  if (runs) runsPage(runs);
  if (figures && figures.dataset.kind === "run") runPage(figures);
  if (figures && figures.dataset.kind === "compare") comparePage(figures);
});
