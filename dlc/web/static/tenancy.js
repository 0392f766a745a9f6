// Groups and quotas on the dashboard: each group's usage against its guarantee, what it
// borrows, per-user limits with what each user holds, decayed usage over time (fair share),
// and the queue in run order with reasons. Self-contained: polls GET /v1/tenancy
// (same-origin session cookie) and fills #tenancy; cells are set with textContent only.
(function () {
  "use strict";
  const root = document.getElementById("tenancy");
  if (!root) return;
  const num = (v) => (v === null || v === undefined ? "-" : String(Math.round(v * 1000) / 1000));

  function table(id, head, rows) {
    const el = document.getElementById(id);
    el.replaceChildren();
    const tr = el.insertRow();
    for (const h of head) {
      const th = document.createElement("th");
      th.textContent = h;
      tr.appendChild(th);
    }
    for (const row of rows) {
      const r = el.insertRow();
      for (const value of row) r.insertCell().textContent = value;
    }
  }

  // a queue row's GPUs, or "CPU only" ("2x CPU only": a gang) as the job tables show it
  function gpus(r) {
    if (!r.cpu_only) return num(r.gpus);
    return r.nodes > 1 ? r.nodes + "x CPU only" : "CPU only";
  }

  // memory in MiB as GiB: "256G" ("-": no cap)
  const gib = (mib) => (mib === null || mib === undefined ? "-" : num(mib / 1024) + "G");

  // a time limit in seconds as the largest whole-ish unit: "8 h", "90 min", "45 s"
  function duration(s) {
    if (s === null || s === undefined) return "-";
    if (s >= 3600) return num(s / 3600) + " h";
    if (s >= 60) return num(s / 60) + " min";
    return num(s) + " s";
  }

  function bar(used, guaranteed) {
    if (!guaranteed) return used ? "borrowing " + num(used) : "";
    const pct = Math.round((100 * used) / guaranteed);
    return pct + "% of guarantee";
  }

  async function refresh() {
    const overview = document.getElementById("overview-view");
    if (!overview || overview.hidden) return; // signed out: nothing to ask for
    let body;
    try {
      // given up after a while (dashboard.js's REQUEST_MS): a tick waits on it
      const resp = await fetch("/v1/tenancy", {
        credentials: "same-origin",
        signal: AbortSignal.timeout(window.dlcRequestMs || 30000),
      });
      if (!resp.ok) return;
      body = await resp.json();
    } catch (err) {
      return;
    }
    root.hidden = false;
    table(
      "tenancy-quota",
      ["group", "pool", "GPUs used / guaranteed", "borrowed", "ceiling", "waiting",
        "CPUs used / guaranteed", ""],
      body.quota.quotas.map((q) => [
        q.group, q.pool, num(q.used.gpus) + " / " + num(q.guaranteed.gpus),
        num(q.borrowed.gpus), q.ceiling ? num(q.ceiling.gpus) : "-", num(q.waiting.gpus),
        // CPU-only work shows here (its GPU columns stay 0), as in `dlc quota`
        num(q.used.cpus) + " / " + num(q.guaranteed.cpus),
        bar(q.used.gpus, q.guaranteed.gpus),
      ]),
    );
    // per-user limits (GET /v1/quota's rows: a non-admin gets only their own)
    const limits = body.quota.limits || [];
    for (const id of ["tenancy-limits-title", "tenancy-limits"]) {
      document.getElementById(id).hidden = !limits.length;
    }
    const held = (l, amount, cap, shown = num) =>
      shown((l.held || {})[amount] || 0) + " / " + shown(l[cap]);
    table(
      "tenancy-limits",
      ["user", "running jobs", "GPUs", "CPUs", "memory", "interactive environments",
        "longest interactive run"],
      limits.map((l) => [
        l.user, held(l, "running", "max_running"), held(l, "gpus", "max_gpus"),
        held(l, "cpus", "max_cpus"), held(l, "mem_mib", "max_mem_mib", gib),
        held(l, "environments", "max_interactive"), duration(l.max_interactive_s),
      ]),
    );
    const fair = body.quota.fair_share;
    for (const id of ["tenancy-fair-title", "tenancy-fair"]) {
      document.getElementById(id).hidden = !fair;
    }
    if (fair) {
      document.getElementById("tenancy-fair-note").textContent =
        "decayed billed GPU-hours (a job is billed the largest of its GPUs, CPUs and memory," +
        " each counted in GPUs" + (fair.billing && fair.billing.cpus_default
          ? "; no GPU in the cluster: " + num(fair.billing.cpus_per_gpu) + " CPUs bill as one GPU"
          : "") + "), half-life " + num(fair.half_life_s / 86400) +
        " d; lower usage for its weight borrows first and is reclaimed last";
      table(
        "tenancy-fair",
        ["group", "billed GPU-hours (decayed)", "weight (GPUs)", "usage / weight", "users"],
        fair.groups.map((g) => [
          g.group, num(g.gpu_hours), num(g.weight), num(g.ratio),
          g.users.map((u) => u.user + " " + num(u.gpu_hours)).join(", "),
        ]),
      );
    }
    table(
      "tenancy-queue",
      ["#", "job", "user", "group", "pool", "priority", "GPUs", "CPUs", "reason"],
      body.queue.map((r) => r.hidden ? [r.position, "-", "another user", "", "", "", "", "", ""] : [
        r.position, r.id, r.user, r.group + " #" + r.group_position, r.pool,
        r.priority_class || r.priority, gpus(r), num(r.cpus),
        (r.admitted ? "next to run; " : "") + r.reason,
      ]),
    );
  }

  // one request at a time: a tick while the last is still out is skipped (an older answer
  // arriving last would draw over a newer one)
  let busy = false;
  async function tick() {
    if (busy) return;
    busy = true;
    try {
      await refresh();
    } finally {
      busy = false;
    }
  }

  tick();
  setInterval(tick, 5000);
})();
