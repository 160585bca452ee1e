// The official ACP TypeScript client (@agentclientprotocol/sdk) driving `keel acp`.
// Usage: node client.mjs SCENARIO KEEL_BINARY WORKSPACE
// The Rust test (crates/keel-cli/tests/acp_client.rs) prepares KEEL_HOME (env) and keel mock,
// runs this, then checks the workspace and the provider's requests. Exit 0 = all checks held.
// It prints one JSON line on stdout: facts the Rust side checks too.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
// `session/fork` is in the SDK's unstable surface.
import * as unstable from "@agentclientprotocol/sdk/unstable";

const [scenario, keel, workspace] = process.argv.slice(2);

function connect(permission = () => "allow_once", files = null) {
  const child = spawn(keel, ["acp"], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const asked = [];
  const app = acp
    .client({ name: "keel-acp-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => { updates.push(params.update); })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      asked.push(params);
      const kind = await permission(params, asked.length);
      const option = params.options.find((o) => o.optionId === kind)
        || params.options.find((o) => o.kind === kind);
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    });
  if (files) {
    // Like an editor: an open buffer, else the file on disk, else "not found".
    app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      files.reads.push(params.path);
      if (params.path in files.buffers) return { content: files.buffers[params.path] };
      if (existsSync(params.path)) return { content: readFileSync(params.path, "utf8") };
      throw acp.RequestError.resourceNotFound(params.path);
    });
    app.onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      files.writes.push({ path: params.path, content: params.content });
      files.buffers[params.path] = params.content;
      return {};
    });
  }
  return { child, stream, app, updates, asked };
}

async function start(agent, fs = false, mcpServers = []) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: fs, writeTextFile: fs }, terminal: false },
    clientInfo: { name: "keel-acp-test", version: "0.0.0" },
  });
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities.loadSession, true);
  const session = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers });
  assert.ok(session.sessionId);
  assert.deepEqual(session.modes.availableModes.map((m) => m.id), ["read-only", "plan", "ask", "auto"]);
  return session.sessionId;
}

const prompt = (agent, sessionId, text, meta) => agent.request(acp.methods.agent.session.prompt,
  { sessionId, prompt: [{ type: "text", text }], ...(meta ? { _meta: meta } : {}) });

// A prompt that must end with a JSON-RPC error: the error, as the SDK hands it over.
async function promptError(agent, sessionId, text, meta) {
  try {
    const answer = await prompt(agent, sessionId, text, meta);
    assert.fail(`expected an error, got ${JSON.stringify(answer)}`);
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    return error;
  }
}

// The newest `available_commands_update`'s command `name`.
const command = (updates, name) => updates.filter((u) => u.sessionUpdate === "available_commands_update")
  .at(-1).availableCommands.find((c) => c.name === name);

const messageText = (updates) => updates
  .filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");

