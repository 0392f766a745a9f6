// DLC dashboard: plain JavaScript, no libraries. Polls the scheduler every 2 s
// (GET /v1/dashboard, signed in by an HttpOnly session cookie) and redraws; no page reloads.
// The token is typed into the sign-in form, POSTed once to /v1/session and never kept
// by this script, put in a URL or in localStorage.
"use strict";

const POLL_MS = 2000;
// Colours of jobs holding GPUs: twelve hues 30 degrees apart, light enough for dark text, in
// an order where each next colour is far from the ones before (jobs take them in turn).
const JOB_COLOURS = ["#f48c8c", "#8cf4f4", "#c0f48c", "#c08cf4", "#f4c08c", "#8cc0f4",
  "#8cf48c", "#f48cf4", "#f4f48c", "#8c8cf4", "#8cf4c0", "#f48cc0"];
const TAKEN = "#b0bec5";  // another user's GPU: shown as taken, without details

// refreshing: a refresh is in flight; again: one was asked for meanwhile (it runs next)
const state = { signedIn: false, snapshot: null, svgs: {}, stream: "stdout", logOffset: 0,
  logJob: null, timer: null, jobCache: null, refreshing: false, again: false };

const $ = (id) => document.getElementById(id);

function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Job colours: each job keeps the colour it got first; a new job takes the first colour of
// the list that no job on screen uses (so a user's consecutive jobs get far-apart hues, not
// neighbours of one hash); past twelve jobs on screen colours repeat, in the same order.
const colourOf = new Map();

function assignColours(jobIds) {
  const live = new Set(jobIds);
  for (const id of [...colourOf.keys()]) if (!live.has(id)) colourOf.delete(id);
  for (const id of jobIds) {
    if (colourOf.has(id)) continue;
    const used = [...colourOf.values()];
    const count = (c) => used.filter((u) => u === c).length;
    let pick = JOB_COLOURS[0];
    for (const c of JOB_COLOURS) if (count(c) < count(pick)) pick = c;
    colourOf.set(id, pick);
  }
}

function jobColour(jobId) {
  if (!colourOf.has(jobId)) assignColours([...colourOf.keys(), jobId]);
  return colourOf.get(jobId);
}

function duration(seconds) {
  if (seconds == null) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString([], { hour12: false });
}

// ---------------------------------------------------------------- auth + fetch

function dropTokenFromAddress() {
  // An old link may carry ?token=: it is not used (tokens do not belong in URLs), only
  // removed from the address bar and history.
  const url = new URL(window.location.href);
  if (!url.searchParams.has("token")) return;
  url.searchParams.delete("token");
  history.replaceState(null, "", url.pathname + url.search + url.hash);
}

class AuthError extends Error {}
class NotFoundError extends Error {}

// How long one request may take before it is given up (a test may shorten it): refreshes
// run one at a time, so a request that never finished froze the page until a reload.
const REQUEST_MS = window.dlcRequestMs || 30000;

async function api(path, options = {}) {
  const resp = await fetch(path, {
    signal: AbortSignal.timeout(REQUEST_MS),
    ...options,
    credentials: "same-origin",
    // Cookie-authenticated writes must carry this header (a cross-site form cannot).
    headers: { "X-Requested-With": "dlc-dashboard", ...(options.headers || {}) },
  });
  const body = await resp.json().catch(() => ({}));
  if (resp.status === 401) throw new AuthError(body.error || "unknown token");
  if (resp.status === 404) throw new NotFoundError(body.error || "not found");
  if (!resp.ok) throw new Error(body.error || `HTTP ${resp.status}`);
  return body;
}

async function signIn(token) {
  const resp = await fetch("/v1/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Requested-With": "dlc-dashboard" },
    body: JSON.stringify({ token }),
  });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new AuthError(body.error || `HTTP ${resp.status}`);
  return body;
}

function showLogin(message) {
  state.signedIn = false;
  for (const id of ["overview-view", "job-view", "agent-view"]) $(id).hidden = true;
  $("login-view").hidden = false;
  $("signout").hidden = true;
  $("who").textContent = "";
  $("login-error").textContent = message || "";
  $("status").textContent = "signed out";
}

// ---------------------------------------------------------------- overview

function card(label, value, extra = "") {
  return `<div class="card"><div class="label">${esc(label)}</div>` +
    `<div class="value">${value}</div>${extra}</div>`;
}

