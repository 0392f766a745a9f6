// DLC dashboard, the compact cluster view for 100+ agents: one table row per agent, one cell
// per GPU (a whole GPU in its job's colour, a shared GPU split into its shares by job, a bar
// for the measured use), the cells of an NVLink group outlined together, search, filters and
// pages. Only the rows of the page shown are drawn. Uses esc(), jobColour(), TAKEN from
// dashboard.js (called at render time, after both scripts are loaded).
"use strict";

const IDLE_PCT = 5;  // allocated GPUs below this utilisation are "allocated but idle"
const SHARING = {
  mps: "MPS (memory and compute limits; one tenant per GPU)",
  watchdog: "memory watchdog",
  shim: "time-slicing, memory limited at allocation (DLC's CUDA shim)",
  mig: "MIG instances",
  none: "time-slicing without limits",
};
const cluster = { search: "", model: "", pool: "", avail: "", user: "", page: 0, size: 25,
  bound: false };

function gpuBusy(gpu) {
  return !!gpu.holder || gpu.shares.length > 0;
}

// The driver may give memory but no utilisation (util_pct null): never call that idle.
function hasUtil(used) {
  return !!used && used.util_pct !== null && used.util_pct !== undefined;
}

function gpuIdle(gpu) {
  return gpuBusy(gpu) && hasUtil(gpu.used) && gpu.used.util_pct < IDLE_PCT;
}

function gpuFree(gpu) {
  return !gpuBusy(gpu) && gpu.state === "free";
}

function agentHolders(agent) {
  const out = [];
  for (const gpu of agent.gpus) {
    if (gpu.holder) out.push(gpu.holder);
    for (const s of gpu.shares) out.push(s);
  }
  return out;
}

function agentMatches(agent, f) {
  if (f.model && agent.model !== f.model) return false;
  if (f.pool && agent.pool !== f.pool) return false;
  const free = agent.gpus.filter(gpuFree).length;
  if (f.avail === "free" && free === 0) return false;
  if (f.avail === "busy" && free > 0) return false;
  if (f.avail === "idle" && !agent.gpus.some(gpuIdle)) return false;
  const holders = agentHolders(agent);
  if (f.user && !holders.some((h) => h.user === f.user)) return false;
  if (!f.search) return true;
  const hay = [agent.hostname, agent.id, agent.model, agent.pool, agent.sharing || "",
    agent.rack || "", agent.switch || "", agent.zone || "",
    ...holders.map((h) => `${h.job || ""} ${h.user || ""}`)].join(" ").toLowerCase();
  return f.search.toLowerCase().split(/\s+/).filter(Boolean).every((t) => hay.includes(t));
}

// Attribute values carry "_" for blanks (node-config): show the name as the driver says it.
function modelName(model) {
  return !model || model === "unknown" ? "GPU model not advertised" : model.replace(/_/g, " ");
}

function sharingText(sharing) {
  return sharing ? SHARING[sharing] || sharing : "no GPU sharing";
}

function usedText(used) {
  if (!used) return "no sample";
  const age = used.sampled_at ? ` at ${clock(used.sampled_at)}` : "";
  const mem = used.mem_total_mib ? `, ${Math.round(used.mem_used_mib / 1024)} of ` +
    `${Math.round(used.mem_total_mib / 1024)} GiB` : "";
  const util = hasUtil(used) ? `${used.util_pct}% busy` : "utilisation unknown";
  return `${util}${mem}${age}`;
}

function cellTitle(agent, gpu) {
  const lines = [`GPU${gpu.index}` + (gpu.memory_mib ? ` (${Math.round(gpu.memory_mib / 1024)} GiB)` : "")];
  if (gpu.holder) lines.push(gpu.holder.job ? `${gpu.holder.job} (${gpu.holder.user})` : "taken by another user");
  for (const s of gpu.shares) {
    const amount = s.core_milli ? `${s.core_milli / 1000} of the GPU` : `${Math.round(s.memory_mib / 1024)} GiB`;
    lines.push(`share ${amount}: ${s.job ? `${s.job} (${s.user})` : "another user"}`);
  }
  if (gpu.shares.length) lines.push(`shared by ${sharingText(agent.sharing)}`);
  if (!gpuBusy(gpu)) lines.push(gpu.state === "draining" ? "draining" : "free");
  else lines.push(`used: ${usedText(gpu.used)}` + (gpuIdle(gpu) ? " (allocated but idle)" : ""));
  return lines.join("\n");
}

