// toolscout console: the only script. Live servers table (server-sent events) and the chat turn
// stream (fetch + server-sent events). No framework, no build step.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// --- servers: the table is redrawn on every catalog change -----------------------------------
function followServers() {
  const body = document.getElementById("server-rows");
  if (!body || !window.EventSource) return;
  const status = document.getElementById("live-state");
  const source = new EventSource(body.dataset.events);
  source.addEventListener("open", () => { if (status) status.textContent = "live"; });
  source.addEventListener("error", () => { if (status) status.textContent = "reconnecting…"; });
  source.addEventListener("servers", (event) => {
    body.innerHTML = event.data;
    if (status) status.textContent = "live, updated " + new Date().toLocaleTimeString();
  });
}

// --- chat -------------------------------------------------------------------------------------
function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text || ""; }
}

function newTurn(message) {
  const turns = document.getElementById("turns");
  const number = turns.children.length + 1;
  const turn = el("article", { class: "turn", "aria-label": "Turn " + number });
  turn.append(el("h3", {}, "Turn " + number + ": " + message));
  turn.reasoning = null;
  turn.calls = {};
  turn.usage = el("p", { class: "usage" }, "tokens: waiting for the first LLM call…");
  turn.append(turn.usage);
  turns.prepend(turn);
  return turn;
}

function addCall(turn, data) {
  const search = data.name === "search_tools";
  const summary = el("summary", {}, (search ? "search_tools" : "tool call " + data.name) +
    (data.server ? " (" + data.server + ")" : ""));
  const result = el("pre", { class: "result" }, "running…");
  const details = el("details", { class: "call" + (search ? " search" : ""), open: "" }, summary,
    el("div", {}, "arguments"), el("pre", { class: "arguments" }, pretty(data.arguments)),
    el("div", {}, search ? "results (as the model read them)" : "result (as the model read it)"), result);
  details.dataset.name = data.name;
  turn.calls[data.id] = { details, result };
  turn.insertBefore(details, turn.usage);
}

function showUsage(turn, u, extra) {
  turn.usage.textContent = "tokens: input " + u.input + " · output " + u.output +
    " · cache reads " + u.cached + " · cache writes " + u.cache_write + (extra || "");
}

function handle(turn, data, reply) {
  switch (data.type) {
    case "started":
      if (data.trace_id) {
        const trace = data.trace_url ? el("a", { href: data.trace_url }, data.trace_id) : el("code", {}, data.trace_id);
        turn.insertBefore(el("p", { class: "trace" }, "trace ", trace), turn.usage);
      }
      break;
    case "reasoning":
      if (!turn.reasoning) {
        turn.reasoning = el("pre", { class: "reasoning" });
        turn.insertBefore(el("details", { open: "" }, el("summary", {}, "reasoning"), turn.reasoning), turn.usage);
      }
      turn.reasoning.textContent += data.text;
      break;
    case "text":
      reply.textContent += data.text;
      break;
    case "call_started":
      addCall(turn, data);
      break;
    case "call_finished": {
      const call = turn.calls[data.id];
      if (call) {
        call.result.textContent = data.preview;
        if (data.is_error) call.details.classList.add("failed");
        call.details.querySelector("summary").append(" · " + data.seconds + " s" + (data.is_error ? " · error" : ""));
      }
      break;
    }
    case "discovered":
      turn.insertBefore(el("p", { class: "discovered" }, "loaded by the search: " + data.tools.join(", ")), turn.usage);
      break;
    case "usage":
      showUsage(turn, data);
      break;
    case "finished":
      for (const [id, text] of Object.entries(data.results)) {
        if (turn.calls[id]) turn.calls[id].result.textContent = text;
      }
      if (!reply.textContent) reply.textContent = data.answer || data.error || "(no answer)";
      showUsage(turn, data.usage, " · LLM calls " + data.llm_calls + " · tool definitions sent " +
        data.definitions.sent + " of " + data.definitions.all + " (" + data.definitions.saved + " saved, " +
        data.definitions.encoding + ")");
      turn.classList.add("done");
      break;
    case "error":
      reply.textContent = data.message;
      reply.classList.add("error");
      turn.classList.add("done");
      break;
  }
}

async function send(form) {
  const input = document.getElementById("message");
  const message = input.value.trim();
  if (!message) return;
  const button = document.getElementById("send");
  button.disabled = true;
  const messages = document.getElementById("messages");
  messages.append(el("li", { class: "user" }, message));
  const reply = el("li", { class: "assistant" });
  messages.append(reply);
  const turn = newTurn(message);
  input.value = "";
  try {
    const response = await fetch(form.dataset.send, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrfToken() },
      body: JSON.stringify({
        message,
        model: document.getElementById("model").value,
        toolset: document.getElementById("toolset").value,
      }),
    });
    if (!response.ok) {
      handle(turn, { type: "error", message: await response.text() }, reply);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf("\n\n")) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) handle(turn, JSON.parse(data), reply);
      }
    }
  } catch (err) {
    handle(turn, { type: "error", message: "The chat stream broke: " + err }, reply);
  } finally {
    button.disabled = false;
    input.focus();
  }
}

// --- catalog: a tool's input schema is fetched when its row is opened ---------------------------
function setUpSchemas() {
  document.addEventListener("toggle", async (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !details.dataset.schema) return;
    const pre = details.querySelector("pre");
    const url = details.dataset.schema;
    delete details.dataset.schema;  // once
    try {
      const response = await fetch(url);
      pre.textContent = response.ok ? await response.text() : "(not available: " + response.status + ")";
    } catch (err) {
      pre.textContent = "(not available: " + err + ")";
      details.dataset.schema = url;
    }
  }, true);
}

function setUpChat() {
  const form = document.getElementById("chat-form");
  if (!form) return;
  form.addEventListener("submit", (event) => { event.preventDefault(); send(form); });
  document.getElementById("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(form); }
  });
}

document.addEventListener("DOMContentLoaded", () => { followServers(); setUpSchemas(); setUpChat(); });