function renderCards(snap) {
  const c = snap.counts;
  const g = snap.gpus;
  const pct = g.total ? Math.round((100 * g.allocated) / g.total) : 0;
  const ratio = snap.scheduler.p2p_ratio;
  $("cards").innerHTML = [
    card("GPUs allocated", `${g.allocated}<small> / ${g.total}</small>`,
      `<div class="bar"><span style="width:${pct}%"></span></div>`),
    card("Running", c.running + c.staging),
    card("Queued", c.queued),
    card("Finished", c.finished),
    card("Failed / killed / lost", c.failed + c.killed + c.lost),
    card("Multi-GPU placed P2P", ratio == null ? "&ndash;" : `${Math.round(ratio * 100)}%`),
  ].join("");
}

// A gang's nodes: "2", or an elastic gang's members over its range, "3/2:4".
function nodesOf(job) {
  return job.nodes_max ? `${job.members || 0}/${job.nodes}:${job.nodes_max}` : `${job.nodes}`;
}

function isGang(job) {
  return job.nodes > 1 || Boolean(job.nodes_max);
}

// A CPU-only job (--gpus 0): it asks CPUs and memory, no GPU.
function cpuOnly(job) {
  return !job.share && job.gpus === 0;
}

// What a job asks for: "0.5 of a GPU", "2x8 GPUs" (nodes x GPUs per node), "4 GPUs",
// "CPU only" ("2x CPU only" for a gang).
function gpuAsk(job) {
  if (job.share) return `${esc(job.share)} of a GPU`;
  if (cpuOnly(job)) return isGang(job) ? `${nodesOf(job)}x CPU only` : "CPU only";
  if (isGang(job)) return `${nodesOf(job)}x${job.gpus} GPUs`;
  return `${job.gpus} GPU${job.gpus === 1 ? "" : "s"}`;
}

function gpuList(job) {
  // a CPU-only job: "CPU only", then the hosts it runs on (no GPU ids to list)
  if (cpuOnly(job)) return [gpuAsk(job)].concat(job.tasks.map((t) => esc(t.hostname))).join("<br>");
  if (!job.tasks.length) return `${gpuAsk(job)} asked`;
  const where = job.tasks.map((t) => `${esc(t.hostname)}: ${t.share ? esc(t.share) : t.gpu_ids.join(",")}`);
  return (isGang(job) ? [gpuAsk(job)] : []).concat(where).join("<br>");
}

// Measured use of a running job's GPUs; "no sample" where the executor sent none.
function usageCell(job) {
  const u = job.usage;
  if (!u) return `<td class="usage"><span class="sub">no sample</span></td>`;
  if (u.util_pct === null || u.util_pct === undefined) {
    return `<td class="usage"><span class="sub">utilisation unknown</span>` +
      `<div class="sub">${Math.round(u.mem_used_mib / 1024)} GiB</div></td>`;
  }
  const idle = u.util_pct < IDLE_PCT;
  return `<td class="usage${idle ? " idle" : ""}" title="sampled ${clock(u.sampled_at)}">` +
    `${Math.round(u.util_pct)}%${idle ? ` <span class="idle-tag">idle</span>` : ""}` +
    `<div class="sub">${Math.round(u.mem_used_mib / 1024)} GiB</div></td>`;
}

function jobRow(job, cols, me) {
  const sw = job.tasks.length && !job.state.match(/finished|failed|killed|lost/)
    ? `<span class="swatch" style="background:${jobColour(job.id)}"></span>` : "";
  const cells = {
    pos: `<td class="num">${job.position ?? ""}</td>`,
    id: `<td>${sw}<a href="#/jobs/${esc(job.id)}">${esc(job.id)}</a></td>`,
    prio: `<td class="num">${esc(job.priority_class || job.priority)}</td>`,
    used: usageCell(job),
    user: `<td>${esc(job.user)}</td>`,
    name: `<td>${esc(job.name)}<br><span class="msg">${esc(job.framework || job.image)}</span></td>`,
    gpus: `<td class="gpus">${gpuList(job)}</td>`,
    state: `<td><span class="state ${esc(job.state)}">${esc(job.state)}</span></td>`,
    age: `<td>${duration(job.age_s)}</td>`,
    wait: `<td>${duration(job.wait_s)}</td>`,
    msg: `<td class="msg">${esc(job.message)}</td>`,
  };
  return `<tr data-job="${esc(job.id)}" data-state="${esc(job.state)}">` +
    cols.map((c) => cells[c]).join("") + "</tr>";
}

// Long lists (hundreds of running jobs at 100 agents) show their first TABLE_ROWS rows and a
// button for the rest, so the page does not scroll forever.
const TABLE_ROWS = 25;
const showAll = new Set();

