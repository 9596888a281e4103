// Benchmark peer: the example contract's slow_compute on the TypeScript SDK's
// experimental tasks (InMemoryTaskStore + registerToolTask), Streamable HTTP
// with sessions, one McpServer per session sharing one store.
//
// As its users run it (the SDK's own examples, simpleStreamableHttp): an express app from
// the SDK's createMcpExpressApp() (localhost Host-header validation, then express.json()),
// POST /mcp handing the parsed body to transport.handleRequest(req, res, req.body), GET and
// DELETE /mcp to the session's transport; responses on the SDK's default (an SSE stream per
// POST). --json-response switches on enableJsonResponse (a second, labelled row of the
// benchmark); --raw-request serves instead from node:http, handing the raw request to
// transport.handleRequest(req, res) so that the SDK reads and parses the body itself (the
// setup of earlier figures: a third, labelled row, never a reference).
//
// --parsed-body serves from node:http too, the app reading the body and handing JSON.parse's
// result to transport.handleRequest(req, res, body) (a fourth, labelled row).
//
//   node --expose-gc server.mjs --port PORT [--host 127.0.0.1] [--json-response] [--raw-request] [--parsed-body]
//
// GET /bench/heap runs a full GC and answers process.memoryUsage() (benchmark hook).
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const port = parseInt(arg('--port', '0'), 10);
const jsonResponse = process.argv.includes('--json-response');
const rawRequest = process.argv.includes('--raw-request');
const parsedBody = process.argv.includes('--parsed-body');
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

function newTransport() {
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: jsonResponse,
    onsessioninitialized: id => sessions.set(id, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
  };
  return transport;
}

function heap(res) {
  // Benchmark hook: full GC (node --expose-gc), then the process's memory figures.
  if (globalThis.gc) globalThis.gc();
  const body = JSON.stringify(process.memoryUsage());
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const notFound = { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null };

function expressServer() {
  // The SDK's examples (simpleStreamableHttp), without their logging and OAuth.
  const app = createMcpExpressApp({ host });
  app.get('/bench/heap', (_req, res) => heap(res));
  app.post('/mcp', async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    try {
      let transport = sid ? sessions.get(sid) : undefined;
      if (!transport) {
        if (sid) {
          res.status(404).json(notFound);
          return;
        }
        if (!isInitializeRequest(req.body)) {
          res.status(400).json({
            jsonrpc: '2.0',
            error: { code: -32000, message: 'Bad Request: No valid session ID provided' },
            id: null,
          });
          return;
        }
        transport = newTransport();
        await newServer().connect(transport);
      }
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      console.error(err);
      if (!res.headersSent) {
        res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
      }
    }
  });
  const other = async (req, res) => {
    const transport = sessions.get(req.headers['mcp-session-id']);
    if (!transport) {
      res.status(404).json(notFound);
      return;
    }
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', other);
  app.delete('/mcp', other);
  return createServer(app);
}

function rawServer() {
  // node:http, the raw request to handleRequest: the SDK reads and parses the body.
  return createServer(async (req, res) => {
    try {
      if (req.url === '/bench/heap') {
        heap(res);
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
          res.end(JSON.stringify(notFound));
          return;
        }
        transport = newTransport();
        await newServer().connect(transport);
      }
      if (parsedBody && req.method === 'POST') {
        // --parsed-body: the app reads and parses the body (no express) and hands it over
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        await transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8')));
        return;
      }
      await transport.handleRequest(req, res);
    } catch (err) {
      console.error(err);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
}

const http = rawRequest || parsedBody ? rawServer() : expressServer();
http.keepAliveTimeout = 600_000;
http.listen(port, host, () => {
  console.log(`listening ${http.address().port}`);
});
const stop = () => { http.close(); taskStore.cleanup(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