function statusesByCall(updates) {
  const byCall = new Map();
  for (const u of updates) {
    if ((u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.status) {
      if (!byCall.has(u.toolCallId)) byCall.set(u.toolCallId, []);
      byCall.get(u.toolCallId).push(u.status);
    }
  }
  return [...byCall.values()];
}

const scenarios = {
  // Two subagents: the `task` calls show each one's progress; each child's call that asks is
  // announced as a tool call of its own (its id names its session) before its permission
  // request, which names the agent and what it is for; the two are asked one at a time.
  async subagents() {
    let open = 0, most = 0, unannounced = [];
    const client = connect(async (params) => {
      // Announced before asked.
      if (!client.updates.some((u) => u.sessionUpdate === "tool_call" && u.toolCallId === params.toolCall.toolCallId)) {
        unannounced.push(params.toolCall.toolCallId);
      }
      open += 1; most = Math.max(most, open);
      await new Promise((resolve) => setTimeout(resolve, 300));
      open -= 1;
      return "allow_once";
    });
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "ask" });
      const result = await prompt(agent, sessionId, "make both files");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    assert.equal(client.asked.length, 2);
    assert.equal(most, 1, "one question at a time");
    assert.deepEqual(unannounced, [], "each asked call was announced first");
    const titles = client.asked.map((p) => p.toolCall.title).sort();
    assert.match(titles[0], /^\[general agent, for “make a”\] bash touch a\.txt/);
    assert.match(titles[1], /^\[general agent, for “make b”\] bash touch b\.txt/);
    for (const asked of client.asked) {
      assert.match(asked.toolCall.toolCallId, /^[0-9a-f]{16}\/call_/);
      const statuses = client.updates.filter((u) => u.toolCallId === asked.toolCall.toolCallId).map((u) => u.status);
      assert.equal(statuses.at(-1), "completed");
    }
    // Each task call shows its subagent's progress, then its answer.
    const progress = client.updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "in_progress"
      && (u.content || []).some((c) => /round.* · bash touch/.test(c.content && c.content.text)));
    assert.ok(progress.length >= 2, JSON.stringify(client.updates));
    const tasks = client.updates.filter((u) => u.sessionUpdate === "tool_call" && u.title.startsWith("task "));
    assert.equal(tasks.length, 2);
    for (const task of tasks) {
      const last = client.updates.filter((u) => u.toolCallId === task.toolCallId).at(-1);
      assert.equal(last.status, "completed");
    }
    // Nothing a subagent wrote reached the editor as the agent's own message.
    assert.ok(!messageText(client.updates).includes("Made "), messageText(client.updates));
    return {};
  },

  // A background job is a tool call of its own: in progress from its start, then failed (it
  // exited with code 4) with how it ended and what it printed last.
  async jobs() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const result = await prompt(agent, sessionId, "run the job");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    const job = client.updates.find((u) => u.sessionUpdate === "tool_call" && /\/job-1$/.test(u.toolCallId));
    assert.ok(job, JSON.stringify(client.updates));
    assert.equal(job.kind, "execute");
    assert.equal(job.status, "in_progress");
    assert.match(job.title, /^job-1: echo acp-job-out/);
    const later = client.updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === job.toolCallId);
    assert.equal(later.find((u) => u.status).status, "failed");
    const said = later.flatMap((u) => u.content || []).map((c) => c.content.text).join("\n");
    assert.match(said, /job-1 exited with code 4/);
    assert.match(said, /acp-job-out/);
    return {};
  },

  // `/undo` is done by the agent itself: no model turn, its report as the message.
  async undo() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      assert.equal((await prompt(agent, sessionId, "change things")).stopReason, "end_turn");
      const before = client.updates.length;
      assert.equal((await prompt(agent, sessionId, "/undo")).stopReason, "end_turn");
      const said = messageText(client.updates.slice(before));
      assert.match(said, /Rewound to before turn 1\./);
      assert.match(said, /restored .*notes\.md/);
    });
    client.child.kill();
    const announced = client.updates.filter((u) => u.sessionUpdate === "available_commands_update");
    const names = announced[announced.length - 1].availableCommands.map((c) => c.name);
    assert.ok(names.includes("undo") && names.includes("rewind"), names.join(","));
    return {};
  },

  // A rewind sees the files as the editor has them: a buffer typed into since is a conflict,
  // left alone; the unsaved text the turn's edit replaced comes back through the editor.
  async editor_undo() {
    const notes = `${workspace}/notes.txt`;
    const files = { reads: [], writes: [], buffers: { [notes]: "unsaved buffer text\n" } };
    const client = connect(() => "allow_once", files);
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent, true);
      assert.equal((await prompt(agent, sessionId, "edit through the editor")).stopReason, "end_turn");
      assert.equal(files.buffers[notes], "unsaved buffer text, edited\n");
      files.buffers[notes] = "typed after the turn\n";
      let before = client.updates.length;
      assert.equal((await prompt(agent, sessionId, "/rewind 1 --code")).stopReason, "end_turn");
      let said = messageText(client.updates.slice(before));
      assert.match(said, /conflict .*notes\.txt/, said);
      assert.equal(files.buffers[notes], "typed after the turn\n", "left alone");
      files.buffers[notes] = "unsaved buffer text, edited\n";
      before = client.updates.length;
      assert.equal((await prompt(agent, sessionId, "/undo")).stopReason, "end_turn");
      said = messageText(client.updates.slice(before));
      assert.match(said, /restored .*notes\.txt/, said);
      assert.equal(files.buffers[notes], "unsaved buffer text\n", "the buffer as it was");
    });
    client.child.kill();
    assert.ok(!existsSync(notes), "never saved to disk by keel");
    return {};
  },

  // Custom commands are announced with the built-in ones, and `/NAME args` sends their prompt.
  async commands() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const result = await prompt(agent, sessionId, "/review lib.rs");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    const announced = client.updates.filter((u) => u.sessionUpdate === "available_commands_update");
    assert.ok(announced.length >= 1, "available_commands_update was sent");
    const commands = announced[announced.length - 1].availableCommands;
    const names = commands.map((c) => c.name);
    assert.ok(names.includes("compact") && names.includes("init"), names.join(","));
    const review = commands.find((c) => c.name === "review");
    assert.ok(review, names.join(","));
    assert.equal(review.description, "Review a file");
    assert.match(messageText(client.updates), /reviewed/);
    return {};
  },

  // The editor owns the files: reads see its unsaved buffer, writes go to it, not the disk;
  // the workspace guard still refuses a path outside.
  async editor_files() {
    const notes = `${workspace}/notes.txt`;
    const files = { reads: [], writes: [], buffers: { [notes]: "unsaved buffer text\n" } };
    const client = connect(() => "allow_once", files);
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent, true);
      const result = await prompt(agent, sessionId, "edit through the editor");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    // read_file and edit_file read the buffer; so do the checkpoints around each write.
    assert.ok(files.reads.filter((p) => p === notes).length >= 2, files.reads.join(","));
    assert.ok(files.reads.every((p) => p === notes || p === `${workspace}/out.txt`), files.reads.join(","));
    assert.deepEqual(files.writes.map((w) => w.path), [`${workspace}/out.txt`, notes]);
    assert.equal(files.buffers[notes], "unsaved buffer text, edited\n");
    const outputs = client.updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.content)
      .flatMap((u) => u.content.map((c) => c.content && c.content.text)).join("\n");
    assert.match(outputs, /unsaved buffer text/);
    const finals = statusesByCall(client.updates).map((s) => s[s.length - 1]);
    assert.deepEqual(finals, ["completed", "completed", "completed", "failed"]);
    return {};
  },

  // Two tool rounds: updates in order, statuses pending → in_progress → completed; then a
  // second connection loads the session and gets the same history.
  async rounds() {
    const first = connect();
    let sessionId;
    await first.app.connectWith(first.stream, async (agent) => {
      sessionId = await start(agent);
      const result = await prompt(agent, sessionId, "run two commands");
      assert.equal(result.stopReason, "end_turn");
    });
    first.child.kill();
    const kinds = first.updates.map((u) => u.sessionUpdate);
    assert.ok(kinds.includes("available_commands_update"));
    const statuses = statusesByCall(first.updates);
    assert.equal(statuses.length, 2, JSON.stringify(statuses));
    for (const s of statuses) assert.deepEqual(s, ["pending", "in_progress", "completed"]);
    const firstCall = kinds.indexOf("tool_call");
    const answer = kinds.lastIndexOf("agent_message_chunk");
    assert.ok(firstCall >= 0 && answer > firstCall, "the answer comes after the tools");
    assert.match(messageText(first.updates), /Both commands ran\./);
    const usage = first.updates.filter((u) => u.sessionUpdate === "usage_update");
    assert.equal(usage.length, 3, "one per response");
    assert.ok(usage.every((u) => u.size === 100000 && Number.isInteger(u.used) && u.used > 0));
    const done = first.updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
    assert.ok(done.every((u) => u.content.some((c) => c.type === "content" && /exit code 0/.test(c.content.text))),
      "the command's output is on the card");

    const second = connect();
    await second.app.connectWith(second.stream, async (agent) => {
      await agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      await agent.request(acp.methods.agent.session.load, { sessionId, cwd: workspace, mcpServers: [] });
    });
    second.child.kill();
    const replayed = second.updates.filter((u) => u.sessionUpdate !== "available_commands_update");
    assert.equal(replayed[0].sessionUpdate, "user_message_chunk");
    assert.equal(replayed[0].content.text, "run two commands");
    assert.equal(replayed.filter((u) => u.sessionUpdate === "tool_call").length, 2);
    assert.match(messageText(replayed), /Both commands ran\./);
    return { sessionId };
  },

  // `ask` mode: reject the first call, allow-always the second; a third of the same tool runs
  // without asking again.
  async permissions() {
    const client = connect((_, n) => (n === 1 ? "reject_once" : "allow_always"));
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "ask" });
      const result = await prompt(agent, sessionId, "write files");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    // Two writes asked, then remembered; `git status` asked, `git status --short` remembered,
    // `git log -1` asked.
    assert.equal(client.asked.length, 4, "asked four times");
    assert.deepEqual(client.asked[0].options.map((o) => o.kind),
      ["allow_once", "allow_always", "reject_once", "reject_always"]);
    assert.equal(client.asked[1].options[1].name, "Allow always: write_file (this session)");
    assert.equal(client.asked[2].options[1].name, "Allow always: git status (this session)");
    assert.equal(client.asked[3].options[1].name, "Allow always: git log (this session)");
    const finals = statusesByCall(client.updates).map((s) => s[s.length - 1]);
    assert.deepEqual(finals.slice(0, 3), ["failed", "completed", "completed"]);
    assert.ok(client.updates.some((u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "ask"));
    return {};
  },

  // Plan mode: a write is refused unasked; the plan is asked with its whole text and approved
  // into auto; the editor's mode follows, and the next write runs without a question.
  async plan() {
    const client = connect((params) =>
      (params.options.some((o) => o.optionId === "plan_auto") ? "plan_auto" : "reject_once"));
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "plan" });
      const result = await prompt(agent, sessionId, "plan the rename");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    assert.equal(client.asked.length, 1, "only the plan is asked");
    assert.deepEqual(client.asked[0].options.map((o) => o.optionId), ["plan_ask", "plan_auto", "reject_once"]);
    assert.match(client.asked[0].toolCall.content[0].content.text, /Rename the module[^]*Update the callers/);
    const modes = client.updates.filter((u) => u.sessionUpdate === "current_mode_update")
      .map((u) => u.currentModeId);
    assert.deepEqual(modes, ["plan", "auto"]);
    const finals = statusesByCall(client.updates).map((s) => s[s.length - 1]);
    assert.deepEqual(finals, ["failed", "completed", "completed"]);
    return {};
  },

  // A mode chosen while a turn runs: the next call is decided under it (asked, and rejected
  // here), and the model is told with the running command's result.
  async mode_mid_turn() {
    const client = connect(() => "reject_once");
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const running = prompt(agent, sessionId, "sleep, then write");
      while (!client.updates.some((u) => u.sessionUpdate === "tool_call")) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "ask" });
      const result = await running;
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    assert.equal(client.asked.length, 1, "the write after the switch was asked about");
    return {};
  },

  // session/fork: a new session with the history, replayed to the client; its next request
  // begins with the original's bytes (checked on the Rust side).
  async fork() {
    const client = connect();
    let forkId;
    await client.app.connectWith(client.stream, async (agent) => {
      const init = await agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      assert.deepEqual(init.agentCapabilities.sessionCapabilities.fork, {});
      const session = await agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [] });
      await prompt(agent, session.sessionId, "first");
      const before = client.updates.length;
      const forked = await agent.request(unstable.methods.agent.session.fork,
        { sessionId: session.sessionId, cwd: workspace, mcpServers: [] });
      forkId = forked.sessionId;
      assert.notEqual(forkId, session.sessionId);
      assert.deepEqual(forked.modes.availableModes.map((m) => m.id), ["read-only", "plan", "ask", "auto"]);
      const replayed = client.updates.slice(before).filter((u) => u.sessionUpdate === "user_message_chunk");
      assert.equal(replayed[0].content.text, "first");
      const result = await prompt(agent, forkId, "forked");
      assert.equal(result.stopReason, "end_turn");
    });
    client.child.kill();
    return { forkId };
  },

  // Cancel during a stalled stream: the prompt answers `cancelled`; no update after it.
  async cancel() {
    const client = connect();
    let afterAnswer = -1;
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const pending = prompt(agent, sessionId, "wait");
      await new Promise((resolve) => setTimeout(resolve, 700));
      await agent.notify(acp.methods.agent.session.cancel, { sessionId });
      const result = await pending;
      assert.equal(result.stopReason, "cancelled");
      afterAnswer = client.updates.length;
      await new Promise((resolve) => setTimeout(resolve, 1500));
    });
    client.child.kill();
    assert.equal(client.updates.length, afterAnswer, "no update after the answer");
    assert.ok(!messageText(client.updates).includes("too late"));
    return {};
  },

  // An opaque 400 on the replay: the recovery is announced with its id; a prompt with the
  // recovery _meta runs it; a stale id is a JSON-RPC error and sends nothing.
  async recovery() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      // The failure ends the prompt as a JSON-RPC error; the offer rides in its data and on
      // the command that runs it, never in the agent's message text.
      const failed = await promptError(agent, sessionId, "look around");
      assert.equal(failed.code, -32011);
      const recoveryId = failed.data.recoveryId;
      assert.match(recoveryId, /^r-[0-9a-f]{16}$/);
      assert.equal(failed.data.action, "protocol_recovery");
      assert.equal(failed.data.status, 400);
      assert.ok("kind" in failed.data && "trace_id" in failed.data, JSON.stringify(failed.data));
      assert.match(failed.message, /continue from valid history\?/);
      assert.doesNotMatch(messageText(client.updates), /recover-context|failed/);
      assert.equal(command(client.updates, "recover-context")._meta["keel/recoveryId"], recoveryId);
      await assert.rejects(
        prompt(agent, sessionId, "", { "keel/action": "protocol_recovery", "keel/recoveryId": "r-0000000000000000" }),
        (error) => error.code === -32010 && /no recovery record/.test(error.message));
      const recovered = await prompt(agent, sessionId, "", { "keel/action": "protocol_recovery", "keel/recoveryId": recoveryId });
      assert.equal(recovered.stopReason, "end_turn");
      assert.match(messageText(client.updates), /Recovered from valid history\./);
      // A second incident, recovered the way an editor user types it.
      assert.equal(command(client.updates, "recover-context")._meta, undefined, "the offer was used");
      const again = await promptError(agent, sessionId, "one more step");
      const secondId = again.data.recoveryId;
      assert.match(secondId, /^r-[0-9a-f]{16}$/);
      assert.notEqual(secondId, recoveryId);
      const typed = await prompt(agent, sessionId, `/recover-context ${secondId} check the log first`);
      assert.equal(typed.stopReason, "end_turn");
      assert.match(messageText(client.updates), /Recovered again\./);
    });
    client.child.kill();
    return {};
  },

  // A context-limit rejection: the compaction recovery is announced with its id; a prompt
  // with the context_recovery _meta compacts and finishes the task.
  async compact() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const failed = await promptError(agent, sessionId, "run all the rounds");
      assert.equal(failed.data.kind, "limit");
      const recoveryId = failed.data.recoveryId;
      assert.match(recoveryId, /^r-[0-9a-f]{16}$/);
      assert.equal(failed.data.action, "context_recovery");
      assert.match(failed.message, /compact it and go on\?/);
      assert.equal(command(client.updates, "compact")._meta["keel/action"], "context_recovery");
      assert.doesNotMatch(messageText(client.updates), /compact/);
      const done = await prompt(agent, sessionId, "the effects log", { "keel/action": "context_recovery", "keel/recoveryId": recoveryId });
      assert.equal(done.stopReason, "end_turn");
      assert.match(messageText(client.updates), /All rounds done\./);
      const thoughts = client.updates.filter((u) => u.sessionUpdate === "agent_thought_chunk").map((u) => u.content.text).join("");
      assert.match(thoughts, /context compacted: about \d+ → \d+ tokens \(history revision 2\)/);
      await assert.rejects(
        prompt(agent, sessionId, "", { "keel/action": "context_recovery", "keel/recoveryId": recoveryId }),
        (error) => error.code === -32010);
    });
    client.child.kill();
    return {};
  },

  // Open plan items: the turn ends not ready, said in the answer's _meta and on the
  // continue-checks command (not in the message text); the offer runs from _meta.
  async readiness() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const open = await prompt(agent, sessionId, "edit and test");
      assert.equal(open.stopReason, "end_turn");
      const readiness = open._meta["keel/readiness"];
      assert.equal(readiness.ready, false);
      assert.equal(readiness.reason, "the plan has 1 open item");
      assert.equal(readiness.action, "final_readiness_recovery");
      assert.equal(readiness.offer, "Not ready: the plan has 1 open item — continue checks?");
      assert.match(readiness.recoveryId, /^r-[0-9a-f]{16}$/);
      const offered = command(client.updates, "continue-checks")._meta;
      assert.equal(offered["keel/recoveryId"], readiness.recoveryId);
      assert.equal(offered["keel/offer"], readiness.offer);
      assert.doesNotMatch(messageText(client.updates), /continue-checks|Not ready|r-[0-9a-f]{16}/);
      const done = await prompt(agent, sessionId, "",
        { "keel/action": "final_readiness_recovery", "keel/recoveryId": readiness.recoveryId });
      assert.equal(done._meta["keel/readiness"].ready, true);
      assert.equal(command(client.updates, "continue-checks")._meta, undefined, "the offer was used");
      assert.match(messageText(client.updates), /Ran the tests: they pass\./);
    });
    client.child.kill();
    return {};
  },

  // A call the person rejects is not a failure: the turn ends ready. A command that fails
  // still leaves the turn not ready.
  async denial() {
    const client = connect((params, n) => (n === 1 ? "reject_once" : "allow_once"));
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const denied = await prompt(agent, sessionId, "delete the build");
      assert.equal(denied.stopReason, "end_turn");
      assert.deepEqual(denied._meta["keel/readiness"], { ready: true });
      const failed = await prompt(agent, sessionId, "run the tests");
      assert.equal(failed._meta["keel/readiness"].ready, false);
      assert.equal(failed._meta["keel/readiness"].reason, "the final answer came right after `bash` failed");
    });
    client.child.kill();
    return {};
  },

  // The provider refuses the key: a JSON-RPC error that says what to do, its data the
  // failure's kind, status and trace id; the provider's own words only in the message text,
  // fenced and labelled as its (never in the error).
  async refused_key() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const sessionId = await start(agent);
      const error = await promptError(agent, sessionId, "hello");
      assert.equal(error.code, -32011);
      assert.match(error.message, /refused the key in DEEPSEEK_API_KEY/);
      assert.match(error.message, /keel config/);
      assert.doesNotMatch(error.message, /secret detail/);
      assert.deepEqual(error.data, { kind: "auth", status: 401, trace_id: null });
      assert.equal(
        messageText(client.updates),
        "the provider said:\n```\nAuthentication Fails: secret detail\n```\n\n",
      );
    });
    client.child.kill();
    return {};
  },

  // The editor's MCP servers (session/new `mcpServers`) run for the session: the model calls
  // one of their tools, and the call shows as a tool call that completes.
  async mcp() {
    const client = connect();
    await client.app.connectWith(client.stream, async (agent) => {
      const everything = process.env.KEEL_TEST_MCP_EVERYTHING;
      const sessionId = await start(agent, false, [
        { name: "every", command: "node", args: [everything, "stdio"], env: [{ name: "GREETING", value: "$HOME" }] },
      ]);
      const done = await prompt(agent, sessionId, "echo through the editor's server");
      assert.equal(done.stopReason, "end_turn");
      assert.deepEqual(statusesByCall(client.updates).map((s) => s.at(-1)), ["completed"]);
      assert.match(messageText(client.updates), /Echoed\./);
      await assert.rejects(
        agent.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers: [{ name: "a__b", command: "x" }] }),
        (error) => /without `__`/.test(error.message));
    });
    client.child.kill();
    return {};
  },
};

try {
  const facts = await scenarios[scenario]();
  console.log(JSON.stringify({ ok: scenario, ...facts }));
  process.exit(0);
} catch (error) {
  console.error(`FAILED ${scenario}: ${error.stack || error}`);
  process.exit(1);
}