function renderTable(id, jobs, cols, heads, empty, limit = 0) {
  const head = "<tr>" + heads.map((h) => `<th>${esc(h)}</th>`).join("") + "</tr>";
  const cut = limit && jobs.length > limit && !showAll.has(id);
  const shown = cut ? jobs.slice(0, limit) : jobs;
  let rows = shown.length ? shown.map((j) => jobRow(j, cols)).join("")
    : `<tr class="empty"><td colspan="${cols.length}">${esc(empty)}</td></tr>`;
  if (cut) {
    rows += `<tr class="more"><td colspan="${cols.length}"><button type="button" class="pager" ` +
      `data-more="${id}">show all ${jobs.length}</button></td></tr>`;
  }
  $(id).innerHTML = head + rows;
}

function renderJobs(snap) {
  const running = snap.jobs.filter((j) => j.state === "running" || j.state === "staging");
  const queued = snap.jobs.filter((j) => j.state === "queued");
  const done = snap.jobs.filter((j) => ["finished", "failed", "killed", "lost"].includes(j.state));
  renderTable("running", running, ["id", "user", "name", "gpus", "used", "state", "age"],
    ["Job", "User", "Name / framework", "GPUs", "Used", "State", "Age"], "nothing running",
    TABLE_ROWS);
  // the core's run order (the snapshot lists queued jobs by position)
  // a user's snapshot lists their own jobs only; the run order of everyone's is below
  $("queue-title").textContent = snap.me.admin ? "Queue" : "Your queued jobs";
  const empty = snap.me.admin ? "the queue is empty"
    : "none of your jobs is waiting (everyone's: Queue in run order, below)";
  renderTable("queue", queued, ["pos", "id", "user", "prio", "gpus", "wait", "msg"],
    ["#", "Job", "User", "Priority", "GPUs", "Waiting", "Why"], empty, TABLE_ROWS);
  renderTable("done", done, ["id", "user", "name", "gpus", "state", "age", "msg"],
    ["Job", "User", "Name / framework", "GPUs", "State", "Age", "Last message"], "none yet");
  $("running-count").textContent = `${running.length}`;
  $("queue-count").textContent = `${queued.length} waiting`;
}

// ---------------------------------------------------------------- agents

async function agentSvg(agent) {
  if (!agent.has_topology) return null;
  if (!(agent.id in state.svgs)) {
    state.svgs[agent.id] = api(`/v1/dashboard/agents/${encodeURIComponent(agent.id)}/topology`)
      .then((r) => r.svg).catch(() => { delete state.svgs[agent.id]; return null; });
  }
  return state.svgs[agent.id];
}

function holderColour(holder) {
  if (!holder) return null;
  return holder.job ? jobColour(holder.job) : TAKEN;
}

function holderText(gpu) {
  const h = gpu.holder;
  if (!h && gpu.shares && gpu.shares.length) {
    return `GPU${gpu.index}: shared by ` + gpu.shares.map((s) => s.job ? `${s.job} (${s.user})`
      : "another user").join(", ");
  }
  if (!h) return `GPU${gpu.index}: free`;
  return h.job ? `GPU${gpu.index}: ${h.job} (${h.user})` : `GPU${gpu.index}: taken by another user`;
}

// Colour the GPU boxes of a topology drawing. `focus` ({job, gpus: {agent id: [index]}}, on a
// job page) outlines that job's GPUs, dashed once the job has released them.
function paintGpus(box, agent, focus) {
  const mine = new Set(focus ? focus.gpus[agent.id] || [] : []);
  for (const gpu of agent.gpus) {
    const node = box.querySelector(`#node-gpu${gpu.index}`);
    if (!node) continue;
    const rect = node.querySelector("rect");
    const shares = gpu.shares || [];
    // a shared GPU takes its first share's colour, lighter (the cluster view splits it by job)
    const colour = holderColour(gpu.holder) ||
      (shares.length ? (shares[0].job ? jobColour(shares[0].job) : TAKEN) : null);
    const job = gpu.holder && gpu.holder.job;
    node.setAttribute("data-gpu", gpu.index);
    node.setAttribute("data-job", job || "");
    node.classList.toggle("held", !!gpu.holder);
    node.classList.toggle("shared", !gpu.holder && shares.length > 0);
    rect.setAttribute("fill", colour || "#ffffff");
    rect.setAttribute("fill-opacity", gpu.holder ? "1" : shares.length ? "0.55" : "0.9");
    const focused = mine.has(gpu.index);
    const released = focused && job !== focus.job;
    rect.setAttribute("stroke-width", focused ? "5" : "2.5");
    rect.setAttribute("stroke-dasharray", released ? "7,4" : "none");
    node.classList.toggle("focus", focused);
    // The box's second line says who holds the GPU (its CPU affinity when free).
    const texts = node.querySelectorAll("text");
    if (texts.length > 1) {
      const line = texts[1];
      if (line.dataset.orig === undefined) line.dataset.orig = line.textContent;
      line.textContent = gpu.holder ? (job || "taken")
        : shares.length ? `${shares.length} share${shares.length > 1 ? "s" : ""}` : line.dataset.orig;
      line.setAttribute("font-weight", gpu.holder ? "bold" : "normal");
    }
    let title = node.querySelector("title");
    if (!title) {
      title = document.createElementNS("http://www.w3.org/2000/svg", "title");
      node.prepend(title);
    }
    title.textContent = holderText(gpu);
  }
}

