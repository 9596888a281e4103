// The official tasks client (@modelcontextprotocol/ext-tasks 0.2.2, on @modelcontextprotocol/client
// 2.x) driving a tasks server, as published: its public API only, its own polling.
//
//   node ext_tasks_client.mjs v1 URL [TOKEN]     2025-11-25 core tasks (initialize)
//   node ext_tasks_client.mjs v2 URL [TOKEN]     2026-07-28 tasks extension (server/discover)
//   node ext_tasks_client.mjs v1 stdio COMMAND ARGS...   v1 over stdio (a server per client)
//   node ext_tasks_client.mjs receiver COMMAND ARGS...   its ./receiver, over stdio
//
// Prints one JSON object on stdout: what the client observed, scenario by scenario (a
// scenario that throws is recorded as {fatal}). The pytest side checks it against the spec
// rules (docs/spec/tasks-2025-11-25.md, docs/spec/tasks-extension.md). Never asserts on
// timing.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import {
  createApplicationInputHandler,
  createTaskSessionEndpointId,
  createTaskSessionFromClient,
} from '@modelcontextprotocol/ext-tasks/client';
import { bindTaskReceiver } from '@modelcontextprotocol/ext-tasks/receiver';

const CLIENT_INFO = { name: 'mcptask-interop-ext-tasks', version: '1.0.0' };
const CAPABILITIES = { elicitation: { form: {} } };
const V2 = '2026-07-28';
const RELATED = 'io.modelcontextprotocol/related-task';
const REQUIRE = { task: { preference: 'require' } };

const errorOf = (e) => ({
  name: e?.name ?? null,
  code: e?.code ?? null,
  message: String(e?.message ?? e),
});
const textOf = (result) => result?.content?.[0]?.text ?? null;

// The host's raw request path for V2 task wire shapes (the SDK Client rejects
// `resultType: "task"`): requests sent on the Client's own transport under ids of ours,
// their responses taken off the transport before the Client sees them.
function rawDispatcher(transport) {
  const pending = new Map();
  let next = 0;
  const original = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const mine = message && !('method' in message) && pending.has(message.id);
    if (!mine) return original?.(message, extra);
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve('error' in message ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result });
  };
  return async (request, options = {}) => {
    const id = `ext-tasks-${++next}`;
    const answered = new Promise((resolve, reject) => {
      pending.set(id, resolve);
      options.signal?.addEventListener('abort', () => {
        pending.delete(id);
        reject(options.signal.reason);
      }, { once: true });
    });
    await transport.send({ jsonrpc: '2.0', id, ...request });
    return answered;
  };
}

// The user: accepts every question (name Ada), except a deletion of a path with "decline".
function inputHandler(asked) {
  return createApplicationInputHandler({
    elicitation: async (request, context) => {
      const message = String(request.params.message ?? '');
      asked.push({
        message,
        scope: context.scope,
        delivery: context.delivery,
        taskId: context.taskId ?? null,
      });
      if (message.includes('decline')) return { action: 'decline' };
      return { action: 'accept', content: { name: 'Ada', confirm: true } };
    },
    sampling: async () => ({ model: 'interop', role: 'assistant', content: { type: 'text', text: 'hi' } }),
    roots: async () => ({ roots: [] }),
  });
}

// The transport to TARGET: a URL, or ['stdio', COMMAND, ARGS...] (a new server process).
function transportTo(target, token) {
  if (Array.isArray(target)) {
    const [command, ...args] = target.slice(1);
    return new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
  }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}

// A connected Client and its task session on FORM (v1 or v2).
async function open(form, url, token, asked) {
  const options = { capabilities: CAPABILITIES };
  if (form === 'v2') options.versionNegotiation = { mode: { pin: V2 } };
  const client = new Client(CLIENT_INFO, options);
  const transport = transportTo(url, token);
  await client.connect(transport);
  const sessionOptions = {
    endpointId: await createTaskSessionEndpointId('mcptask-interop', { url, form, token: token ?? null }),
    onInputRequest: inputHandler(asked),
    onError: () => {},
  };
  if (form === 'v2') {
    sessionOptions.rawDispatch = rawDispatcher(transport);
    sessionOptions.v2RequestFraming = {
      protocolVersion: V2,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CAPABILITIES,
    };
  }
  const session = createTaskSessionFromClient(client, sessionOptions);
  return {
    client,
    session,
    async close() {
      await session.close();
      await client.close();
    },
  };
}

// One tool call as a task, followed to its end by execution.settle.
async function follow(session, name, args, asked) {
  const execution = await session.callTool(name, args, REQUIRE);
  const out = { kind: execution.kind, taskId: execution.handle?.taskId ?? null, statuses: [] };
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === 'task') out.statuses.push(event.task.status);
    },
  });
  out.status = outcome.status;
  if (outcome.status === 'completed') {
    out.text = textOf(outcome.result);
    out.isError = outcome.result.isError ?? false;
    out.related = outcome.result._meta?.[RELATED]?.taskId ?? null;
  } else if (outcome.status === 'failed') {
    out.error = errorOf(outcome.error);
  }
  out.asked = asked.filter((a) => a.taskId === out.taskId);
  return out;
}

async function errorFrom(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return errorOf(e);
  }
}

