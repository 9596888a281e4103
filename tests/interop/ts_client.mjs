// A TypeScript-SDK (1.32.2) client driving a tasks server through one scenario.
//
//   node ts_client.mjs SCENARIO URL                  (Streamable HTTP)
//   node ts_client.mjs SCENARIO stdio COMMAND ARGS... [-- SCENARIO_ARGS...]  (stdio)
//
// Prints one JSON object on stdout: what the SDK observed. The pytest side checks it
// against the spec rules (docs/spec/tasks-2025-11-25.md). Uses the SDK's experimental
// 2025-11-25 task API: client.experimental.tasks.{callToolStream,getTask,getTaskResult,
// listTasks,cancelTask}. Never asserts on timing.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const errorOf = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });

const [scenario, target, ...argv] = process.argv.slice(2);
// over stdio: the server's command, then `--` and the scenario's own arguments
const split = target === 'stdio' ? argv.indexOf('--') : -1;
const command = target === 'stdio' ? (split < 0 ? argv : argv.slice(0, split)) : [];
const rest = target === 'stdio' ? (split < 0 ? [] : argv.slice(split + 1)) : argv;
const out = { scenario, transport: target === 'stdio' ? 'stdio' : 'http' };

const elicitAnswer = scenario === 'confirm_decline' ? 'decline' : 'accept';
const client = new Client(
  { name: 'mcptask-interop-ts-client', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
out.notifications = [];
client.fallbackNotificationHandler = async (n) => {
  out.notifications.push({ method: n.method, params: n.params ?? null });
};
out.elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  out.elicitations.push(request.params);
  if (elicitAnswer === 'accept') return { action: 'accept', content: { confirm: true } };
  return { action: 'decline' };
});

const transport =
  target === 'stdio'
    ? new StdioClientTransport({ command: command[0], args: command.slice(1), env: process.env, stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target));

const tasks = client.experimental.tasks;

// Create a task explicitly (params.task via the SDK's `task` request option).
async function create(name, args, progress) {
  const options = { task: { ttl: 120000 } };
  if (progress) options.onprogress = (p) => progress.push(p);
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args } },
    CreateTaskResultSchema,
    options,
  );
  return created;
}

// Poll tasks/get until terminal or input_required, sleeping pollInterval (R-GET-1, R-GET-2).
async function poll(taskId) {
  const polls = [];
  for (;;) {
    const task = await tasks.getTask(taskId);
    const sleptMs = task.pollInterval ?? 1000;
    polls.push({ status: task.status, pollInterval: task.pollInterval ?? null, statusMessage: task.statusMessage ?? null, ttl: task.ttl, sleptMs });
    if (TERMINAL.has(task.status) || task.status === 'input_required') return { task, polls };
    await sleep(sleptMs);
  }
}

// The error a call ends with ({code, message}), or null when it succeeds.
async function errorFrom(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return errorOf(e);
  }
}

// List the tools (the SDK learns each one's taskSupport), create a task and poll it;
// records the polls in out.polls and returns what was created and the task polled last.
async function createAndPoll(name, args, progress) {
  await client.listTools();
  const created = await create(name, args, progress);
  const { task, polls } = await poll(created.task.taskId);
  out.polls = polls;
  return { created, task };
}

// The SDK's own flow: callToolStream polls and fetches the result by itself.
async function stream(name, args) {
  const messages = [];
  for await (const m of tasks.callToolStream({ name, arguments: args }, CallToolResultSchema)) {
    if (m.type === 'taskCreated' || m.type === 'taskStatus') messages.push({ type: m.type, status: m.task.status });
    else if (m.type === 'result') messages.push({ type: 'result', result: m.result });
    else messages.push({ type: m.type, error: errorOf(m.error) });
  }
  return messages;
}

const scenarios = {
  async tools() {
    out.serverCapabilities = client.getServerCapabilities();
    out.protocolVersion = transport.protocolVersion ?? null;
    const listed = await client.listTools();
    out.tools = Object.fromEntries(listed.tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
    out.greet = await client.callTool({ name: 'greet', arguments: { name: 'Ada' } });
    // bypass the SDK's own guard (callTool refuses required tools): R-TOOL-4 on the server
    const requiredCall = { method: 'tools/call', params: { name: 'failing_job', arguments: {} } };
    out.requiredWithoutTask = { error: await errorFrom(() => client.request(requiredCall, CallToolResultSchema)) };
    out.sdkGuard = await errorFrom(() => client.callTool({ name: 'failing_job', arguments: {} }));
  },

  async slow_compute() {
    const progress = [];
    const { created, task } = await createAndPoll('slow_compute', { seconds: 1, label: 'ts' }, progress);
    out.created = created;
    out.final = task;
    out.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
    out.listed = (await tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));
    out.progress = progress;
    out.stream = await stream('slow_compute', { seconds: 0, label: 'stream' });
  },

  async cancel() {
    await client.listTools();
    const created = await create('slow_compute', { seconds: 120 });
    const id = created.task.taskId;
    out.taskId = id;
    out.cancelled = await tasks.cancelTask(id);
    out.after = await tasks.getTask(id);
    out.cancelAgain = { error: await errorFrom(() => tasks.cancelTask(id)) };
    out.listed = (await tasks.listTasks()).tasks.filter((t) => t.taskId === id).map((t) => t.status);
    out.unknown = { error: await errorFrom(() => tasks.getTask('no-such-task')) };
  },

  async failing_job() {
    const { task } = await createAndPoll('failing_job', {});
    out.final = task;
    out.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
    out.stream = await stream('failing_job', {});
  },

  async protocol_error_job() {
    const { task } = await createAndPoll('protocol_error_job', {});
    out.final = task;
    out.resultError = await errorFrom(async () => {
      out.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
    });
  },

  async confirm() {
    const { task } = await createAndPoll('confirm_delete', { path: '/tmp/x' });
    // R-INPUT-3: on input_required, call tasks/result early; the elicitation arrives meanwhile
    out.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
    out.final = await tasks.getTask(task.taskId);
  },
};
// Any tool as a task: node ts_client.mjs task URL TOOL ARGS_JSON (a server of the README).
scenarios.task = async () => {
  const [name, argsJson] = rest;
  const { created, task } = await createAndPoll(name, JSON.parse(argsJson ?? '{}'));
  out.serverCapabilities = client.getServerCapabilities();
  out.created = created;
  out.final = task;
  out.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
};
scenarios.confirm_accept = scenarios.confirm;
scenarios.confirm_decline = scenarios.confirm;

let code = 0;
try {
  if (!scenarios[scenario]) throw new Error(`unknown scenario ${scenario}`);
  await client.connect(transport);
  await scenarios[scenario]();
} catch (e) {
  out.fatal = { ...errorOf(e), stack: e?.stack ?? null };
  code = 1;
} finally {
  try {
    await client.close();
  } catch {
    // closing a dead transport is fine
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(code);