function cellHtml(agent, gpu) {
  const cls = ["cell"];
  let segs = "";
  if (gpu.holder) {
    segs = `<i style="width:100%;background:${holderColour(gpu.holder)}"></i>`;
  } else if (gpu.shares.length) {
    cls.push("shared");
    segs = gpu.shares.map((s) => {
      const part = gpu.memory_mib ? s.memory_mib / gpu.memory_mib
        : (s.core_milli / 1000 || 1 / (gpu.shares.length + 1));
      const colour = s.job ? jobColour(s.job) : TAKEN;
      return `<i data-job="${esc(s.job || "")}" style="width:${Math.max(4, Math.round(part * 100))}%;` +
        `background:${colour}"></i>`;
    }).join("");
  } else if (gpu.state === "draining") {
    cls.push("draining");
  }
  let bar = "";
  if (gpuBusy(gpu)) {
    if (!gpu.used) cls.push("nosample");
    else bar = `<b class="use" style="width:${Math.min(100, gpu.used.util_pct || 0)}%"></b>`;
    if (gpuIdle(gpu)) cls.push("idle");
  }
  const job = gpu.holder && gpu.holder.job;
  return `<span class="${cls.join(" ")}" data-gpu="${gpu.index}" data-job="${esc(job || "")}" ` +
    `title="${esc(cellTitle(agent, gpu))}"><span class="segs">${segs}</span>${bar}` +
    `<span class="idx">${gpu.index}</span></span>`;
}

function cellsHtml(agent) {
  const byIndex = new Map(agent.gpus.map((g) => [g.index, g]));
  const grouped = new Set(agent.nvlink.flat());
  const groups = agent.nvlink.map((ids) =>
    `<span class="nvg" title="NVLink group: GPUs ${ids.join(",")}">` +
    ids.filter((i) => byIndex.has(i)).map((i) => cellHtml(agent, byIndex.get(i))).join("") + "</span>");
  const loose = agent.gpus.filter((g) => !grouped.has(g.index));
  if (loose.length) groups.push(`<span class="nvg none">${loose.map((g) => cellHtml(agent, g)).join("")}</span>`);
  return groups.join("");
}

function usedSummary(agent) {
  const busy = agent.gpus.filter(gpuBusy);
  if (!busy.length) return `<span class="sub">nothing allocated</span>`;
  const sampled = busy.filter((g) => hasUtil(g.used));
  if (!sampled.length) return `<span class="sub">no sample</span>`;
  const avg = Math.round(sampled.reduce((a, g) => a + g.used.util_pct, 0) / sampled.length);
  const idle = busy.filter(gpuIdle).length;
  const missing = busy.length - sampled.length;
  return `${avg}%` + (idle ? ` <span class="idle-tag">${idle} idle</span>` : "") +
    (missing ? `<div class="sub">${missing} no sample</div>` : "");
}

function agentRow(agent) {
  const model = modelName(agent.model);
  const shared = agent.shared ? `<div class="sub">+${agent.shared} shared</div>` : "";
  return `<tr class="agent-row" data-agent="${esc(agent.id)}">` +
    `<td class="host"><a href="#/agents/${encodeURIComponent(agent.id)}">${esc(agent.hostname || agent.id)}</a>` +
    `<div class="sub">${esc(agent.id)}</div></td>` +
    `<td>${esc(model)}<div class="sub">pool ${esc(agent.pool)} &middot; ${esc(sharingText(agent.sharing))}</div></td>` +
    `<td class="num">${agent.allocated}/${agent.total}${shared}</td>` +
    `<td class="num">${usedSummary(agent)}</td>` +
    `<td class="cells">${cellsHtml(agent)}</td></tr>`;
}

// Agents that name a rack (node-config --rack) are shown rack by rack, each rack under a
// header row with its switches, zone and free GPUs; agents without one come last.
function rackKey(agent) {
  return agent.rack ? `${agent.zone || ""}\u0000${agent.rack}` : "\uffff";
}

function byRack(agents) {
  if (!agents.some((a) => a.rack)) return agents;
  // a stable sort: within a rack the agents keep their order (by hostname)
  return [...agents].sort((a, b) => (rackKey(a) < rackKey(b) ? -1 : rackKey(a) > rackKey(b) ? 1 : 0));
}

function rackRow(key, members) {
  const first = members[0];
  const free = members.reduce((n, a) => n + a.gpus.filter(gpuFree).length, 0);
  const total = members.reduce((n, a) => n + a.total, 0);
  const switches = [...new Set(members.map((a) => a.switch).filter(Boolean))].sort();
  const parts = [`${members.length} agent${members.length === 1 ? "" : "s"}`, `${free} of ${total} GPUs free`];
  if (switches.length) parts.push(`switch ${esc(switches.join(", "))}`);
  if (first.zone) parts.push(`zone ${esc(first.zone)}`);
  const name = first.rack ? `rack ${esc(first.rack)}` : "no rack";
  return `<tr class="rack-row" data-rack="${esc(first.rack || "")}"><td colspan="5"><b>${name}</b>` +
    ` &middot; ${parts.join(" &middot; ")}</td></tr>`;
}

