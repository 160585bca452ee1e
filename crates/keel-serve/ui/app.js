// keel's browser UI. Model and tool text is only ever set as textContent (never HTML).
"use strict";

// The credential lives in sessionStorage only; the fragment that brought it is stripped at once.
// `#token=` is the printed URL; `#code=` is `--open`'s one-time launch code, redeemed here.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token") || fragment.get("code")) history.replaceState(null, "", location.pathname);
if (fragment.get("token")) sessionStorage.setItem("keel-token", fragment.get("token"));
let token = sessionStorage.getItem("keel-token") || "";
const launched = (async () => {
  const code = fragment.get("code");
  if (!code) return;
  const response = await fetch("/api/launch", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }) });
  if (response.ok) {
    token = (await response.json()).token || "";
    sessionStorage.setItem("keel-token", token);
  }
})();

const $ = (id) => document.getElementById(id);
const view = {
  session: null, lastId: 0, stream: null, live: null, liveKind: null,
  cards: new Map(), busy: false, attempt: [], pending: null, reloading: null,
  // Prompts typed while a turn runs, sent one by one as turns end (this tab's own); paused
  // after a turn that failed or was stopped, until Send resumes it.
  queue: [], queuePaused: false,
  // The numbered diff each call's preview showed (approval or tool/preview), by call id: kept
  // over the history's unnumbered one when the transcript is redrawn.
  numbered: new Map(),
  // Each running subagent's session: its `task` card's call id, its rounds, what it does now.
  children: new Map(),
};

function api(path, options = {}) {
  const headers = Object.assign({ "Content-Type": "application/json" }, options.headers || {});
  if (token) headers.Authorization = "Bearer " + token;
  return fetch(path, Object.assign({}, options, { headers }));
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// What a retried failure was, in words (the kind names stay in the events).
const RETRIED = {
  server: "the provider failed to answer", rate_limit: "the provider is rate limiting requests",
  timeout: "the provider did not answer in time", transport: "the connection to the provider failed",
  empty_response: "the provider returned an empty response", stream_corrupt: "the provider's stream broke the protocol",
  upstream_reason_missing: "the upstream rejected the request without giving a reason",
};

function scrollDown() { $("transcript").scrollTop = $("transcript").scrollHeight; }

// Markdown arrives rendered: keel's renderer writes the HTML (escaped text, fixed tags and
// classes, links only to http(s)/mailto), the same parse the terminal draws. The page
// renders no markdown of its own.
function markdownBox(html, className = "msg md") {
  const box = el("div", className);
  box.innerHTML = html;
  return box;
}

// A diff keel's renderer wrote (numbered, in hunks), as the terminal shows it.
function diffBox(html) {
  const diff = el("div", "filediff");
  diff.innerHTML = html;
  return diff;
}

// A code block's copy button copies the code as text.
document.addEventListener("click", (e) => {
  const button = e.target.closest && e.target.closest("button.copy");
  if (!button) return;
  const code = button.closest(".code").querySelector("code");
  navigator.clipboard.writeText(code.textContent).then(
    () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1500); },
    () => { button.textContent = "select and copy"; });
});

function subjectOf(name, argumentsText, subject) {
  if (subject && name !== "web_fetch" && name !== "task") return subject;
  try {
    const args = JSON.parse(argumentsText);
    // The plan's card names what comes next, as the terminal's does.
    if (name === "todo_write") {
      const todos = Array.isArray(args.todos) ? args.todos : [];
      const next = todos.find((todo) => todo.status !== "completed");
      return next ? "next: " + next.content : (todos.length ? "every item done" : "the plan");
    }
    if (name === "task") return `${args.agent}: ${args.description}`;
    return args.command || args.path || args.pattern || args.url || argumentsText;
  } catch (_) { return argumentsText; }
}

function card(event) {
  const known = view.cards.get(event.call_id);
  if (known) return known.box;
  const box = el("div", "card");
  box.appendChild(el("strong", "", "● " + event.name + " "));
  box.appendChild(el("span", "subject", subjectOf(event.name, event.arguments, event.subject)));
  // An edit's or a write's change: the numbered preview this page saw, else keel's renderer's
  // drawing of the call's arguments.
  const diff = view.numbered.get(event.call_id) || event.diff_html;
  if (diff !== undefined) box.appendChild(diffBox(diff));
  const state = el("div", "state muted", "running…");
  box.appendChild(state);
  view.cards.set(event.call_id, { box, state });
  $("transcript").appendChild(box);
  return box;
}

// This call's change, from keel's renderer (numbered: the file as it was when asked), in
// place of anything shown before; remembered for the redraw after the turn.
function showNumberedDiff(callId, box, html) {
  view.numbered.set(callId, html);
  showDiff(box, html);
}

function showDiff(box, html) {
  box.querySelectorAll(".filediff").forEach((node) => node.remove());
  box.querySelector(".subject").after(diffBox(html));
}

// A running command: the time it has run, and the end of its output as it arrives (the same
// redacted stream the terminal shows).
const LIVE_LINES = 12;
// A command that ran confined to reading (a read-only command run without a question, or any
// command in read-only or plan mode): said on its card.
function markReadOnly(entry) {
  if (entry.box.querySelector(".read-only")) return;
  const badge = el("span", "badge read-only", "read-only");
  badge.title = "it ran confined to reading";
  entry.box.querySelector(".subject").after(badge);
}