function agentLegend(agent, snap, focus) {
  const jobs = new Map();
  let taken = 0;
  for (const gpu of agent.gpus) {
    const h = gpu.holder;
    if (h && h.job) jobs.set(h.job, (jobs.get(h.job) || []).concat(gpu.index));
    else if (h) taken += 1;
    for (const s of gpu.shares || []) {
      if (s.job) jobs.set(s.job, (jobs.get(s.job) || []).concat(`${gpu.index} (share)`));
      else taken += 1;
    }
  }
  const names = Object.fromEntries(snap.jobs.map((j) => [j.id, j]));
  const items = [...jobs.entries()].map(([id, gpus]) => {
    const j = names[id];
    const what = j ? `${esc(j.name)} &middot; ${esc(j.user)}` : "";
    return `<span><span class="swatch" style="background:${jobColour(id)}"></span>` +
      `<a href="#/jobs/${esc(id)}">${esc(id)}</a> ${what} &middot; GPUs ${gpus.join(",")}</span>`;
  });
  if (taken) items.push(`<span><span class="swatch" style="background:${TAKEN}"></span>` +
    `${taken} GPU${taken > 1 ? "s" : ""} of other users</span>`);
  items.push(`<span><span class="swatch" style="background:#fff"></span>free</span>`);
  const own = focus ? focus.gpus[agent.id] || [] : [];
  if (own.length) {
    const held = agent.gpus.some((g) => g.holder && g.holder.job === focus.job);
    items.unshift(`<span class="focus-key"><span class="swatch outline"></span>this job: GPUs ` +
      `${own.join(",")}${held ? "" : " (released)"}</span>`);
  }
  return items.join("");
}

async function renderAgents(containerId, agents, snap, focus) {
  const container = $(containerId);
  if (!agents.length) {
    container.innerHTML = `<div class="agent"><i>No agent has offered resources yet.</i></div>`;
    return;
  }
  for (const el of [...container.children]) {
    if (!agents.some((a) => el.dataset.agent === a.id)) el.remove();
  }
  for (const agent of agents) {
    let box = [...container.children].find((el) => el.dataset.agent === agent.id);
    if (!box) {
      box = document.createElement("div");
      box.className = "agent";
      box.dataset.agent = agent.id;
      box.innerHTML = `<div class="agent-head"></div><div class="legend"></div><div class="drawing"></div>`;
      container.appendChild(box);
    }
    box.querySelector(".agent-head").innerHTML = `<b>${esc(agent.hostname)}</b>` +
      `<span class="sub">${esc(modelName(agent.model))} &middot; ${agent.allocated} of ${agent.total} GPUs allocated` +
      ` &middot; agent ${esc(agent.id)}</span>`;
    box.querySelector(".legend").innerHTML = agentLegend(agent, snap, focus);
    const drawing = box.querySelector(".drawing");
    const svg = await agentSvg(agent);
    if (svg && !drawing.querySelector("svg")) drawing.innerHTML = svg;
    if (!svg) {
      drawing.innerHTML = `<div class="gpu-row">` + agent.gpus.map((g) =>
        `<div class="gpu-chip" id="node-gpu${g.index}"><svg width="0" height="0"><rect/></svg>` +
        `GPU${g.index}</div>`).join("") + `</div>`;
      for (const g of agent.gpus) {
        const chip = drawing.querySelector(`#node-gpu${g.index}`);
        chip.style.background = holderColour(g.holder) || "#fff";
      }
    }
    paintGpus(drawing, agent, focus);
  }
}

// ---------------------------------------------------------------- plots

