// Codex Replay controller page. Talks only to its own server (same origin); builds the page
// with textContent, never innerHTML, so no recorded text can become markup.
"use strict";

const DRAFT_KEY = "hermes-codex-replay.controller-draft.v1";
const PAGE = 20;
const state = { offset: 0, search: "", selected: null, planToken: null, planned: null,
                runs: new Map(), heartbeat: 15 };

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

async function api(path, body) {
  const response = await fetch(path, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}), credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({ error: "bad response" }));
  if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
  return data;
}

async function call(name, args) {
  return (await api("/api/call", { name: name, arguments: args || {} })).result;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function saveDraft() {
  const draft = { selected: state.selected, models: $("models").value,
                  turns: $("turns").value, baseline: $("baseline").value,
                  parallel: $("parallel").value };
  try { localStorage.setItem(DRAFT_KEY, JSON.stringify(draft)); } catch (e) { /* private mode */ }
}

function loadDraft() {
  try {
    const draft = JSON.parse(localStorage.getItem(DRAFT_KEY) || "null");
    if (!draft) return;
    for (const key of ["models", "turns", "baseline", "parallel"]) {
      if (typeof draft[key] === "string") $(key).value = draft[key];
    }
    if (draft.selected && typeof draft.selected.ref === "string") select(draft.selected);
  } catch (e) { /* a broken draft is dropped */ }
}

function request() {
  const args = { source: state.selected.ref };
  const models = $("models").value.split(",").map((m) => m.trim()).filter(Boolean);
  if (models.length) args.models = models;
  if ($("turns").value.trim()) args.turns = $("turns").value.trim();
  if ($("baseline").value.trim()) args.baseline = $("baseline").value.trim();
  const parallel = parseInt($("parallel").value, 10);
  if (!Number.isNaN(parallel)) args.parallel = parallel;
  return args;
}

function invalidatePlan() {
  state.planToken = null;
  state.planned = null;
  $("start").disabled = true;
  $("plan-text").hidden = true;
  saveDraft();
}

function select(session) {
  state.selected = { ref: session.ref, title: session.title || session.preview || "" };
  $("selected").textContent = "Selected: " + session.ref +
    (state.selected.title ? " — " + state.selected.title : "");
  $("plan").disabled = false;
  for (const item of document.querySelectorAll("#sessions li")) {
    item.classList.toggle("selected", item.dataset.ref === session.ref);
  }
  invalidatePlan();
}

async function loadSessions(append) {
  showError("");
  if (!append) { state.offset = 0; $("sessions").replaceChildren(); }
  try {
    const page = await call("list_sessions", { search: state.search || undefined,
                                               limit: PAGE, offset: state.offset });
    for (const session of page.sessions) {
      const item = el("li");
      item.dataset.ref = session.ref;
      item.append(el("div", session.title || session.preview || "(no title)"));
      const when = session.started_at ? new Date(session.started_at * 1000).toLocaleString() : "";
      item.append(el("div", session.ref + " · " + session.user_turns + " turns · " + when,
                     "ref muted"));
      item.addEventListener("click", () => select(session));
      if (state.selected && state.selected.ref === session.ref) item.classList.add("selected");
      $("sessions").append(item);
    }
    state.offset += page.sessions.length;
    $("more").hidden = !page.has_more;
    $("sessions-count").textContent = state.offset + " of " + page.total;
  } catch (e) { showError(e.message); }
}

async function plan() {
  showError("");
  try {
    const result = await call("plan_replay", request());
    state.planToken = result.plan_token;
    state.planned = JSON.stringify(request());
    $("plan-text").textContent = result.description;
    $("plan-text").hidden = false;
    $("start").disabled = false;
  } catch (e) { invalidatePlan(); showError(e.message); }
}

async function start() {
  showError("");
  if (!state.planToken || state.planned !== JSON.stringify(request())) {
    invalidatePlan();
    showError("The configuration changed: show the plan again.");
    return;
  }
  $("start").disabled = true;
  try {
    const args = request();
    args.plan_token = state.planToken;
    const started = await call("start_replay", args);
    state.runs.set(started.run_id, { run_id: started.run_id, status: "pending" });
    invalidatePlan();
    renderRuns();
    poll();
  } catch (e) { showError(e.message); $("start").disabled = false; }
}

function renderRuns() {
  const list = $("runs");
  list.replaceChildren();
  const runs = [...state.runs.values()].sort((a, b) => (a.run_id < b.run_id ? 1 : -1));
  if (!runs.length) list.append(el("li", "No runs yet.", "muted"));
  for (const run of runs) {
    const item = el("li");
    item.dataset.run = run.run_id;
    const head = el("div");
    head.append(el("span", run.run_id, "ref"), document.createTextNode(" "),
                el("span", run.status, "status " + run.status));
    item.append(head);
    for (const v of run.variants || []) {
      if (typeof v !== "object") continue;
      const line = el("div", null, "progress");
      line.dataset.variant = v.name;
      line.append(el("span", v.name + ": "), el("span", v.status, "variant-status"),
                  document.createTextNode(", " + v.turns_done + "/" + v.turns_total +
                    " turns, " + Number(v.tokens || 0).toLocaleString() + " tokens, " +
                    Number(v.elapsed || 0).toFixed(1) + " s" +
                    (v.error ? " — " + v.error : "")));
      item.append(line);
    }
    if (run.error) item.append(el("div", run.error, "error"));
    if (run.rerun_interrupted) {
      item.append(el("div", "Interrupted turns rerun alone with: " + run.rerun_interrupted,
                     "muted rerun"));
    }
    const actions = el("div", null, "row");
    if (run.status === "pending" || run.status === "running") {
      const cancel = el("button", "Cancel run", "secondary cancel");
      cancel.type = "button";
      cancel.addEventListener("click", async () => {
        try { await call("cancel_run", { run_id: run.run_id }); poll(); }
        catch (e) { showError(e.message); }
      });
      actions.append(cancel);
    }
    if (run.report_html) {
      const link = el("a", "Open the report", "report-link");
      link.href = "/runs/" + encodeURIComponent(run.run_id) + "/report.html";
      link.target = "_blank";
      link.rel = "noopener";
      actions.append(link);
    }
    item.append(actions);
    list.append(item);
  }
}

async function poll() {
  for (const run of [...state.runs.values()]) {
    if (run.status !== "pending" && run.status !== "running" && run.report_html !== undefined) {
      continue;
    }
    try {
      const view = await call("get_run", { run_id: run.run_id });
      state.runs.set(run.run_id, view);
    } catch (e) { showError(e.message); }
  }
  renderRuns();
}

async function loadState() {
  const data = await api("/api/state");
  state.heartbeat = data.heartbeat_interval_seconds || 15;
  $("controller-id").textContent = "Controller " + data.controller_session_id.slice(0, 8) +
    " · runs in " + data.run_root;
  for (const run of data.recent_runs) {
    if (!state.runs.has(run.run_id)) state.runs.set(run.run_id, run);
  }
  await poll();
}

function boot() {
  $("search-button").addEventListener("click", () => {
    state.search = $("search").value.trim(); loadSessions(false);
  });
  $("search").addEventListener("keydown", (event) => {
    if (event.key === "Enter") { state.search = $("search").value.trim(); loadSessions(false); }
  });
  $("more").addEventListener("click", () => loadSessions(true));
  $("plan").addEventListener("click", plan);
  $("start").addEventListener("click", start);
  for (const id of ["models", "turns", "baseline", "parallel"]) {
    $(id).addEventListener("input", invalidatePlan);
  }
  loadDraft();
  loadSessions(false);
  loadState().catch((e) => showError(e.message));
  setInterval(() => api("/api/heartbeat").catch(() => {}), state.heartbeat * 1000);
  setInterval(() => {
    if ([...state.runs.values()].some((r) => r.status === "pending" || r.status === "running")) {
      poll();
    }
  }, 1000);
}

document.addEventListener("DOMContentLoaded", boot);