function rowsByRack(rows, shown) {
  if (!shown.some((a) => a.rack)) return rows.map(agentRow).join("");
  const racks = new Map();
  for (const a of shown) {
    const key = rackKey(a);
    if (!racks.has(key)) racks.set(key, []);
    racks.get(key).push(a);
  }
  let last = null;
  return rows.map((a) => {
    const key = rackKey(a);
    const head = key === last ? "" : rackRow(key, racks.get(key));
    last = key;
    return head + agentRow(a);
  }).join("");
}

function clusterLegend() {
  const sw = (style, cls = "") => `<span class="cell key ${cls}"><span class="segs">${style}</span></span>`;
  return [
    `<span>${sw(`<i style="width:100%;background:${JOB_COLOURS[0]}"></i>`)} a job's whole GPU (colour per job)</span>`,
    `<span>${sw(`<i style="width:30%;background:${JOB_COLOURS[1]}"></i><i style="width:20%;background:${JOB_COLOURS[2]}"></i>`, "shared")} shares by job, white part free</span>`,
    `<span>${sw(`<i style="width:100%;background:${TAKEN}"></i>`)} another user's</span>`,
    `<span>${sw("")} free</span>`,
    `<span>${sw("", "draining")} draining</span>`,
    `<span><span class="cell key"><span class="segs"></span><b class="use" style="width:60%"></b></span> measured use (bar)</span>`,
    `<span>${sw(`<i style="width:100%;background:${JOB_COLOURS[0]}"></i>`, "idle")} allocated but idle (&lt;${IDLE_PCT}%)</span>`,
    `<span>${sw(`<i style="width:100%;background:${JOB_COLOURS[4]}"></i>`, "nosample")} no sample</span>`,
    `<span><span class="nvg key">${sw("")}${sw("")}</span> NVLink group</span>`,
  ].join("");
}

function fillSelect(id, values, all) {
  const el = $(id);
  const key = values.join("\n");
  if (el.dataset.values === key && el.options.length) return;  // an open list stays open
  el.dataset.values = key;
  const current = el.value;
  el.innerHTML = `<option value="">${esc(all)}</option>` +
    values.map((v) => `<option value="${esc(v)}">${esc(v)}</option>`).join("");
  el.value = values.includes(current) ? current : "";
}

function bindClusterControls() {
  if (cluster.bound) return;
  cluster.bound = true;
  const rerender = () => { cluster.page = 0; renderCluster(state.snapshot); };
  $("agent-search").addEventListener("input", (ev) => { cluster.search = ev.target.value.trim(); rerender(); });
  for (const [id, key] of [["f-model", "model"], ["f-pool", "pool"], ["f-avail", "avail"], ["f-user", "user"]]) {
    $(id).addEventListener("change", (ev) => { cluster[key] = ev.target.value; rerender(); });
  }
  $("page-size").addEventListener("change", (ev) => { cluster.size = Number(ev.target.value); rerender(); });
  $("page-prev").addEventListener("click", () => { cluster.page -= 1; renderCluster(state.snapshot); });
  $("page-next").addEventListener("click", () => { cluster.page += 1; renderCluster(state.snapshot); });
}

function renderCluster(snap) {
  if (!snap) return;
  bindClusterControls();
  const agents = snap.agents;
  const sorted = (xs) => [...new Set(xs)].filter(Boolean).sort();
  fillSelect("f-model", sorted(agents.map((a) => a.model)), "all models");
  fillSelect("f-pool", sorted(agents.map((a) => a.pool)), "all pools");
  fillSelect("f-user", sorted(agents.flatMap((a) => agentHolders(a).map((h) => h.user))), "all users");
  for (const key of ["model", "pool", "user"]) cluster[key] = $(`f-${key}`).value;
  $("cluster-legend").innerHTML = clusterLegend();
  const shown = byRack(agents.filter((a) => agentMatches(a, cluster)));
  const pages = Math.max(1, Math.ceil(shown.length / cluster.size));
  cluster.page = Math.min(Math.max(0, cluster.page), pages - 1);
  const first = cluster.page * cluster.size;
  const rows = shown.slice(first, first + cluster.size);
  const head = "<tr><th>Agent</th><th>GPU model &middot; pool &middot; sharing</th>" +
    "<th>Allocated</th><th>Used</th><th>GPUs</th></tr>";
  $("agents").innerHTML = head + (rows.length ? rowsByRack(rows, shown)
    : `<tr class="empty"><td colspan="5">${agents.length ? "no agent matches" : "No agent has offered resources yet."}</td></tr>`);
  const of = shown.length === agents.length ? "" : ` (filtered from ${agents.length})`;
  $("agent-count").textContent = shown.length
    ? `${first + 1}\u2013${first + rows.length} of ${shown.length} agents${of}` : `0 agents${of}`;
  $("page-info").textContent = `page ${cluster.page + 1} of ${pages}`;
  $("page-prev").disabled = cluster.page === 0;
  $("page-next").disabled = cluster.page >= pages - 1;
}
