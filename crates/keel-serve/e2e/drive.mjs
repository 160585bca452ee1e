// Drives keel serve's UI in Debian's Chromium with playwright-core, one scenario per run.
// Usage: node drive.mjs SCENARIO URL OUT_DIR
// The Rust test (crates/keel-cli/tests/browser_ui.rs) starts keel mock and keel serve, runs
// this, then checks the workspace and the provider's requests. Exit 0 = every check passed.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";

const [scenario, url, out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
const errors = [];
page.on("pageerror", (error) => errors.push(String(error)));

const transcript = () => page.locator("#transcript");
const text = async () => (await transcript().innerText());
const count = (haystack, needle) => haystack.split(needle).length - 1;

async function ask(prompt) {
  await page.fill("#prompt", prompt);
  await page.press("#prompt", "Enter");
}

async function waitForText(needle, timeout = 20000) {
  await page.waitForFunction((n) => document.getElementById("transcript").innerText.includes(n),
    needle, { timeout });
}

const scenarios = {
  // Two subagents: each `task` card shows its rounds; each one's question comes alone, on a
  // card of its own that names the agent and what it is for, and is answered there; the cards
  // end with their summaries and open the subagent's own transcript.
  async subagents() {
    await ask("make both files");
    const asking = page.locator(".card .asked-by");
    await asking.first().waitFor({ timeout: 20000 });
    await page.locator(".card .progress").first().waitFor();
    assert.equal(await asking.count(), 1, "one question at a time");
    const first = await asking.first().innerText();
    assert.match(first, /^general agent, for “make [ab]”$/);
    await page.screenshot({ path: `${out}/subagents.png` });
    await page.locator(".card .actions button.decision-allow").first().click();
    await page.waitForFunction((first) => [...document.querySelectorAll(".card .asked-by")]
      .some((n) => n.textContent !== first && n.closest(".card").querySelector(".actions")), first,
      { timeout: 20000 });
    assert.equal(await page.locator(".card .actions").count(), 1, "still one at a time");
    await page.locator(".card .actions button.decision-allow").first().click();
    await waitForText("Both files made.");
    await waitForText("general (make a): completed in 2 rounds");
    await waitForText("general (make b): completed in 2 rounds");
    const details = page.locator(".child-transcript").first();
    await details.locator("summary").click();
    await details.locator(".child-item").first().waitFor();
    assert.match(await details.innerText(), /Made [ab]\./);
    await page.screenshot({ path: `${out}/subagents-done.png` });
  },

  // A background job: its panel lists it running with its command and last line (after the
  // turn ended too), and its Kill button stops it; the panel then says how it ended.
  async jobs() {
    await ask("start the watcher");
    await page.getByRole("button", { name: "allow" }).first().click();
    await waitForText("Watching.");
    const panel = page.locator("#jobs");
    await panel.waitFor();
    await page.waitForFunction(() => document.getElementById("jobs").innerText.includes("› watcher-ready"),
      null, { timeout: 20000 });
    const listed = await panel.innerText();
    assert.match(listed, /Background jobs: 1 running of 1/);
    assert.match(listed, /job-1/);
    assert.match(listed, /echo watcher-ready; sleep 300\.\d+/);
    assert.match(listed, /running · \d+ s/);
    await page.screenshot({ path: `${out}/jobs.png` });
    await panel.locator("button.job-kill").click();
    await page.waitForFunction(() => document.getElementById("jobs").innerText.includes("the user stopped it"),
      null, { timeout: 20000 });
    assert.match(await panel.innerText(), /Background jobs: 0 running of 1/);
    assert.equal(await panel.locator("button.job-kill").count(), 0);
    await waitForText("job-1 was killed by signal 15");
    await page.screenshot({ path: `${out}/jobs-killed.png` });
  },

  // A prompt typed while a turn runs waits in the page, shown as queued with a cancel button,
  // and is sent when the turn ends; a cancelled one is never sent.
  async queue() {
    await ask("first question");
    await waitForText("Once");
    await page.locator("#stop:not([disabled])").waitFor();
    assert.equal(await page.locator("#send").innerText(), "Queue");
    await ask("second question");
    await ask("third question");
    await page.locator("#queue .queued").nth(1).waitFor();
    assert.deepEqual(await page.locator("#queue .queued-text").allInnerTexts(),
      ["second question", "third question"]);
    assert.match(await page.locator("#queue").innerText(), /sent when this turn ends/);
    await page.screenshot({ path: `${out}/queue.png` });
    // The third is taken back before it goes.
    await page.locator("#queue .queued").nth(1).locator("button.queue-cancel").click();
    assert.deepEqual(await page.locator("#queue .queued-text").allInnerTexts(), ["second question"]);
    assert.ok(!(await text()).includes("second question"), "not sent while the turn runs");
    await waitForText("ENDSTORY");
    // The turn ended: the second goes out by itself, and is answered.
    await waitForText("Second answer.");
    assert.equal(count(await text(), "› second question"), 1);
    assert.ok(!(await text()).includes("third question"));
    await page.locator("#queue").waitFor({ state: "hidden" });
    assert.equal(await page.locator("#send").innerText(), "Send");
  },

  // After a stopped (or failed) turn the queue waits, saying so; an empty Send resumes it.
  async queue_paused() {
    await ask("first question");
    await waitForText("Once");
    await page.locator("#stop:not([disabled])").waitFor();
    await ask("second question");
    await page.locator("#queue .queued").first().waitFor();
    await page.click("#stop");
    await waitForText("stopped");
    await page.waitForFunction(() => document.getElementById("queue").innerText.includes("paused"));
    await page.waitForTimeout(1500);
    assert.ok(!(await text()).includes("› second question"), "not sent after a stopped turn");
    await page.click("#send");
    await waitForText("Second answer.");
    await page.locator("#queue").waitFor({ state: "hidden" });
  },

  // An approved edit keeps the numbered diff its question showed once the turn ends (not the
  // history's unnumbered drawing of the call's arguments).
  async kept_diff() {
    await ask("edit the notes");
    await page.getByRole("button", { name: "allow" }).first().waitFor();
    const asked = await page.locator(".card .filediff").first().innerText();
    assert.match(asked, /\b3\b/, "the question's diff is numbered at the file's own lines");
    await page.getByRole("button", { name: "allow" }).first().click();
    await waitForText("Edited.");
    await page.locator(".card .state-completed").first().waitFor();
    const kept = await page.locator(".card .filediff").first().innerText();
    assert.equal(kept, asked, "the numbered diff stays after the turn");
    assert.doesNotMatch(kept, /the replaced text/);
    await page.screenshot({ path: `${out}/kept_diff.png` });
  },

  // Undo the last turn from the header: files and messages back, what could not be said.
  async undo() {
    await ask("change things");
    await waitForText("Changed.");
    await page.locator("#undo:not([disabled])").waitFor();
    await page.click("#undo");
    await page.locator("#undo-report").waitFor();
    await page.waitForFunction(() => document.getElementById("undo-report").innerText.includes("undid turn 1"));
    assert.match(await page.locator("#undo-report").innerText(), /restored .*notes\.md/);
    assert.doesNotMatch(await text(), /change things/, "the prompt left the conversation");
    await page.screenshot({ path: `${out}/undo.png` });
    await page.locator("#undo[disabled]").waitFor();
  },

  // Plan mode: the plan is shown rendered on its card; kept with a note, then approved into
  // auto, after which the write runs unasked and the header shows the mode.
  async plan() {
    await page.waitForFunction(() => document.getElementById("model").innerText.includes("plan"));
    await ask("rename parse");
    await page.locator(".card.plan .plan-body ol li").first().waitFor();
    assert.match(await page.locator(".card.plan .plan-body").innerText(), /Rewrite everything/);
    await page.fill(".card.plan .deny-note", "only the rename");
    await page.click(".card.plan button.decision-deny");
    await page.waitForFunction(() => document.querySelectorAll(".card.plan").length === 2);
    const second = page.locator(".card.plan").nth(1);
    await second.locator(".plan-body strong").waitFor();
    assert.equal(await second.locator(".plan-body strong").innerText(), "parse");
    await page.screenshot({ path: `${out}/plan.png` });
    await second.locator("button", { hasText: "approve, then change without asking" }).click();
    await waitForText("Renamed.");
    await page.waitForFunction(() => document.getElementById("model").innerText.includes("auto"));
  },

  // Fork from the header: the page moves to the new session, which shows the history and
  // goes on from it.
  async fork() {
    await ask("hello");
    await waitForText("first answer");
    const original = await page.locator("#sessions").inputValue();
    await page.locator("#fork:not([disabled])").click();
    await page.waitForFunction((was) => document.getElementById("sessions").value !== was, original);
    await waitForText("first answer");
    await ask("forked");
    await waitForText("from the fork");
    assert.equal(count(await text(), "first answer"), 1);
    await page.screenshot({ path: `${out}/fork.png` });
  },

  // Typing `/` lists the slash commands with the session's custom ones; one runs as a prompt.
  async commands() {
    await page.locator("#prompt").pressSequentially("/re");
    await page.locator("#commands").waitFor();
    const listed = await page.locator("#commands").innerText();
    assert.match(listed, /\/review \[arguments\] — Review a file/);
    assert.match(listed, /\/recover-context/);
    assert.doesNotMatch(listed, /\/compact/);
    await page.screenshot({ path: `${out}/commands.png` });
    await page.fill("#prompt", "");
    await ask("/review app.rs");
    await waitForText("reviewed");
    assert.ok(await page.locator("#commands").isHidden());
  },

  // Tool rounds show as cards with their states; the answer follows.
  async cards() {
    await ask("make two files");
    await waitForText("All done.");
    // The streamed text shows first; the answer is rendered as markdown once it is complete.
    await page.locator(".md ul li").first().waitFor();
    const states = await page.locator(".card .state").allInnerTexts();
    assert.equal(states.length, 2, `two cards: ${states}`);
    for (const state of states) assert.match(state, /^completed/);
    assert.equal(count(await text(), "All done."), 1);
    // Markdown from the model, rendered as text nodes: a list, inline code, bold.
    assert.equal(await page.locator(".md ul li").count(), 2);
    assert.equal(await page.locator(".md li code").first().innerText(), "effects.log");
    assert.equal(await page.locator(".md strong").first().innerText(), "twice");
    await page.screenshot({ path: `${out}/main.png` });
  },

  // A markdown answer as keel's renderer wrote it: the same parse the terminal draws.
  async markdown() {
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(url).origin });
    await ask("compare them");
    await waitForText("The end.");
    await page.locator(".md table").waitFor();
    const check = async () => {
      assert.equal(await page.locator(".md h2").innerText(), "Results");
      assert.equal(await page.locator(".md table tbody tr").count(), 2);
      assert.equal(await page.locator(".md td.al-right").first().innerText(), "19.5 MiB");
      assert.equal(await page.locator(".md .code .code-lang").innerText(), "rust");
      assert.equal(await page.locator(".md .code .hl-keyword").first().innerText(), "fn");
      assert.equal(await page.locator('.md ol[start="3"] li').count(), 2);
      assert.equal(await page.locator('.md a[href^="javascript"]').count(), 0, "no script link");
      assert.equal(await page.locator('.md a[href="https://example.com/docs"][rel~="noopener"]').count(), 1);
      assert.equal(await page.locator("#transcript script, #transcript img").count(), 0, "no markup from the model");
      assert.ok((await text()).includes("<script>alert(1)</script>"), "raw HTML shown as text");
    };
    await check();
    await page.locator(".md .code button.copy").click();
    await page.waitForFunction(() => document.querySelector(".md .code button.copy").textContent === "copied");
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "fn main() {}");
    await page.screenshot({ path: `${out}/markdown.png` });
    // From the history after a reload: the same rendering.
    await page.reload();
    await waitForText("The end.");
    await check();
  },

  // `ask` mode: allow one call from its card, deny the other.
  async approvals() {
    await ask("write the files");
    await page.getByRole("button", { name: "allow" }).first().waitFor();
    assert.equal(await page.locator(".card .state").first().innerText(), "waiting for your approval");
    // The write's exact change, numbered, from keel's renderer.
    const diff = async () => {
      assert.equal(await page.locator(".card .filediff caption").first().innerText(), "new file, 1 line");
      assert.equal(await page.locator(".card .filediff tr.add td.text").first().innerText(), "+ y");
    };
    await diff();
    // "always" says what it covers.
    assert.equal(await page.getByRole("button", { name: /^always/ }).first().innerText(),
      "always for write_file (this session, never saved)");
    // A reload while the call waits: the card, its diff and its buttons come back.
    await page.reload();
    await page.getByRole("button", { name: "allow" }).first().waitFor();
    await diff();
    await page.getByRole("button", { name: "allow" }).first().click();
    await page.waitForSelector(".card:nth-of-type(2) .actions button, .card .actions button");
    // A denial with a note for the model.
    await page.locator(".card .actions .deny-note").first().fill("use the other file");
    await page.getByRole("button", { name: "deny" }).first().click();
    await waitForText("done");
    const states = await page.locator(".card .state").allInnerTexts();
    assert.match(states[0], /^completed/);
    assert.match(states[1], /^denied/);
  },

  // A command refused by the sandbox: the second question is the unconfined re-run, said as
  // such on its card, with no "always"; denied, nothing runs outside.
  async unconfined() {
    await ask("write outside");
    await page.getByRole("button", { name: "allow", exact: true }).first().click();
    const rerun = page.getByRole("button", { name: "run it UNCONFINED" });
    await rerun.waitFor({ timeout: 20000 });
    const card = page.locator(".card.unconfined");
    assert.equal(await card.count(), 1, "the re-run's card is marked");
    assert.match(await card.locator(".warning").innerText(), /OUTSIDE the sandbox/);
    assert.match(await card.locator(".warning").innerText(), /cannot verify/);
    assert.equal(await card.getByRole("button", { name: "always" }).count(), 0, "no always");
    const focused = await page.evaluate(() => document.activeElement.textContent);
    assert.equal(focused, "deny", "a stray Enter denies");
    await page.screenshot({ path: `${out}/unconfined.png` });
    await card.getByRole("button", { name: "deny" }).click();
    await waitForText("done");
  },

  // Two sessions made on the command line: a first visit starts a new session (not the
  // newest CLI one) with its empty state; the list names each by its first prompt, newest
  // first; at 400 px the header is at most a fifth of the height; a reload stays put.
  async sessions() {
    const labels = async () => page.locator("#sessions option").allInnerTexts();
    await page.locator("#empty-state").waitFor();
    const listed = await labels();
    assert.equal(listed.length, 3, `listed: ${listed}`);
    assert.equal(listed[0], "new session · empty", "the new session is chosen");
    assert.match(listed[1], /^second task · (just now|\d+ min ago)$/);
    assert.match(listed[2], /^first task · (just now|\d+ min ago)$/);
    const untouched = await page.locator("#sessions option").first().getAttribute("value");
    assert.equal(await page.locator("#sessions").inputValue(), untouched);
    const empty = await page.locator("#empty-state").innerText();
    for (const key of ["Enter", "Shift+Enter", "Esc", "/"]) assert.ok(empty.includes(key), `${key} in ${empty}`);
    assert.doesNotMatch(await text(), /first task|second task/, "no CLI session's history shows");
    await page.screenshot({ path: `${out}/sessions-new.png` });
    // A phone-width window: one header row of controls and one of status.
    await page.setViewportSize({ width: 400, height: 700 });
    const header = await page.locator("header").boundingBox();
    assert.ok(header.height <= 700 / 5, `the header is ${header.height} px of 700`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 400, `page is ${width} px wide at a 400 px viewport`);
    await page.screenshot({ path: `${out}/sessions-400px.png` });
    // Another session opens with its own history, and a reload keeps it open.
    const first = await page.locator("#sessions option", { hasText: "first task" }).getAttribute("value");
    await page.selectOption("#sessions", first);
    await waitForText("first task");
    await waitForText("answer one");
    assert.equal(await page.locator("#empty-state").count(), 0);
    await page.reload();
    await waitForText("answer one");
    assert.equal(await page.locator("#sessions").inputValue(), first);
    // Another tab's first visit takes up the untouched session instead of making another.
    const other = await browser.newPage();
    await other.goto(url);
    await other.locator("#empty-state").waitFor();
    assert.equal(await other.locator("#sessions").inputValue(), untouched);
    const count = await other.evaluate(async () => {
      const response = await fetch("/api/sessions",
        { headers: { Authorization: "Bearer " + sessionStorage.getItem("keel-token") } });
      return (await response.json()).length;
    });
    assert.equal(count, 3, "two from the command line and one untouched");
    await other.close();
  },

  // Open plan items: the bar says why in plain words and offers to continue; one click does.
  async readiness() {
    // The history arrives late (a slow link): the offer's words must not wait for it.
    await page.route("**/history", async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      await route.continue();
    });
    // The first status that has the offer is answered as the server answers while the turn
    // still lets the session go (busy, nothing pending): the page must ask again.
    let raced = false;
    await page.route(/\/api\/sessions\/[0-9a-f]+$/, async (route) => {
      let response, status;
      try {
        response = await route.fetch();
        status = await response.json();
      } catch {
        // The page went away mid-request: nothing is waiting for this answer.
        return;
      }
      if (!raced && status.pending) {
        raced = true;
        await route.fulfill({ response, json: { ...status, busy: true, pending: null } });
      } else {
        await route.fulfill({ response, json: status });
      }
    });
    await ask("edit and test");
    await page.waitForSelector("#continue-checks", { state: "visible", timeout: 20000 });
    assert.ok(raced, "the race was played");
    assert.equal(await page.locator(".card .subject").first().innerText(), "next: run the tests");
    assert.equal(await page.locator("#recovery-text").innerText(),
      "Not ready: the plan has 1 open item — continue checks?");
    await page.screenshot({ path: `${out}/readiness.png` });
    await page.click("#continue-checks");
    await waitForText("Ran the tests: they pass.");
    await page.waitForSelector("#recovery", { state: "hidden" });
    // The page keeps polling: a status asked as the scenario ends must not reach a handler
    // whose response the browser has disposed of (an uncaught rejection ends the script).
    await page.unrouteAll({ behavior: "ignoreErrors" });
  },

  // Opened without the token (the bare address): the page says to open the URL keel printed.
  async no_token() {
    await page.goto(url.split("#")[0]);
    await page.locator("#no-token").waitFor({ timeout: 20000 });
    assert.match(await page.locator("#no-token").innerText(), /Open the URL keel serve printed/);
    assert.equal(await page.locator("#prompt").isVisible(), false, "nothing to type into");
    await page.screenshot({ path: `${out}/no-token.png` });
  },

  // The provider refuses the key: the browser says what the terminal says to do.
  async refused_key() {
    await ask("hello");
    await page.locator(".error").first().waitFor({ timeout: 20000 });
    const said = await page.locator(".error").first().innerText();
    assert.match(said, /refused the key in DEEPSEEK_API_KEY/);
    assert.match(said, /keel config/);
    assert.match(said, /HTTP 401/);
    assert.doesNotMatch(said, /secret detail/, "never the provider's own words");
    // The session is now named by its first prompt.
    await page.waitForFunction(() => document.querySelector("#sessions option").textContent.startsWith("hello · "));
    await page.screenshot({ path: `${out}/refused-key.png` });
  },

  // An opaque 400 on the replay: the recovery button is the action offered, visible without
  // opening anything; one click finishes the task.
  async recovery() {
    await ask("look around");
    await page.waitForSelector("#recover", { state: "visible", timeout: 20000 });
    assert.equal(await page.locator("#continue-checks").isVisible(), false);
    const box = await page.locator("#recover").boundingBox();
    assert.ok(box && box.y >= 0 && box.y < 700, "the button is on screen");
    await page.screenshot({ path: `${out}/recovery.png` });
    // Usable at 400 px: nothing needs a sideways scroll and the actions stay on screen.
    await page.setViewportSize({ width: 400, height: 700 });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 400, `page is ${width} px wide at a 400 px viewport`);
    for (const id of ["#recover", "#send", "#prompt"]) assert.ok(await page.locator(id).isVisible(), id);
    await page.screenshot({ path: `${out}/recovery-400px.png` });
    await page.click("#recover");
    await waitForText("Recovered from valid history.");
    // The failed turn's diagnostic stays under it, also after a reload.
    await page.reload();
    await waitForText("the upstream rejected the request without giving a reason (HTTP 400)");
    assert.doesNotMatch(await text(), /upstream_reason_missing/, "the kind stays in the events");
    await waitForText("Recovered from valid history.");
    await page.waitForSelector("#recovery", { state: "hidden" });
  },

  // A context-limit rejection: "Compact and continue" is offered; one click compacts the
  // history (the transcript is rebuilt from the new revision at once) and finishes the task.
  async compact() {
    await ask("run all the rounds");
    await page.waitForSelector("#compact", { state: "visible", timeout: 20000 });
    assert.equal(await page.locator("#recover").isVisible(), false);
    assert.match(await page.locator("#recovery-text").innerText(), /no longer fits/);
    await page.fill("#guidance", "the effects log");
    await page.screenshot({ path: `${out}/compact.png` });
    await page.click("#compact");
    await waitForText("All rounds done.");
    await page.waitForSelector(".summary-item", { timeout: 20000 });
    assert.match(await page.locator(".summary-item summary").innerText(), /summary of \d+ earlier messages/);
    await page.waitForSelector("#recovery", { state: "hidden" });
    await page.reload();
    await waitForText("All rounds done.");
    assert.equal(await page.locator(".summary-item").count(), 1, "the history is the compacted revision");
  },

  // Stop during a slow stream: nothing of it appears afterwards, though the provider goes on.
  // LATE_AFTER_MS: when the scripted stream's last piece would have arrived.
  async stop() {
    await ask("tell me a long story");
    await waitForText("Once");
    await page.click("#stop");
    await waitForText("stopped");
    await page.waitForTimeout(Number(process.env.LATE_AFTER_MS || "8000"));
    const shown = await text();
    assert.ok(!shown.includes("ENDWORD"), "no late text after Stop");
    // What streamed before Stop stays, marked, above the note that it was not kept.
    assert.ok(await page.locator(".interrupted").count() >= 1, "the streamed text is kept, marked");
    assert.match(await page.locator(".stopped-note").last().innerText(), /incomplete and was not kept/);
    assert.ok(shown.indexOf("Once upon a time") < shown.indexOf("incomplete"), "kept above the note");
    assert.equal(await page.locator(".card").count(), 0, "no tool started");
    assert.equal(await page.locator("#send").isDisabled(), false, "ready for the next prompt");
  },

  // A turn as it happens: a command's output and elapsed time while it runs, an edit's exact
  // change from keel's renderer, and an answer rendered while it still streams.
  async live() {
    await ask("do the work");
    await page.waitForFunction(() => {
      const live = document.querySelector(".card .live-output");
      const state = document.querySelector(".card .state");
      return live && live.textContent.includes("line 2") && /^running… [1-9]\d* s$/.test(state.textContent);
    }, null, { timeout: 20000 });
    assert.ok(!(await page.locator(".card .live-output").innerText()).includes("line 6"), "seen while it runs");
    await page.screenshot({ path: `${out}/live-output.png` });
    await page.waitForFunction(() => document.querySelector(".card .state").textContent.startsWith("completed"));
    assert.equal(await page.locator(".card .live-output").count(), 0, "the live tail gives way to the output");
    // The edit allowed without a question: its change, numbered, from the preview.
    await page.locator(".card .filediff tr.del").first().waitFor();
    assert.equal(await page.locator(".card .filediff tr.del td.no").first().innerText(), "2");
    assert.equal(await page.locator(".card .filediff tr.add td.text").first().innerText(), "+ beta");
    assert.equal(await page.locator(".card", { hasText: "edit_file" }).locator(".filediff").count(), 1,
      "one diff on the card: the preview's replaced the call's");
    // The answer is rendered while it streams: a heading and a table before the last word.
    await page.waitForFunction(() => {
      const live = document.querySelector("#transcript .msg > .md");
      return live && live.querySelector("h2") && live.querySelector("table")
        && !document.getElementById("transcript").innerText.includes("ENDWORD");
    }, null, { timeout: 20000 });
    assert.ok(!(await text()).includes("|---|"), "no raw table while it streams");
    await page.screenshot({ path: `${out}/live-stream.png` });
    await waitForText("ENDWORD");
    assert.equal(await page.locator(".md h2").innerText(), "Report");
    // After a reload the edit's card shows keel's diff of its arguments (its place in the
    // file is not known there: no line numbers).
    await page.reload();
    await waitForText("ENDWORD");
    assert.equal(await page.locator(".filediff caption").first().innerText(), "+1 −1 (the replaced text)");
    assert.equal(await page.locator(".filediff tr.add td.text").first().innerText(), "+ beta");
    // The header's totals, money included, also as a fresh page loads them.
    const totals = /^· tokens [1-9]\d* in · [1-9]\d* out · cache \d+% · €0\.\d+/;
    await page.waitForFunction((re) => new RegExp(re).test(document.getElementById("usage").textContent), totals.source);
    const before = await page.locator("#usage").innerText();
    await page.reload();
    await page.waitForFunction((re) => new RegExp(re).test(document.getElementById("usage").textContent), totals.source);
    assert.equal(await page.locator("#usage").innerText(), before);
  },

  // Reload in the middle of a turn: the transcript is whole and keeps streaming.
  async reload() {
    await ask("stream slowly");
    await waitForText("Once");
    await page.reload();
    await waitForText("stream slowly");
    await waitForText("FINALWORD", 30000);
    await page.waitForFunction(() => document.getElementById("stop").disabled === true);
    assert.equal(count(await text(), "FINALWORD"), 1, "the answer once");
    assert.equal(count(await text(), "stream slowly"), 1, "the prompt once");
    // Reloaded after the end: the turn's usage line is still under it.
    await page.reload();
    await waitForText("FINALWORD");
    await waitForText("tokens ");
  },

  // A transient 503: the retry notice shows, and the final answer has no duplicated text.
  async retry() {
    await ask("hello");
    // In words: what failed and its status, not the kind's name.
    await page.waitForFunction(() => [...document.querySelectorAll(".notice")].some((n) =>
      /^retry 1\/\d+ to 127\.0\.0\.1 in [\d.]+ s: the provider failed to answer \(HTTP 503\)$/.test(n.textContent)),
    null, { timeout: 20000 });
    await waitForText("Answer after retry.");
    await page.waitForFunction(() => document.getElementById("send").disabled === false);
    assert.equal(count(await text(), "Answer after retry."), 1);
  },
};

// Scenarios that open the page their own way.
const ownStart = new Set(["no_token"]);

let code = 0;
try {
  if (!ownStart.has(scenario)) {
    await page.goto(url);
    await page.waitForSelector("#sessions option", { state: "attached", timeout: 20000 });
  }
  await scenarios[scenario]();
  assert.deepEqual(errors, [], "no script errors in the page");
  console.log(`ok ${scenario}`);
} catch (error) {
  code = 1;
  console.error(`FAILED ${scenario}: ${error.stack || error}`);
  await page.screenshot({ path: `${out}/${scenario}-failure.png` }).catch(() => {});
  console.error(await text().catch(() => ""));
} finally {
  await browser.close();
}
process.exit(code);