function started(event) {
  const entry = view.cards.get(event.call_id);
  if (!entry) return;
  if (event.read_only) markReadOnly(entry);
  const since = Date.now();
  const tick = () => {
    if (!entry.state.classList.contains("muted")) return;
    entry.state.textContent = `running… ${Math.floor((Date.now() - since) / 1000)} s`;
  };
  entry.timer = setInterval(tick, 1000);
}

function output(event) {
  const entry = view.cards.get(event.call_id);
  if (!entry) return;
  entry.output = ((entry.output || "") + event.delta).slice(-65536);
  if (!entry.live) {
    entry.live = el("pre", "live-output");
    entry.state.before(entry.live);
  }
  const lines = entry.output.replace(/\n$/, "").split("\n");
  const hidden = lines.length > LIVE_LINES ? `… ${lines.length - LIVE_LINES} lines above\n` : "";
  entry.live.textContent = hidden + lines.slice(-LIVE_LINES).join("\n");
}

function ended(entry) {
  if (entry.timer) clearInterval(entry.timer);
  if (entry.live) entry.live.remove();
  entry.live = null; entry.timer = null;
}

// `session`: the asking session (a subagent's own, whose call ids repeat the parent's: its
// cards are keyed `SESSION/CALL`).
function askOnCard(event, session = view.session) {
  const key = session === view.session ? event.call_id : `${session}/${event.call_id}`;
  const entry = view.cards.get(key) || { box: card(Object.assign({}, event, { call_id: key })), state: null };
  if (entry.box.querySelector(".actions")) return;
  if (event.plan_html !== undefined) return askPlan(event, entry);
  // The subject folded as on every surface: a run of blanks or a long line cannot push the
  // command out of sight, and its head stands next to the question.
  const folded = event.view || { lines: [event.subject || ""], line_count: 1, head: event.subject || "" };
  entry.box.querySelector(".subject").textContent = folded.lines.join("\n");
  // The exact change a write or an edit would make, numbered (keel's renderer wrote it).
  if (event.diff_html !== undefined) showNumberedDiff(key, entry.box, event.diff_html);
  const actions = el("div", "actions");
  const count = (folded.line_count > 1 ? ` (${folded.line_count} lines)` : "")
    + (folded.hidden_chars ? ` — ${folded.hidden_chars} characters of long lines not shown` : "");
  // Running it again outside the sandbox: said as such, and never "always". "always" says what
  // it covers, and is not offered where keel can remember nothing (a line it cannot read).
  const choices = event.unconfined
    ? [["allow", "run it UNCONFINED"], ["deny", "deny"]]
    : [["allow", "allow"], ["deny", "deny"]].concat(typeof event.always === "string"
      ? [["always", `always for ${event.always} (this session, never saved)`]] : []);
  if (event.unconfined) {
    entry.box.classList.add("unconfined");
    actions.appendChild(el("div", "warning",
      "It failed inside keel's sandbox, and its output suggests the sandbox refused something " +
      "(the output is the command's own: keel cannot verify it). Run it again OUTSIDE the " +
      "sandbox — unconfined, with your full access, running the workspace's code as the " +
      "sandboxed run may have left it?"));
    actions.appendChild(el("span", "muted", "run "));
  } else {
    // Why it is asked, in keel's words (a read outside the workspace).
    if (event.reason) actions.appendChild(el("div", "warning", event.reason));
    actions.appendChild(el("span", "muted", "allow "));
  }
  actions.appendChild(el("code", "ask-head", folded.head + count));
  actions.appendChild(el("span", "muted", "? "));
  // A note for the model goes with a denial (what to do instead).
  const note = el("input", "deny-note");
  note.type = "text";
  note.placeholder = "note for the model (with deny)";
  note.setAttribute("aria-label", "note for the model");
  for (const [decision, label] of choices) {
    const button = el("button", "decision decision-" + decision, label);
    button.type = "button";
    button.addEventListener("click", async () => {
      actions.remove();
      const body = { decision };
      if (decision === "deny" && note.value.trim()) body.note = note.value.trim();
      await api(`/api/sessions/${session}/approvals/${encodeURIComponent(event.call_id)}`,
        { method: "POST", body: JSON.stringify(body) });
    });
    actions.appendChild(button);
  }
  actions.appendChild(note);
  // A subagent's question says which agent asks, and for what.
  if (event.agent) {
    const label = el("div", "asked-by", `${event.agent} agent, for “${event.description || ""}”`);
    entry.box.insertBefore(label, entry.box.firstChild);
  }
  entry.box.appendChild(actions);
  const state = entry.state || entry.box.querySelector(".state");
  if (state) { state.textContent = "waiting for your approval"; state.className = "state state-waiting"; }
  // A stray Enter never runs a command outside the sandbox: there, "deny" has the focus.
  const buttons = actions.querySelectorAll("button");
  buttons[event.unconfined ? buttons.length - 1 : 0].focus();
}

