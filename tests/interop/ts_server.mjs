// A TypeScript-SDK (1.32.2) server with the example server's tool contract built
// on the SDK's experimental 2025-11-25 tasks: InMemoryTaskStore, InMemoryTaskMessageQueue,
// server.experimental.tasks.registerToolTask. Our requestor helpers and CLI drive it.
//
//   node ts_server.mjs --http PORT     (Streamable HTTP at http://127.0.0.1:PORT/mcp)
//   node ts_server.mjs --stdio
//
// One addition to the SDK: its TaskStore can only store a Result, so a task whose work
// raised cannot make tasks/result answer that JSON-RPC error (R-RESULT-1). ErrorReplayStore
// remembers the error and throws it from getTaskResult, which the SDK's tasks/result
// handler turns into the JSON-RPC error.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { ElicitResultSchema, ErrorCode, McpError, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

class ErrorReplayStore extends InMemoryTaskStore {
  errors = new Map();

  async failWithError(taskId, code, message, sessionId) {
    this.errors.set(taskId, { code, message });
    await this.storeTaskResult(taskId, 'failed', { content: [{ type: 'text', text: message }], isError: true }, sessionId);
  }

  async getTaskResult(taskId, sessionId) {
    const result = await super.getTaskResult(taskId, sessionId);
    const error = this.errors.get(taskId);
    if (error) throw new McpError(error.code, error.message);
    return result;
  }
}

const store = new ErrorReplayStore();
const POLL_MS = 200;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t, isError = false) => ({ content: [{ type: 'text', text: t }], ...(isError ? { isError: true } : {}) });

// Store the outcome unless the task was cancelled meanwhile (R-CANCEL-3: it stays cancelled).
async function finish(taskStore, taskId, status, result) {
  const task = await store.getTask(taskId);
  if (!task || ['completed', 'failed', 'cancelled'].includes(task.status)) return;
  await taskStore.storeTaskResult(taskId, status, result);
}

// A task for this tools/call, with the requested ttl (R-TTL-2) and our poll interval.
const newTask = (extra) => extra.taskStore.createTask({ ttl: extra.taskRequestedTtl, pollInterval: POLL_MS });
const getTask = async (_args, { taskId, taskStore }) => taskStore.getTask(taskId);
const getTaskResult = async (_args, { taskId, taskStore }) => taskStore.getTaskResult(taskId);

function buildServer() {
  const mcp = new McpServer(
    { name: 'mcptask-interop-ts-server', version: '1.0.0' },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: store,
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );

  mcp.registerTool(
    'greet',
    { description: 'Say hello (never a task).', inputSchema: { name: z.string() } },
    async ({ name }) => text(`Hello, ${name}!`),
  );

  mcp.experimental.tasks.registerToolTask(
    'slow_compute',
    {
      description: 'Wait `seconds`, reporting progress; stops early when cancelled.',
      inputSchema: { seconds: z.number().default(1), label: z.string().optional() },
      execution: { taskSupport: 'optional' },
    },
    {
      async createTask({ seconds, label }, extra) {
        const task = await newTask(extra);
        const token = extra._meta?.progressToken;
        (async () => {
          const steps = Math.max(1, Math.min(20, Math.floor(seconds * 10)));
          if (seconds > 0) {
            for (let i = 0; i < steps; i++) {
              await sleep((seconds * 1000) / steps);
              if ((await store.getTask(task.taskId))?.status === 'cancelled') return;
              if (token !== undefined) {
                await mcp.server
                  .notification({ method: 'notifications/progress', params: { progressToken: token, progress: i + 1, total: steps } })
                  .catch(() => {});
              }
            }
          }
          await finish(extra.taskStore, task.taskId, 'completed', text(`done after ${seconds}s (${label ?? 'no label'})`));
        })().catch((e) => console.error('slow_compute', e));
        return { task };
      },
      getTask,
      getTaskResult,
    },
  );

  // A tool run only as a task (taskSupport required) whose work ends 10 ms later with end().
  const registerJob = (name, description, end) =>
    mcp.experimental.tasks.registerToolTask(
      name,
      { description, execution: { taskSupport: 'required' } },
      {
        async createTask(extra) {
          const task = await newTask(extra);
          setTimeout(() => end(task, extra).catch((e) => console.error(name, e)), 10);
          return { task };
        },
        getTask,
        getTaskResult,
      },
    );

  registerJob('failing_job', 'Always ends with an isError result (task status failed).', (task, extra) =>
    finish(extra.taskStore, task.taskId, 'failed', text('job failed', true)),
  );

  registerJob('protocol_error_job', 'Always raises: the task fails with a JSON-RPC error.', (task, extra) =>
    store.failWithError(task.taskId, ErrorCode.InternalError, 'Internal error: protocol_error_job crashed', extra.sessionId),
  );

  mcp.experimental.tasks.registerToolTask(
    'confirm_delete',
    {
      description: 'Ask the user before deleting `path` (nothing is really deleted).',
      inputSchema: { path: z.string() },
      execution: { taskSupport: 'optional' },
    },
    {
      async createTask({ path }, extra) {
        const task = await newTask(extra);
        (async () => {
          // sendRequest with relatedTask: the SDK sets input_required and queues the request
          // for delivery on the tasks/result stream (R-INPUT-1..3).
          const answer = await extra.sendRequest(
            {
              method: 'elicitation/create',
              params: {
                mode: 'form',
                message: `Delete ${path}?`,
                requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean', default: true } } },
              },
            },
            ElicitResultSchema,
            { relatedTask: { taskId: task.taskId }, timeout: 300000 },
          );
          if ((await store.getTask(task.taskId))?.status === 'input_required') {
            await extra.taskStore.updateTaskStatus(task.taskId, 'working'); // R-INPUT-4
          }
          const verb = answer.action === 'accept' ? 'deleted' : 'kept';
          await finish(extra.taskStore, task.taskId, 'completed', text(`${verb} ${path}`));
        })().catch(async (e) => {
          console.error('confirm_delete', e);
          await finish(extra.taskStore, task.taskId, 'failed', text(String(e?.message ?? e), true)).catch(() => {});
        });
        return { task };
      },
      getTask,
      getTaskResult,
    },
  );
  return mcp;
}

const mode = process.argv[2];
if (mode === '--stdio') {
  await buildServer().connect(new StdioServerTransport());
} else if (mode === '--http') {
  const port = Number(process.argv[3]);
  const transports = new Map();
  const readBody = async (req) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
  };
  const http = createServer(async (req, res) => {
    try {
      if (!req.url?.startsWith('/mcp')) {
        res.writeHead(404).end();
        return;
      }
      const sessionId = req.headers['mcp-session-id'];
      const body = req.method === 'POST' ? await readBody(req) : undefined;
      let transport = sessionId ? transports.get(sessionId) : undefined;
      if (!transport && req.method === 'POST' && !sessionId && isInitializeRequest(body)) {
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await buildServer().connect(transport);
      }
      if (!transport) {
        res.writeHead(sessionId ? 404 : 400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'No valid session' }, id: null }));
        return;
      }
      await transport.handleRequest(req, res, body);
    } catch (e) {
      console.error('http', e);
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  http.listen(port, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${port}/mcp`));
} else {
  console.error('usage: node ts_server.mjs --http PORT | --stdio');
  process.exit(2);
}