function plot(title, times, values, opts = {}) {
  const W = 360, H = 120, L = 34, R = 8, T = 8, B = 18;
  const last = values.length ? values[values.length - 1] : null;
  const fmt = opts.fmt || ((v) => `${v}`);
  const now = `<span class="now">${last == null ? "&ndash;" : esc(fmt(last))}</span>`;
  if (values.length < 2) {
    return `<div class="plot"><div class="title">${esc(title)}</div>${now}` +
      `<svg viewBox="0 0 ${W} ${H}"><text x="${W / 2}" y="${H / 2}" text-anchor="middle" ` +
      `fill="#90a4ae" font-size="12">collecting samples&hellip;</text></svg></div>`;
  }
  const t0 = times[0], t1 = times[times.length - 1] || t0 + 1;
  const top = Math.max((opts.max || 0) * 1.18, ...values, 1);
  const axisTop = opts.max || Math.max(...values, 1);
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / top) * (H - T - B);
  const pts = values.map((v, i) => `${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`);
  const area = `M${x(t0)},${y(0)} L${pts.join(" L")} L${x(t1)},${y(0)} Z`;
  const colour = opts.colour || "#1565c0";
  let ref = "";
  if (opts.max) {
    ref = `<line x1="${L}" x2="${W - R}" y1="${y(opts.max)}" y2="${y(opts.max)}" stroke="#90a4ae" ` +
      `stroke-dasharray="4,3"/><text x="${W - R}" y="${y(opts.max) - 4}" text-anchor="end" ` +
      `font-size="10" fill="#90a4ae">${esc(opts.maxLabel || "")}</text>`;
  }
  const axis = `<line x1="${L}" x2="${W - R}" y1="${y(0)}" y2="${y(0)}" stroke="#cfd8dc"/>` +
    `<text x="${L - 4}" y="${y(axisTop) + 4}" text-anchor="end" font-size="10" ` +
    `fill="#78909c">${esc(fmt(axisTop))}</text>` +
    `<text x="${L - 4}" y="${y(0)}" text-anchor="end" font-size="10" fill="#78909c">0</text>` +
    `<text x="${L}" y="${H - 3}" font-size="10" fill="#78909c">${clock(t0)}</text>` +
    `<text x="${W - R}" y="${H - 3}" text-anchor="end" font-size="10" fill="#78909c">${clock(t1)}</text>`;
  return `<div class="plot"><div class="title">${esc(title)}</div>${now}` +
    `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none">${axis}${ref}` +
    `<path d="${area}" fill="${colour}" fill-opacity="0.15"/>` +
    `<polyline points="${pts.join(" ")}" fill="none" stroke="${colour}" stroke-width="2"/></svg></div>`;
}

function renderPlots(snap) {
  const s = snap.series;
  const total = s.gpus_total.length ? s.gpus_total[s.gpus_total.length - 1] : 0;
  $("plots").innerHTML = [
    plot("GPUs allocated", s.t, s.gpus_allocated,
      { max: total, maxLabel: `all ${total} GPUs`, colour: "#2e7d32" }),
    plot("Jobs waiting", s.t, s.jobs_waiting, { colour: "#ef6c00" }),
    plot("Queue wait (longest)", s.t, s.queue_wait_s, { colour: "#6a1b9a", fmt: duration }),
  ].join("");
  const span = s.t.length > 1 ? duration(s.t[s.t.length - 1] - s.t[0]) : "";
  $("plot-window").textContent = span &&
    `last ${span}, a sample every ${snap.scheduler.sample_interval_s}s`;
}

function renderHeader(snap) {
  const sch = snap.scheduler;
  $("fw-facts").textContent = `framework "${sch.framework_name || "dlc"}" · DLC ${sch.version}` +
    (sch.framework_id ? ` · ${sch.framework_id}` : "") + (sch.registered ? "" : " · not registered");
  const link = $("mesos-link");
  link.hidden = !sch.framework_url;
  if (sch.framework_url) link.href = sch.framework_url;
  // DLC's emulator has no Mesos web UI: its page is a plain list, so say which it is.
  link.textContent = sch.master_kind === "emulator" ? "Mesos emulator \u2197" : "Mesos UI \u2197";
  $("who").textContent = `${snap.me.user}${snap.me.admin ? " (admin)" : ""}`;
  $("signout").hidden = false;
}

// ---------------------------------------------------------------- job page

function fact(label, value) {
  return `<dt>${esc(label)}</dt><dd>${value}</dd>`;
}