// A plan the model proposes in plan mode: rendered (keel's renderer wrote the HTML), approved
// into the mode the person picks, or sent back with a note.
function askPlan(event, entry) {
  entry.box.classList.add("plan");
  const subject = entry.box.querySelector(".subject");
  if (subject) subject.textContent = "the model proposes this plan; nothing has been changed";
  entry.box.querySelectorAll(".plan-body").forEach((node) => node.remove());
  const plan = markdownBox(event.plan_html);
  plan.classList.add("plan-body");
  (subject || entry.box.firstChild).after(plan);
  const actions = el("div", "actions");
  const note = el("input", "deny-note");
  note.type = "text";
  note.placeholder = "what to change";
  note.setAttribute("aria-label", "note for the model");
  const choices = [
    [{ decision: "allow", mode: "ask" }, "approve, then ask before changes"],
    [{ decision: "allow", mode: "auto" }, "approve, then change without asking"],
    [{ decision: "deny" }, "keep planning"],
  ];
  for (const [choice, label] of choices) {
    const button = el("button", "decision decision-" + choice.decision, label);
    button.type = "button";
    button.addEventListener("click", async () => {
      actions.remove();
      const body = Object.assign({}, choice);
      if (choice.decision === "deny" && note.value.trim()) body.note = note.value.trim();
      await api(`/api/sessions/${view.session}/approvals/${encodeURIComponent(event.call_id)}`,
        { method: "POST", body: JSON.stringify(body) });
      refreshStatus();
    });
    actions.appendChild(button);
  }
  actions.appendChild(note);
  entry.box.appendChild(actions);
  const state = entry.state || entry.box.querySelector(".state");
  if (state) { state.textContent = "waiting for your approval of the plan"; state.className = "state state-waiting"; }
  actions.querySelector("button").focus();
}

function endLive() { view.live = null; view.liveKind = null; }

// The answer this attempt streamed as text, replaced by its rendering once complete.
function settleText(html) {
  if (view.liveText && html !== undefined) view.liveText.replaceWith(markdownBox(html));
  view.liveText = null;
}

function delta(kind, text) {
  if (!view.live || view.liveKind !== kind) {
    if (kind === "reasoning") {
      const details = el("details", "reasoning"); details.open = true;
      details.appendChild(el("summary", "", "reasoning"));
      const body = el("div", "msg"); details.appendChild(body);
      $("transcript").appendChild(details);
      view.live = body;
    } else {
      view.live = el("div", "msg"); $("transcript").appendChild(view.live);
      view.liveText = view.live;
      // What keel's renderer made of the text so far, then the raw text after it.
      view.liveRendered = el("div", "md"); view.livePending = el("span", "pending");
      view.live.append(view.liveRendered, view.livePending);
    }
    view.liveKind = kind;
    view.attempt.push(view.live.closest("details") || view.live);
  }
  if (kind === "text") view.livePending.textContent += text;
  else view.live.textContent += text;
}

// The answer so far as keel's renderer made it (sent every so often while it streams).
function renderedSoFar(html) {
  if (view.liveKind !== "text" || !view.liveRendered) return;
  view.liveRendered.replaceWith(view.liveRendered = markdownBox(html, "md"));
  view.livePending.textContent = "";
}

// Put what a stopped attempt streamed back above its turn's "stopped" note.
function keepStopped(nodes) {
  if (!nodes.length) return;
  const notes = $("transcript").querySelectorAll(".stopped-note");
  const note = notes[notes.length - 1];
  for (const node of nodes) {
    node.classList.add("interrupted");
    if (note) note.before(node); else $("transcript").appendChild(node);
  }
  if (note) note.textContent = "stopped: the text above is incomplete and was not kept";
  scrollDown();
}

// Put the provider's words (live only, never in the history) back above its failure's note.
function keepProviderSaid(message) {
  if (!message) return;
  const errors = $("transcript").querySelectorAll(".error");
  const node = el("div", "notice provider-said", "the provider said: " + message);
  const last = errors[errors.length - 1];
  if (last) last.before(node); else $("transcript").appendChild(node);
  scrollDown();
}

function setBusy(busy) {
  view.busy = busy;
  $("stop").disabled = !busy;
  // While a turn runs, what is sent waits in the page's queue.
  $("send").textContent = busy ? "Queue" : "Send";
}

// The queued prompts under the transcript, each with its cancel button.
function renderQueue() {
  const box = $("queue");
  box.textContent = "";
  view.queue.forEach((text, index) => {
    const row = el("div", "queued");
    row.appendChild(el("span", "muted", "queued › "));
    row.appendChild(el("span", "queued-text", text));
    const cancel = el("button", "queue-cancel", "cancel");
    cancel.type = "button";
    cancel.addEventListener("click", () => { view.queue.splice(index, 1); renderQueue(); });
    row.appendChild(cancel);
    box.appendChild(row);
  });
  if (view.queue.length) {
    box.appendChild(el("div", "muted", view.queuePaused
      ? "paused: the last turn failed or was stopped · Send (with an empty prompt) sends the next"
      : "sent when this turn ends, in order"));
  }
  box.hidden = view.queue.length === 0;
}

// The next queued prompt, once no turn runs. Another tab's turn may have started first: the
// server's 409 says so, and the prompt waits for that turn to end too.
async function sendQueued() {
  if (view.busy || view.queuePaused || !view.queue.length) return;
  const text = view.queue.shift();
  renderQueue();
  const shown = showUser(text);
  let outcome;
  try {
    outcome = await submit({ input: text }, { quietWhenBusy: true });
  } catch (error) {
    outcome = { response: null, code: "unreachable" };
    $("transcript").appendChild(el("div", "error", `not sent: ${error}`));
  }
  if (outcome.response && outcome.response.ok) return;
  // Not taken: back at the head of the queue. Another tab's turn: it waits for that one to
  // end; anything else pauses the queue, said above.
  shown.remove();
  view.queue.unshift(text);
  view.queuePaused = outcome.code !== "busy";
  renderQueue();
}

