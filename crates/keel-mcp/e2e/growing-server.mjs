// An MCP server on the official TypeScript SDK (`@modelcontextprotocol/sdk`, the library
// server-everything is built on) whose tool list changes mid-session: its tool `grow` registers
// a tool `extra`, and the SDK itself sends `notifications/tools/list_changed`.
// server-everything cannot show this to keel: it registers its late tools while handling
// `initialized`, before a client's first `tools/list`.
// Usage: `node growing-server.mjs` (stdio) or `node growing-server.mjs http PORT` (streamable
// HTTP at http://127.0.0.1:PORT/mcp, one SDK server per session).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";

const text = (value) => ({ content: [{ type: "text", text: value }] });

function growing() {
  const server = new McpServer({ name: "growing", version: "1.0.0" });
  let extra = null;
  server.registerTool("grow", { description: "Adds the tool `extra`." }, async () => {
    extra ??= server.registerTool("extra", { description: "Added by grow." }, async () =>
      text("extra ran"));
    return text("grown");
  });
  return server;
}

const [mode, port] = process.argv.slice(2);
if (mode === "http") {
  const sessions = new Map();
  createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    let body;
    try {
      body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    } catch {
      response.writeHead(400).end("not JSON");
      return;
    }
    let transport = sessions.get(request.headers["mcp-session-id"]);
    if (!transport) {
      if (request.method !== "POST" || !isInitializeRequest(body)) {
        response.writeHead(404).end("no such session");
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      await growing().connect(transport);
    }
    await transport.handleRequest(request, response, body);
  }).listen(Number(port), "127.0.0.1");
} else {
  await growing().connect(new StdioServerTransport());
}