async function renderJob(jobId, snap) {
  const job = await api(`/v1/jobs/${encodeURIComponent(jobId)}`);
  $("job-title").textContent = `${job.id} · ${job.name}`;
  const badge = $("job-state");
  badge.textContent = job.state;
  badge.className = `state ${job.state}`;
  $("job-message").textContent = job.message || "";
  const ended = ["finished", "failed", "killed", "lost"].includes(job.state);
  const mine = snap.me.admin || job.user === snap.me.user;
  $("kill").hidden = ended || !mine || job.kill_requested;
  $("kill").dataset.job = job.id;
  // a share task lists no GPU ids but holds part of one; a CPU-only task holds none: "CPU
  // only", not an empty "GPUs" list
  const held = (t) => t.share_gpu != null ? `a share of GPU ${t.share_gpu}`
    : t.gpu_ids.length ? `GPUs ${t.gpu_ids.join(",")}` : "CPU only";
  const tasks = job.tasks.map((t) =>
    `${esc(t.hostname)} ${held(t)} <span class="msg">(${esc(t.state)})</span>`);
  $("job-facts").innerHTML = [
    fact("User", esc(job.user)),
    fact("Framework", esc(job.framework || "-")),
    fact("Image", `<code>${esc(job.image)}</code>`),
    // the job page reads /v1/jobs/{id}: a share is gpu_fraction/gpu_memory there, not share
    fact("GPUs", job.gpus === 0 && job.gpu_fraction == null && job.gpu_memory == null
      ? `${isGang(job) ? `${nodesOf(job)}x CPU only` : "CPU only"}: ${job.cpus} CPU${job.cpus === 1 ? "" : "s"} per node, no GPU`
      : isGang(job) ? `${nodesOf(job)}x${job.gpus} GPUs (${job.gpus} per node × ${nodesOf(job)} nodes)`
      : `${job.gpus} GPU${job.gpus === 1 ? "" : "s"}`),
    fact("Used", usedFact(snap.jobs.find((j) => j.id === job.id))),
    fact("Placed on", tasks.join("<br>") || "not yet"),
    fact("Command", `<code>${esc(job.command.join(" "))}</code>`),
    fact("Submitted", `${new Date(job.submitted_at * 1000).toLocaleString()} ` +
      `(${duration(snap.now - job.submitted_at)} ago)`),
    // numbered from 0 like `dlc status` and `dlc logs --attempt N`
    fact("Attempt", `${job.attempt} ${job.attempt ? `(retry ${job.attempt} of ${job.retries})`
      : `(the first run; retries allowed: ${job.retries})`}`),
  ].join("") + await environmentFact(job, mine, ended);
  const rows = job.history.map((h) => `<tr><td>${clock(h.at)}</td>` +
    `<td><span class="state ${esc(h.state)}">${esc(h.state)}</span></td>` +
    `<td class="msg">${esc(h.message)}</td></tr>`);
  $("job-history").innerHTML = "<tr><th>Time</th><th>State</th><th>Message</th></tr>" + rows.join("");
  const agents = snap.agents.filter((a) => job.tasks.some((t) => t.agent_id === a.id));
  const gpus = {};
  for (const t of job.tasks) gpus[t.agent_id] = (gpus[t.agent_id] || []).concat(t.gpu_ids);
  if (agents.length) await renderAgents("job-agents", agents, snap, { job: job.id, gpus });
  else $("job-agents").innerHTML = `<div class="agent"><i>No GPUs held (${esc(job.state)}).</i></div>`;
  await followLogs(job);
}

function usedFact(summary) {
  const u = summary && summary.usage;
  if (!u) return "no sample";
  if (u.util_pct === null || u.util_pct === undefined) {
    return `utilisation unknown, ${Math.round(u.mem_used_mib / 1024)} GiB of GPU memory`;
  }
  return `${Math.round(u.util_pct)}% busy, ${Math.round(u.mem_used_mib / 1024)} GiB of GPU memory` +
    ` (sampled ${clock(u.sampled_at)})` + (u.util_pct < IDLE_PCT ? " &middot; allocated but idle" : "");
}

// An interactive job's server (dlc submit --interactive): the link `dlc open` prints. Only the
// job's user or an admin gets it from the API; batch jobs answer 409 once and are remembered.
const notEnvironments = new Set();
async function environmentFact(job, mine, ended) {
  // only interactive jobs have an environment: asking for a batch job's would log a 409
  if (!job.interactive || !mine || ended || job.state !== "running") return "";
  if (notEnvironments.has(job.id)) return "";
  let url = "";
  try {
    url = (await api(`/v1/jobs/${encodeURIComponent(job.id)}/env`)).url;
  } catch (err) {
    if (err instanceof AuthError) throw err;
    notEnvironments.add(job.id);
    return "";
  }
  if (!url.startsWith("http://") && !url.startsWith("https://")) return fact("Environment", "starting…");
  return fact("Environment", `<a id="env-link" href="${esc(url)}" target="_blank" ` +
    `rel="noopener noreferrer">open JupyterLab</a>`);
}