// A call's end on its card: its state and summary, its output folded.
function resultOnCard(entry, event) {
  if (!entry) return;
  ended(entry);
  entry.box.querySelectorAll(".progress").forEach((node) => node.remove());
  entry.state.textContent = event.state + " · " + event.summary;
  entry.state.className = "state state-" + event.state;
  entry.box.querySelectorAll(".actions").forEach((node) => node.remove());
  if (event.output) {
    const details = el("details");
    details.appendChild(el("summary", "muted", "output"));
    const pre = el("pre"); pre.appendChild(el("code", "", event.output)); details.appendChild(pre);
    entry.box.appendChild(details);
  }
}

// A subagent's `task` card: its rounds and the tool it runs now.
function showProgress(task) {
  const entry = view.cards.get(task.callId);
  if (!entry) return;
  let line = entry.box.querySelector(".progress");
  if (!line) { line = el("div", "progress muted"); entry.state.before(line); }
  line.textContent = `${task.rounds} round${task.rounds === 1 ? "" : "s"} · ${task.doing}`;
}

// The subagent's own transcript, read when its card's details are opened (it is a session of
// its own: `GET /api/sessions/CHILD/history`).
function transcriptOf(child, callId) {
  const entry = view.cards.get(callId);
  if (!entry || entry.box.querySelector(".child-transcript")) return;
  const details = el("details", "child-transcript");
  details.appendChild(el("summary", "muted", "the subagent's transcript"));
  const body = el("div", "child-items");
  details.appendChild(body);
  details.addEventListener("toggle", async () => {
    if (!details.open) return;
    const response = await api(`/api/sessions/${child}/history`);
    if (!response.ok) { body.textContent = `not readable (HTTP ${response.status})`; return; }
    const { items } = await response.json();
    body.replaceChildren();
    for (const item of items || []) {
      if (item.role === "context") continue;
      const text = item.role === "assistant"
        ? (item.parts || []).map((part) => part.type === "text" ? part.text
          : part.type === "tool_call" ? `● ${part.name} ${subjectOf(part.name, part.arguments)}` : "").filter(Boolean).join("\n")
        : item.role === "tool_result" ? `  ↳ ${(item.content || "").split("\n")[0]}` : item.text || "";
      if (text) body.appendChild(el("div", "child-item " + item.role, text));
    }
  });
  entry.box.appendChild(details);
}

// The session's background jobs: each one's command, how long it runs or how it ended, its
// last line (redacted by keel), and a Kill button while it runs. Refreshed on its events, and
// every two seconds while one runs (its time and last line move on).
async function refreshJobs() {
  const session = view.session;
  if (!session) return;
  const response = await api(`/api/sessions/${session}/jobs`);
  if (!response.ok || session !== view.session) return;
  renderJobs((await response.json()).jobs || []);
}