async function scenarios(form, url, token) {
  const out = { form };
  const asked = [];
  const { client, session, close } = await open(form, url, token, asked);
  out.era = client.getProtocolEra() ?? null;
  out.capabilities = session.capabilities;
  const tools = await client.listTools();
  out.tools = Object.fromEntries(tools.tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
  const run = async (key, body) => {
    try {
      out[key] = await body();
    } catch (e) {
      out[key] = { fatal: { ...errorOf(e), stack: e?.stack ?? null } };
    }
  };
  // Independent scenarios at once: each is its own task.
  await Promise.all([
    run('exact', () => follow(session, 'slow_compute', { seconds: 0.2, label: 'x' }, [])),
    run('immediate', async () => {
      const execution = await session.callTool('greet', { name: 'Ada' });
      const { outcome } = await execution.settle();
      return { kind: execution.kind, status: outcome.status, text: textOf(outcome.result) };
    }),
    run('toolError', () => follow(session, 'failing_job', {}, [])),
    run('protocolError', () => follow(session, 'protocol_error_job', {}, [])),
    run('accept', () => follow(session, 'confirm_delete', { path: '/tmp/accept' }, asked)),
    run('decline', () => follow(session, 'confirm_delete', { path: '/tmp/decline' }, asked)),
    run('multi', () => follow(session, 'multi_input', {}, asked)),
    run('beforeTask', () => follow(session, 'test_tool_with_task', {}, asked)),
    run('cancel', async () => {
      const execution = await session.callTool('slow_compute', { seconds: 120 }, REQUIRE);
      const taskId = execution.handle.taskId;
      await execution.cancel();
      const { outcome } = await execution.settle();
      const after = await session.task(taskId).snapshot();
      const again = await errorFrom(() => session.cancelTask(taskId));
      return { taskId, status: outcome.status, after: after.status, again };
    }),
    run('cancelById', async () => {
      const execution = await session.callTool('slow_compute', { seconds: 120 }, REQUIRE);
      const taskId = execution.handle.taskId;
      await execution.detach();
      await session.cancelTask(taskId);
      return { taskId, after: (await session.task(taskId).snapshot()).status };
    }),
  ]);
  await run('list', async () => {
    const tasks = [];
    let cursor;
    do {
      const page = await session.listTasks(cursor);
      tasks.push(...page.tasks.map((t) => ({ taskId: t.taskId, status: t.status })));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return { tasks };
  });
  await run('unknown', async () => ({
    snapshot: await errorFrom(() => session.task('no-such-task').snapshot()),
    cancel: await errorFrom(() => session.cancelTask('no-such-task')),
    resume: await errorFrom(() => session.resumeTask({
      endpointId: session.endpointId,
      generation: form,
      taskId: 'no-such-task',
      originalOperation: 'tools/call',
    })),
  }));
  out.asked = asked;
  await close();
  await run('resume', async () => {
    // Persisted by one client, resumed by a fresh one (a new Client, a new session).
    const first = await open(form, url, token, []);
    const execution = await first.session.callTool('slow_compute', { seconds: 1, label: 'resumed' }, REQUIRE);
    let stored = null;
    await execution.handoff((reference) => {
      stored = JSON.stringify(reference);
    });
    await first.close();
    const fresh = await open(form, url, token, []);
    try {
      const resumed = await fresh.session.resumeTask(JSON.parse(stored));
      const { outcome } = await resumed.settle();
      return {
        reference: JSON.parse(stored),
        status: outcome.status,
        text: outcome.status === 'completed' ? textOf(outcome.result) : null,
      };
    } catch (e) {
      return { reference: JSON.parse(stored), error: errorOf(e) };
    } finally {
      await fresh.close();
    }
  });
  return out;
}

// Its ./receiver on a Client over stdio: the server is the requestor of client tasks.
async function receiver(command, args) {
  const out = { received: [] };
  const client = new Client(CLIENT_INFO, { capabilities: { sampling: {}, elicitation: { form: {} } } });
  const binding = bindTaskReceiver(client, {
    methods: { 'sampling/createMessage': true, 'elicitation/create': true },
    sampling: async (request, context) => {
      out.received.push({ method: request.method, taskId: context.taskId });
      return { model: 'interop', role: 'assistant', content: { type: 'text', text: 'hi from ext-tasks' } };
    },
    elicitation: async (request, context) => {
      out.received.push({ method: request.method, taskId: context.taskId });
      return { action: 'accept', content: { name: 'Ada' } };
    },
  });
  client.registerCapabilities({ tasks: binding.capabilities });
  out.declared = binding.capabilities;
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
  await client.connect(transport);
  try {
    for (const kind of ['sampling', 'elicitation']) {
      const result = await client.callTool({ name: 'ask_client', arguments: { kind } });
      out[kind] = JSON.parse(textOf(result));
    }
  } finally {
    binding.close();
    await client.close();
  }
  return out;
}

let code = 0;
let out = {};
try {
  const [mode, ...rest] = process.argv.slice(2);
  if (mode === 'receiver') out = await receiver(rest[0], rest.slice(1));
  else if (mode === 'v1' && rest[0] === 'stdio') out = await scenarios(mode, rest, undefined);
  else if (mode === 'v1' || mode === 'v2') out = await scenarios(mode, rest[0], rest[1]);
  else throw new Error(`unknown mode ${mode}`);
} catch (e) {
  out.fatal = { ...errorOf(e), stack: e?.stack ?? null };
  code = 1;
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(code);