async function followLogs(job) {
  if (state.logJob !== `${job.id}/${state.stream}`) {
    state.logJob = `${job.id}/${state.stream}`;
    state.logOffset = 0;
    $("logs").textContent = "";
  }
  if (!job.tasks.length) {
    $("logs").textContent = "(no logs until the job is placed)";
    return;
  }
  const key = state.logJob;
  const from = state.logOffset;
  const q = `stream=${state.stream}&offset=${from}&length=65536`;
  const out = await api(`/v1/jobs/${encodeURIComponent(job.id)}/logs?${q}`);
  appendLogs(key, from, out);
}

// Append a chunk read from offset `from` only while the page still shows that stream up to
// that offset: a chunk that arrives after another answer moved on (or after the page
// switched job or stream) is dropped, so no chunk is ever shown twice.
function appendLogs(key, from, out) {
  if (state.logJob !== key || state.logOffset !== from) return;
  if (out.data) {
    const pre = $("logs");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent += out.data;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }
  state.logOffset = out.offset;
}

// HA (docs/ha.md): which instance leads. /v1/health answers on every instance without a
// token; on a standby every other /v1 request is redirected to the leader.
async function renderRole() {
  const el = $("ha-role");
  let h;
  try {
    h = await (await fetch("/v1/health", { credentials: "same-origin" })).json();
  } catch (err) {
    return;  // the status line says the scheduler cannot be reached
  }
  el.hidden = h.instance === "single" || h.instance === undefined;
  if (el.hidden) return;
  el.classList.toggle("standby", !h.leading);
  el.textContent = h.leading ? `leader (${h.instance})` : `standby (${h.instance}) \u00b7 `;
  if (!h.leading && h.leader_url) {
    const a = document.createElement("a");
    a.href = h.leader_url;
    a.textContent = `leader: ${h.leader_url}`;
    el.appendChild(a);
  } else if (!h.leading) {
    el.appendChild(document.createTextNode("no leader elected yet"));
  }
}

// ---------------------------------------------------------------- loop