function seconds(ms) {
  const s = Math.floor((ms || 0) / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

function renderJobs(jobs) {
  const panel = $("jobs");
  panel.replaceChildren();
  panel.hidden = jobs.length === 0;
  const running = jobs.filter((job) => job.running).length;
  clearTimeout(view.jobsTimer);
  if (running) view.jobsTimer = setTimeout(refreshJobs, 2000);
  if (!jobs.length) return;
  panel.appendChild(el("div", "jobs-head", `Background jobs: ${running} running of ${jobs.length}`));
  for (const job of jobs) {
    const row = el("div", "job" + (job.running ? " running" : ""));
    row.dataset.job = job.job;
    row.appendChild(el("span", "job-id", job.job));
    row.appendChild(el("code", "job-command", job.command));
    row.appendChild(el("span", "job-state" + (job.running ? "" : " muted"),
      job.running ? `running · ${seconds(job.elapsed_ms)}` : job.ended || "ended"));
    if (job.running) {
      const kill = el("button", "job-kill", "Kill");
      kill.type = "button";
      kill.title = `stop ${job.job} and everything it started`;
      kill.addEventListener("click", async () => {
        kill.disabled = true;
        await api(`/api/sessions/${view.session}/jobs/${encodeURIComponent(job.job)}/kill`, { method: "POST" });
        refreshJobs();
      });
      row.appendChild(kill);
    }
    if (job.last_line) row.appendChild(el("div", "job-last muted", "› " + job.last_line));
    panel.appendChild(row);
  }
}

// An event of a subagent (forwarded under its own session id): its question, asked on a card
// of its own; its rounds and tools, on its `task` card. Nothing else of it is this session's.
function childEvent(event) {
  const task = view.children.get(event.session_id);
  switch (event.type) {
    case "llm/response": if (task) { task.rounds += 1; showProgress(task); } break;
    case "tool/call":
      if (task) { task.doing = event.name + " " + subjectOf(event.name, event.arguments, event.subject); showProgress(task); }
      break;
    case "approval/requested": askOnCard(event, event.session_id); break;
    case "tool/result": resultOnCard(view.cards.get(`${event.session_id}/${event.call_id}`), event); break;
    default: break;
  }
}

function handle(event) {
  if (event.session_id && view.session && event.session_id !== view.session) return childEvent(event);
  if (event.id) view.lastId = Math.max(view.lastId, event.id);
  const t = $("transcript");
  switch (event.type) {
    case "turn/started": leaveEmptyState(); setBusy(true); view.turnEnded = false; view.attempt = []; view.providerSaid = null; break;
    case "llm/request": view.attempt = []; view.liveText = null; endLive(); break;
    case "llm/text": delta("text", event.delta); if (event.html !== undefined) renderedSoFar(event.html); break;
    case "llm/reasoning": delta("reasoning", event.delta); break;
    case "llm/retry":
      // What the failed attempt streamed is dropped: the final answer has no duplicate.
      (view.attempt || []).forEach((node) => node.remove()); view.attempt = []; view.liveText = null; endLive();
      t.appendChild(el("div", "notice", `retry ${event.attempt}/${event.max_retries}${event.host ? " to " + event.host : ""} in ${(event.delay_ms / 1000).toFixed(1)} s: ${RETRIED[event.kind] || "the request failed"}${event.status ? " (HTTP " + event.status + ")" : ""}`));
      break;
    case "llm/response": settleText(event.html); endLive(); view.attempt = []; break;
    case "provider/said":
      // The provider's own words, live only (never stored): plain text, shown with the failure
      // and kept through the history's reload below.
      view.providerSaid = event.message;
      t.appendChild(el("div", "notice provider-said", "the provider said: " + event.message));
      break;
    case "tool/call": endLive(); card(event); break;
    case "tool/started": started(event); break;
    case "tool/output": output(event); break;
    case "tool/preview": {
      const entry = view.cards.get(event.call_id);
      if (entry && event.diff_html !== undefined) showNumberedDiff(event.call_id, entry.box, event.diff_html);
      break;
    }
    case "approval/requested": askOnCard(event); break;
    case "tool/result": resultOnCard(view.cards.get(event.call_id), event); break;
    case "agent/started": {
      const task = { callId: event.call_id, rounds: 0, doing: "thinking" };
      view.children.set(event.child_session_id, task);
      showProgress(task);
      transcriptOf(event.child_session_id, event.call_id);
      break;
    }
    case "agent/finished": view.children.delete(event.child_session_id); break;
    case "job/started":
      t.appendChild(el("div", "notice", `${event.job} started in the background: ${event.command}`));
      refreshJobs();
      break;
    case "job/exited": {
      const how = event.exit_code !== null && event.exit_code !== undefined
        ? `exited with code ${event.exit_code}` : event.signal ? `was killed by signal ${event.signal}` : "ended";
      t.appendChild(el("div", "notice", `${event.job} ${how}`));
      refreshJobs();
      break;
    }
    case "search/result":
      t.appendChild(el("div", "notice", `web search "${event.query}" — ` + (event.sources_status === "not_provided"
        ? "the provider gave no structured sources; its summary is kept" : `${event.sources} source(s)`)));
      break;
    case "turn/completed": case "turn/failed": {
      // The ending is stored before it is sent: the history now shows it under its turn.
      // What a stopped attempt streamed is never committed, but stays on the page, marked.
      const stopped = event.type === "turn/failed" && event.diagnostic && event.diagnostic.kind === "cancelled";
      const kept = stopped ? (view.attempt || []).slice() : [];
      const said = event.type === "turn/failed" ? view.providerSaid : null;
      endLive(); setBusy(false); view.turnEnded = true; view.attempt = []; view.liveText = null; view.providerSaid = null;
      // Why it is not ready is known now, before the status (and its offer) is fetched: the
      // offer's words never wait for the history to be reloaded.
      view.notReady = event.type === "turn/completed" && !event.ready ? event.not_ready_reason : null;
      // After a failed or stopped turn the queue waits for the person.
      if (event.type === "turn/failed") { view.queuePaused = view.queue.length > 0; renderQueue(); }
      reloadHistory().then(() => { keepStopped(kept); keepProviderSaid(said); sendQueued(); });
      relistSessions();
      refreshStatus();
      break;
    }
    case "recovery/offered": case "recovery/consumed": case "recovery/expired": refreshStatus(); break;
    case "history/rewritten":
      // A compaction rewrote the history: the transcript is rebuilt from it at once, and the
      // events after this one wait until it is (so nothing live is wiped by the rebuild).
      view.reloading = reloadHistory();
      break;
    case "trust/ignored":
      // Path and key come from the repository: shown as text, never as markup.
      t.appendChild(el("div", "notice trust", `${event.file}:${event.line}: \`${event.key}\` ${event.reason}`));
      break;
    case "snapshot/failed":
      // git's words may name repository paths: shown as text, never as markup.
      t.appendChild(el("div", "notice trust", event.side === "prune"
        ? `keel could not prune its snapshot store (${event.reason})`
        : `no snapshot of the workspace ${event.side === "after" ? "after" : "before"} a command (${event.reason}): a rewind cannot tell what it changed from what anyone else did`));
      break;
    case "snapshot/pruned":
      t.appendChild(el("div", "notice", `snapshot store over checkpoint_max_bytes: the oldest ${event.brackets} command snapshot(s) pruned; a rewind past them cannot undo those commands`));
      break;
    case "context/compacted":
      t.appendChild(el("div", "notice", `context compacted: about ${event.tokens_before} → ${event.tokens_after} tokens (history revision ${event.revision})`));
      refreshStatus();
      break;
    default: break;
  }
  scrollDown();
}

function showUser(text) {
  leaveEmptyState();
  const node = el("div", "msg you", "› " + text);
  $("transcript").appendChild(node);
  return node;
}

async function refreshStatus() {
  if (!view.session) return;
  const response = await api(`/api/sessions/${view.session}`);
  if (!response.ok) return;
  const status = await response.json();
  // A turn whose end the page has seen may still be letting the session go on the server (its
  // end is said before it does): asked again shortly, so it is not shown busy, nor its offer
  // missing.
  if (status.busy && view.turnEnded && (view.statusRetries || 0) < 40) {
    view.statusRetries = (view.statusRetries || 0) + 1;
    setTimeout(refreshStatus, 50);
    return;
  }
  view.statusRetries = 0;
  $("model").textContent = status.model + (status.mode ? " · " + status.mode : "");
  view.commands = status.commands || [];
  view.lastTurn = status.last_turn;
  $("undo").disabled = status.busy || status.last_turn === null || status.last_turn === undefined;
  $("fork").disabled = $("undo").disabled;
  const context = status.context ? ` · ctx ${Math.floor(status.context.used * 100 / status.context.window)}%` : "";
  const money = status.cost_display ? ` · ${status.cost_display}` : "";
  $("usage").textContent = `· tokens ${status.usage.input} in · ${status.usage.output} out · cache ${Math.round(status.cache_hit_ratio * 100)}%${money}${context}`;
  setBusy(status.busy);
  // Calls still waiting for a decision (say, after a reload): their cards get the buttons.
  // A subagent's waiting call is keyed by its own session.
  for (const call of status.waiting || []) {
    const session = call.session_id || view.session;
    const entry = view.cards.get(session === view.session ? call.call_id : `${session}/${call.call_id}`);
    if (!entry || !entry.box.querySelector(".actions")) askOnCard(call, session);
  }
  const pending = status.pending;
  $("recovery").hidden = !pending;
  $("recover").hidden = !(pending && pending.action === "protocol_recovery");
  $("continue-checks").hidden = !(pending && pending.action === "final_readiness_recovery");
  $("compact").hidden = !(pending && pending.action === "context_recovery");
  $("guidance").hidden = $("recover").hidden && $("compact").hidden;
  $("guidance").placeholder = $("compact").hidden ? "optional guidance" : "optional focus for the summary";
  const why = {
    protocol_recovery: "The provider rejected the replay of the tool history. ",
    final_readiness_recovery: view.notReady ? `Not ready: ${view.notReady} — continue checks? ` : "The turn ended with open work — continue checks? ",
    context_recovery: "The conversation no longer fits the model's context window. ",
  };
  $("recovery-text").textContent = pending ? (why[pending.action] || "") : "";
  view.pending = pending;
}

// Events over fetch (EventSource cannot send the token), resumed from the last id.
async function follow(session) {
  if (view.stream) view.stream.abort();
  const controller = new AbortController();
  view.stream = controller;
  while (view.session === session && !controller.signal.aborted) {
    try {
      const response = await api(`/api/sessions/${session}/events`, {
        signal: controller.signal, headers: { "Last-Event-ID": String(view.lastId) },
      });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data) continue;
          if (view.reloading) { await view.reloading; view.reloading = null; }
          handle(JSON.parse(data));
        }
      }
    } catch (_) { if (controller.signal.aborted) return; }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

// What is shown under a turn that ended: its usage, why it is not ready, or why it failed.
function endingNotes(event) {
  if (event.type === "turn/completed") {
    const u = event.usage;
    const notes = [el("div", "muted", `tokens ${u.input} in (cache ${Math.round(event.cache_hit_ratio * 100)}%) · ${u.output} out`)];
    if (event.context) notes[0].textContent += ` · ctx ${Math.floor(event.context.used * 100 / event.context.window)}%`;
    if (!event.ready && event.not_ready_reason) notes.push(el("div", "notice", "not ready: " + event.not_ready_reason));
    view.notReady = event.ready ? null : event.not_ready_reason;
    return notes;
  }
  const d = event.diagnostic;
  if (d.kind === "cancelled") return [el("div", "notice stopped-note", "stopped")];
  // keel's words, the status and the trace id to quote; the kind stays in the events.
  const facts = [d.status ? "HTTP " + d.status : "", d.trace_id ? "trace id " + d.trace_id : ""].filter(Boolean);
  return [el("div", "error", `failed: ${d.message || d.kind}${facts.length ? " (" + facts.join(", ") + ")" : ""}`)];
}

// The transcript from the canonical history (reload, switch, end of a turn).
function renderHistory(history) {
  const t = $("transcript");
  t.textContent = ""; view.cards.clear(); endLive();
  const receipts = new Map(history.receipts.map((r) => [r.call_id, r]));
  const endings = new Map((history.turn_endings || []).map((e) => [e.turn, e]));
  const closeTurn = (turn) => {
    const ending = endings.get(turn);
    if (ending) { endingNotes(ending).forEach((note) => t.appendChild(note)); endings.delete(turn); }
  };
  let turn = null;
  for (const item of history.items) {
    if (turn !== null && item.turn !== turn) closeTurn(turn);
    turn = item.turn;
    if (item.role === "user") showUser(item.text);
    else if (item.role === "context") {
      // keel's context block (project instructions, the environment): folded, as plain text.
      const files = (item.sources || []).filter((s) => s.kept > 0).length;
      const details = el("details", "context-item");
      details.appendChild(el("summary", "", `project context (${files} instruction file${files === 1 ? "" : "s"}, environment)`));
      details.appendChild(el("div", "msg", item.text));
      t.appendChild(details);
    }
    else if (item.role === "summary") {
      const details = el("details", "summary-item");
      details.appendChild(el("summary", "", `summary of ${item.replaced} earlier messages (compacted)`));
      details.appendChild(item.html !== undefined ? markdownBox(item.html) : el("div", "msg", item.text));
      t.appendChild(details);
    }
    else if (item.role === "assistant") {
      for (const part of item.parts) {
        if (part.type === "reasoning" && part.text) {
          const details = el("details", "reasoning");
          details.appendChild(el("summary", "", "reasoning"));
          details.appendChild(el("div", "msg", part.text));
          t.appendChild(details);
        } else if (part.type === "text") t.appendChild(part.html !== undefined ? markdownBox(part.html) : el("div", "msg", part.text));
        else if (part.type === "tool_call") card({ call_id: part.id, name: part.name, arguments: part.arguments, diff_html: part.diff_html });
      }
    } else if (item.role === "tool_result") {
      const entry = view.cards.get(item.call_id);
      const receipt = receipts.get(item.call_id);
      if (entry) {
        const state = receipt ? receipt.state : (item.is_error ? "failed" : "completed");
        entry.state.textContent = state + " · " + ((receipt && receipt.summary) || item.content.split("\n")[0]);
        entry.state.className = "state state-" + state;
        if (receipt && receipt.sandbox === "read-only") markReadOnly(entry);
        // A subagent's card opens its own transcript.
        if (receipt && receipt.child_session) transcriptOf(receipt.child_session, item.call_id);
        const details = el("details");
        details.appendChild(el("summary", "muted", "output"));
        const pre = el("pre"); pre.appendChild(el("code", "", item.content.slice(0, 2000))); details.appendChild(pre);
        entry.box.appendChild(details);
      }
    }
  }
  if (turn !== null) closeTurn(turn);
  if (!history.items.length) t.appendChild(emptyState());
  view.lastId = Math.max(view.lastId, history.last_event_id || 0);
  scrollDown();
}

async function reloadHistory() {
  const response = await api(`/api/sessions/${view.session}/history`);
  if (response.ok) renderHistory(await response.json());
}

async function open(session) {
  view.session = session; view.lastId = 0;
  // A queue and the previews belong to the session they were made in.
  view.queue = []; view.numbered.clear(); renderQueue();
  sessionStorage.setItem("keel-session", session);
  await reloadHistory();
  follow(session);
  refreshStatus();
  refreshJobs();
}

// "3 min ago" from a time in milliseconds.
function ago(ms) {
  const minutes = Math.floor((Date.now() - ms) / 60000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 48 * 60) return `${Math.floor(minutes / 60)} h ago`;
  return `${Math.floor(minutes / 1440)} days ago`;
}

// The sessions newest first, each by its title (the first thing typed) and when it was used;
// a session nobody typed into yet is listed only while it is open. The first visit of a tab
// starts a new session (or takes up an untouched one); a reload stays on the one it had.
async function loadSessions(select) {
  const response = await api("/api/sessions");
  if (response.status === 401) { document.body.classList.add("locked"); $("no-token").hidden = false; return; }
  if (!response.ok) { $("transcript").appendChild(el("div", "error", "cannot reach keel: " + response.status)); return; }
  const sessions = await response.json();
  const remembered = sessionStorage.getItem("keel-session");
  // A tab's first visit: a session nobody has typed into yet if there is one (another tab
  // left it), else a new one, so tabs opened and closed do not pile up empty sessions.
  const untouched = sessions.find((s) => !s.turns && !s.title);
  const chosen = select || (sessions.some((s) => s.id === remembered) ? remembered : null)
    || (untouched && untouched.id);
  if (!chosen) { newSession(); return; }
  listSessions(sessions, chosen);
  open(chosen);
}

function listSessions(sessions, chosen) {
  const box = $("sessions"); box.textContent = "";
  for (const s of sessions) {
    if (!s.turns && s.id !== chosen) continue;
    const label = (s.title || "new session") + " · " + (s.turns ? ago(s.updated_at) : "empty");
    const option = el("option", "", label);
    option.value = s.id;
    option.title = `${s.id} · ${s.model} · ${s.turns} turn${s.turns === 1 ? "" : "s"}`;
    box.appendChild(option);
  }
  box.value = chosen;
}

// After a turn: the open session's title and time in the list are now known.
async function relistSessions() {
  const response = await api("/api/sessions");
  if (response.ok && view.session) listSessions(await response.json(), view.session);
}

async function newSession() {
  const response = await api("/api/sessions", { method: "POST", body: "{}" });
  if (response.ok) loadSessions((await response.json()).id);
  else $("transcript").appendChild(el("div", "error", "cannot start a session: " + response.status));
}

// What a new session's page says before the first prompt.
function emptyState() {
  const box = el("div", "empty-state");
  box.id = "empty-state";
  box.appendChild(el("h2", "", "Ask keel to do something in this workspace"));
  box.appendChild(el("p", "", "For example: “explain what src/main.rs does” or “fix the failing test and run the tests”. keel asks before it changes a file or runs a command (unless the mode says otherwise)."));
  const keys = el("ul");
  for (const [key, what] of [["Enter", "sends"], ["Shift+Enter", "a new line"], ["Esc", "stops the turn"], ["/", "lists the slash commands"]]) {
    const line = el("li");
    line.appendChild(el("kbd", "", key));
    line.appendChild(document.createTextNode(" " + what));
    keys.appendChild(line);
  }
  box.appendChild(keys);
  return box;
}

function leaveEmptyState() {
  const box = $("empty-state");
  if (box) box.remove();
}

// Submit to the session; an error is shown unless it is a busy session and `quietWhenBusy`.
// The response and the error's code (`busy` when another turn runs).
async function submit(body, { quietWhenBusy = false } = {}) {
  const response = await api(`/api/sessions/${view.session}/submit`, { method: "POST", body: JSON.stringify(body) });
  if (response.ok) return { response, code: null };
  const error = await response.json().catch(() => ({ error: { code: String(response.status), message: String(response.status) } }));
  const code = (error.error && error.error.code) || String(response.status);
  if (!(quietWhenBusy && code === "busy")) {
    $("transcript").appendChild(el("div", "error", (error.error && error.error.message) || String(response.status)));
  }
  return { response, code };
}

function send() {
  $("undo-report").hidden = true;
  const text = $("prompt").value.trim();
  if (!text) {
    // An empty Send resumes a paused queue.
    if (view.queuePaused && !view.busy) { view.queuePaused = false; renderQueue(); sendQueued(); }
    return;
  }
  $("prompt").value = "";
  if (view.busy) { view.queue.push(text); renderQueue(); return; }
  showUser(text);
  submit({ input: text });
}

$("send").addEventListener("click", send);
$("stop").addEventListener("click", () => api(`/api/sessions/${view.session}/cancel`, { method: "POST", body: "{}" }));
$("new-session").addEventListener("click", newSession);
$("sessions").addEventListener("change", (e) => open(e.target.value));
$("recover").addEventListener("click", () => {
  if (!view.pending) return;
  $("recovery").hidden = true;
  submit({ action: "protocol_recovery", recoveryId: view.pending.recoveryId, input: $("guidance").value });
  $("guidance").value = "";
});
$("compact").addEventListener("click", () => {
  if (!view.pending) return;
  $("recovery").hidden = true;
  submit({ action: "context_recovery", recoveryId: view.pending.recoveryId, input: $("guidance").value });
  $("guidance").value = "";
});
$("continue-checks").addEventListener("click", () => {
  if (!view.pending) return;
  $("recovery").hidden = true;
  submit({ action: "final_readiness_recovery", recoveryId: view.pending.recoveryId });
});
// Typing a slash command lists the ones that match (keel's and the session's own), as text.
$("prompt").addEventListener("input", () => {
  const typed = $("prompt").value;
  const box = $("commands");
  box.textContent = "";
  const word = typed.split(/\s/)[0];
  const matching = typed.startsWith("/") && !/\s/.test(typed)
    ? (view.commands || []).filter((c) => c.name.startsWith(word)) : [];
  for (const c of matching) box.appendChild(el("div", "", `${c.name} — ${c.description}`));
  box.hidden = matching.length === 0;
});
// Undo the last turn: its file edits and its messages; what could not be undone is said.
$("undo").addEventListener("click", async () => {
  $("undo").disabled = true;
  const response = await api(`/api/sessions/${view.session}/rewind`, { method: "POST", body: "{}" });
  const report = await response.json().catch(() => ({}));
  await reloadHistory();
  // Outside the transcript, which is redrawn from the history; it stays until the next prompt.
  const box = $("undo-report");
  box.textContent = "";
  const lines = response.ok ? [`undid turn ${report.to}`] :
    [`undo failed: ${(report.error && report.error.message) || response.status}`];
  if (response.ok) {
    for (const path of report.restored) lines.push(`restored ${path}`);
    for (const s of report.saved || []) {
      lines.push(`restored ${s.path} — it changed while a command ran; what it held is kept: ${s.retrieve}`);
    }
    for (const c of report.conflicts) lines.push(`conflict ${c.path}: ${c.why}`);
    for (const what of report.not_restored) lines.push(`not restored: ${what}`);
  }
  for (const line of lines) box.appendChild(el("div", response.ok ? "notice" : "error", line));
  box.hidden = false;
  refreshStatus();
});
// Fork: a new session with this one's history; the page moves to it.
$("fork").addEventListener("click", async () => {
  $("fork").disabled = true;
  const response = await api(`/api/sessions/${view.session}/fork`, { method: "POST", body: "{}" });
  const answer = await response.json().catch(() => ({}));
  if (response.ok) { loadSessions(answer.id); return; }
  $("transcript").appendChild(el("div", "error",
    `fork failed: ${(answer.error && answer.error.message) || response.status}`));
  refreshStatus();
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && view.busy) api(`/api/sessions/${view.session}/cancel`, { method: "POST", body: "{}" });
});
launched.finally(loadSessions);
