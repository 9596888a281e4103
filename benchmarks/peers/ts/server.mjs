// Benchmark peer: the example contract's slow_compute on the TypeScript SDK's
// experimental tasks (InMemoryTaskStore + registerToolTask), Streamable HTTP
// with sessions, one McpServer per session sharing one store. Its responses are the SDK's
// default (an SSE stream per POST), as its users run it; --json-response switches on
// enableJsonResponse (a second, labelled row of the benchmark).
//
//   node --expose-gc server.mjs --port PORT [--host 127.0.0.1] [--json-response]
//
// GET /bench/heap runs a full GC and answers process.memoryUsage() (benchmark hook).
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const port = parseInt(arg('--port', '0'), 10);
const jsonResponse = process.argv.includes('--json-response');
const host = arg('--host', '127.0.0.1');

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function newServer() {
  const server = new McpServer(
    { name: 'bench-ts-peer', version: '0.0.0' },
    {
      capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue,
    },
  );
  server.experimental.tasks.registerToolTask(
    'slow_compute',
    {
      description: 'Wait `seconds`, then answer',
      inputSchema: { seconds: z.number().default(1), label: z.string().optional() },
      execution: { taskSupport: 'optional' },
    },
    {
      async createTask({ seconds, label }, { taskStore: store, taskRequestedTtl }) {
        // pollInterval 100 ms: the SDK's tasks/result re-reads the store every pollInterval
        // (default 1 s); 100 ms is the setting behind the TypeScript figures.
        const task = await store.createTask({ ttl: taskRequestedTtl, pollInterval: 100 });
        (async () => {
          if (seconds > 0) await sleep(seconds * 1000);
          await store.storeTaskResult(task.taskId, 'completed', {
            content: [{ type: 'text', text: `done after ${seconds}s (${label ?? 'no label'})` }],
          });
        })();
        return { task };
      },
      async getTask(_args, { taskId, taskStore: store }) {
        return await store.getTask(taskId);
      },
      async getTaskResult(_args, { taskId, taskStore: store }) {
        return await store.getTaskResult(taskId);
      },
    },
  );
  return server;
}

const sessions = new Map();

const http = createServer(async (req, res) => {
  try {
    if (req.url === '/bench/heap') {
      // Benchmark hook: full GC (node --expose-gc), then the process's memory figures.
      if (globalThis.gc) globalThis.gc();
      const body = JSON.stringify(process.memoryUsage());
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== 'POST') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: jsonResponse,
        onsessioninitialized: id => sessions.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  } catch (err) {
    console.error(err);
    if (!res.headersSent) res.writeHead(500).end();
  }
});
http.keepAliveTimeout = 600_000;
http.listen(port, host, () => {
  console.log(`listening ${http.address().port}`);
});
const stop = () => { http.close(); taskStore.cleanup(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