function route() {
  const m = window.location.hash.match(/^#\/jobs\/([A-Za-z0-9_.-]+)/);
  if (m) return { view: "job", id: m[1] };
  const a = window.location.hash.match(/^#\/agents\/([^/]+)/);
  return a ? { view: "agent", id: decodeURIComponent(a[1]) } : { view: "overview" };
}

// An agent's drill-down: its topology drawing with the GPUs coloured, and its jobs.
async function renderAgentPage(agentId, snap) {
  const agent = snap.agents.find((a) => a.id === agentId);
  $("agent-title").textContent = agent ? agent.hostname || agent.id : `no agent ${agentId}`;
  if (!agent) {
    $("agent-facts").textContent = "this agent is not in the cluster any more";
    $("agent-drawing").innerHTML = "";
    $("agent-jobs").innerHTML = "";
    return;
  }
  $("agent-facts").textContent = `${modelName(agent.model)} · pool ${agent.pool} · ` +
    `${sharingText(agent.sharing)} · ${agent.allocated} of ${agent.total} GPUs allocated` +
    (agent.shared ? `, ${agent.shared} shared` : "") +
    (agent.nvlink.length ? ` · NVLink groups ${agent.nvlink.map((g) => g.join(",")).join(" | ")}` : "") +
    ` · agent ${agent.id}`;
  const jobs = snap.jobs.filter((j) => j.tasks.some((t) => t.agent_id === agent.id) &&
    (j.state === "running" || j.state === "staging"));
  renderTable("agent-jobs", jobs, ["id", "user", "name", "gpus", "used", "state", "age"],
    ["Job", "User", "Name / framework", "GPUs", "Used", "State", "Age"], "no job runs here");
  await renderAgents("agent-drawing", [agent], snap, null);
}

// A job page the API answers 404 for: say so once (polling stops until the address changes).
function showNoSuchJob(message) {
  $("job-title").textContent = "no such job";
  $("job-state").textContent = "";
  $("job-state").className = "state";
  $("kill").hidden = true;
  $("job-message").textContent = `${message} (you see only your own jobs unless you are an admin)`;
  for (const id of ["job-facts", "job-history", "logs", "job-agents"]) $(id).innerHTML = "";
  $("status").textContent = "no such job";
}

// One refresh at a time: one asked for while another is in flight (a tab, the kill button,
// a new address, a fetch slower than the poll) runs once right after it, so two never read
// the same log offset or start two poll loops. dlcTimings.chained counts such requests.
async function refresh() {
  if (state.refreshing) {
    state.again = true;
    const timings = window.dlcTimings || (window.dlcTimings = { renders: 0 });
    timings.chained = (timings.chained || 0) + 1;
    return;
  }
  state.refreshing = true;
  clearTimeout(state.timer);
  let poll = false;
  try {
    poll = await refreshOnce();
  } finally {
    state.refreshing = false;
  }
  if (state.again) {
    state.again = false;
    refresh();
  } else if (poll) {
    state.timer = setTimeout(refresh, POLL_MS);
  }
}

// Fetch the snapshot and draw the page the address names; false when polling should stop
// (signed out, or a job page the API does not know).
async function refreshOnce() {
  renderRole();
  try {
    const snap = await api("/v1/dashboard");
    state.snapshot = snap;
    state.signedIn = true;
    const holders = snap.agents.flatMap((a) => a.gpus.flatMap((g) =>
      [g.holder && g.holder.job, ...(g.shares || []).map((s) => s.job)]));
    assignColours([...new Set(holders.filter(Boolean))].sort());
    renderHeader(snap);
    $("login-view").hidden = true;
    const where = route();
    $("overview-view").hidden = where.view !== "overview";
    $("job-view").hidden = where.view !== "job";
    $("agent-view").hidden = where.view !== "agent";
    const started = performance.now();
    if (where.view === "job") {
      await renderJob(where.id, snap);
    } else if (where.view === "agent") {
      await renderAgentPage(where.id, snap);
    } else {
      renderCards(snap);
      renderJobs(snap);
      renderCluster(snap);
      renderPlots(snap);
    }
    // for bench/dashboard.py: how long drawing one snapshot took, and when the first was drawn
    const timings = window.dlcTimings || (window.dlcTimings = { renders: 0 });
    timings.lastRenderMs = performance.now() - started;
    timings.renders += 1;
    if (!timings.firstDrawnAt) timings.firstDrawnAt = performance.now();
    $("status").textContent = `updated ${clock(snap.now)} · refreshes every ${POLL_MS / 1000}s`;
  } catch (err) {
    if (err instanceof AuthError) {
      // Not signed in yet is not a failure; a session that stopped working is.
      showLogin(state.signedIn ? `Sign-in failed: ${err.message}` : "");
      return false;
    }
    if (err instanceof NotFoundError && route().view === "job") {
      // another user's job, or a mistyped id: the API says "no job X" (404), not a failure
      showNoSuchJob(err.message);
      return false;
    }
    $("status").textContent = `cannot reach the scheduler (${err.message}); retrying`;
  }
  return true;
}

function start() {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = $("token-input").value.trim();
    $("token-input").value = "";
    try {
      await signIn(token);
    } catch (err) {
      showLogin(`Sign-in failed: ${err.message}`);
      return;
    }
    refresh();
  });
  $("signout").addEventListener("click", async () => {
    await fetch("/v1/session", { method: "DELETE", credentials: "same-origin" }).catch(() => {});
    showLogin("");
  });
  $("kill").addEventListener("click", async () => {
    const id = $("kill").dataset.job;
    if (!window.confirm(`Kill job ${id}?`)) return;
    $("kill").disabled = true;
    try {
      await api(`/v1/jobs/${encodeURIComponent(id)}/kill`, { method: "POST" });
    } catch (err) {
      $("job-message").textContent = `kill failed: ${err.message}`;
    }
    $("kill").disabled = false;
    refresh();
  });
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      state.stream = tab.dataset.stream;
      for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t === tab);
      refresh();
    });
  }
  document.addEventListener("click", (ev) => {
    const more = ev.target.closest && ev.target.closest("[data-more]");
    if (!more) return;
    showAll.add(more.dataset.more);
    if (state.snapshot) renderJobs(state.snapshot);
  });
  window.addEventListener("hashchange", () => {
    $("job-agents").innerHTML = "";
    $("agent-drawing").innerHTML = "";
    state.logJob = null;
    window.scrollTo(0, 0);
    refresh();
  });
  dropTokenFromAddress();
  renderRole();
  // Signed in already if the session cookie is there; else the form shows (asked without
  // a 401, so a fresh visit leaves the console clean).
  fetch("/v1/session", { credentials: "same-origin" })
    .then((resp) => resp.json())
    .then((who) => (who.user ? refresh() : showLogin("")))
    .catch(() => refresh());
}

start();
