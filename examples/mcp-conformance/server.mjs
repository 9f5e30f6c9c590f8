// An MCP server (stdio) with the fixtures the official conformance suite
// (@modelcontextprotocol/conformance, `conformance server`) calls: tools,
// prompts, resources, completion, logging, progress, sampling and
// elicitation. capsule runs it sandboxed as a capability
// (capability.json: x-capsule.mcp_server) and `capsule serve --capability
// conformance --mcp-http ...` fronts it, so what the suite checks travels
// through capsule's relay. Written for capsule from the suite's scenario
// descriptions; only the official SDK's low-level Server is used.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  McpError,
  ErrorCode
} from '@modelcontextprotocol/sdk/types.js';

// a 1x1 red PNG and a 1-sample WAV, made here rather than shipped
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
function wav() {
  const b = Buffer.alloc(46);
  b.write('RIFF', 0);
  b.writeUInt32LE(38, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(16000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(2, 40);
  return b.toString('base64');
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const none = { type: 'object', properties: {} };

const server = new Server(
  { name: 'capsule-conformance-fixtures', version: '0.1.0' },
  {
    capabilities: {
      tools: {},
      prompts: {},
      resources: { subscribe: true },
      logging: {},
      completions: {}
    }
  }
);

const tools = [
  { name: 'test_simple_text', description: 'Returns simple text', inputSchema: none },
  { name: 'test_image_content', description: 'Returns a PNG image', inputSchema: none },
  { name: 'test_audio_content', description: 'Returns a WAV sound', inputSchema: none },
  { name: 'test_embedded_resource', description: 'Returns an embedded resource', inputSchema: none },
  { name: 'test_multiple_content_types', description: 'Returns text, an image and a resource', inputSchema: none },
  { name: 'test_tool_with_logging', description: 'Logs three messages while it runs', inputSchema: none },
  { name: 'test_error_handling', description: 'Always fails', inputSchema: none },
  { name: 'test_tool_with_progress', description: 'Reports progress 0, 50, 100 of 100', inputSchema: none },
  {
    name: 'test_sampling',
    description: 'Asks the client for an LLM completion of a prompt',
    inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] }
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user for a name and an e-mail address',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }
  },
  { name: 'test_elicitation_sep1034_defaults', description: 'Elicits with a default for every primitive type', inputSchema: none },
  { name: 'test_elicitation_sep1330_enums', description: 'Elicits with every enum form', inputSchema: none },
  // not the suite's: what shows capsule keeping this server warm (tests/mcp/relay.mjs)
  { name: 'served_calls', description: 'How many tool calls this server process has served', inputSchema: none },
  { name: 'exit_server', description: 'Ends this server process without answering', inputSchema: none },
  { name: 'flood_logs', description: 'Sends 6,000 log messages of 1 KiB, then answers', inputSchema: none }
];

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));

async function elicitDefaults() {
  return server.elicitInput({
    message: 'Please review the defaults',
    requestedSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', default: 'John Doe' },
        age: { type: 'integer', default: 30 },
        score: { type: 'number', default: 95.5 },
        status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', default: true }
      }
    }
  });
}

async function elicitEnums() {
  return server.elicitInput({
    message: 'Please choose',
    requestedSchema: {
      type: 'object',
      properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          oneOf: [
            { const: 'value1', title: 'First Option' },
            { const: 'value2', title: 'Second Option' },
            { const: 'value3', title: 'Third Option' }
          ]
        },
        legacyEnum: {
          type: 'string',
          enum: ['opt1', 'opt2', 'opt3'],
          enumNames: ['Option One', 'Option Two', 'Option Three']
        },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: {
          type: 'array',
          items: {
            anyOf: [
              { const: 'value1', title: 'First Choice' },
              { const: 'value2', title: 'Second Choice' },
              { const: 'value3', title: 'Third Choice' }
            ]
          }
        }
      }
    }
  });
}

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const handlers = {
  test_simple_text: async () => text('This is a simple text response for testing.'),
  test_image_content: async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }),
  test_audio_content: async () => ({ content: [{ type: 'audio', data: wav(), mimeType: 'audio/wav' }] }),
  test_embedded_resource: async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
      }
    ]
  }),
  test_multiple_content_types: async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' }
      }
    ]
  }),
  test_tool_with_logging: async () => {
    await server.sendLoggingMessage({ level: 'info', data: 'Tool execution started' });
    await sleep(50);
    await server.sendLoggingMessage({ level: 'info', data: 'Tool processing data' });
    await sleep(50);
    await server.sendLoggingMessage({ level: 'info', data: 'Tool execution completed' });
    return text('Tool with logging executed successfully');
  },
  test_error_handling: async () => ({
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }]
  }),
  test_tool_with_progress: async (_args, extra) => {
    const token = extra._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined)
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total: 100 }
        });
      // after the last one too: the SDK's client runs a notification's handler a microtask
      // later, and its answer's (in the same read) drops the call's progress handler first
      await sleep(50);
    }
    return text('Tool with progress executed successfully');
  },
  test_sampling: async (args) => {
    const r = await server.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }],
      maxTokens: 100
    });
    return text(`LLM response: ${r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content)}`);
  },
  test_elicitation: async (args) => {
    const r = await server.elicitInput({
      message: String(args.message),
      requestedSchema: {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" }
        },
        required: ['username', 'email']
      }
    });
    return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  },
  test_elicitation_sep1034_defaults: async () => {
    const r = await elicitDefaults();
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  },
  test_elicitation_sep1330_enums: async () => {
    const r = await elicitEnums();
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  }
};

let calls = 0;
const started = Date.now() + Math.random();
handlers.served_calls = async () => {
  const r = { calls, instance: String(started) };
  return { content: [{ type: 'text', text: JSON.stringify(r) }], structuredContent: r };
};
handlers.exit_server = async () => process.exit(3);
handlers.flood_logs = async () => {
  const kib = 'x'.repeat(1024);
  for (let i = 0; i < 6000; i++) server.sendLoggingMessage({ level: 'info', data: kib });
  return { content: [{ type: 'text', text: 'flooded' }] };
};

server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
  calls++;
  const h = handlers[req.params.name];
  if (!h) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
  return h(req.params.arguments ?? {}, extra);
});

const prompts = [
  { name: 'test_simple_prompt', description: 'A prompt without arguments' },
  {
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true }
    ]
  },
  {
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt embedding a resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }]
  },
  { name: 'test_prompt_with_image', description: 'A prompt with an image' },
  // the suite has none asking the client: capsule's own, for a server's
  // requests during prompts/get (tests/mcp/relay26.mjs)
  {
    name: 'test_prompt_with_sampling',
    description: "A prompt the client's model writes (sampling/createMessage while getting it)",
    arguments: [{ name: 'topic', description: 'What the model is asked about', required: true }]
  }
];
// `--page-size N` (capsule's tests): lists in pages of N, nextCursor the next one's offset
const pageAt = process.argv.indexOf('--page-size');
const pageSize = pageAt > 0 ? Number(process.argv[pageAt + 1]) : 0;
function page(key, items, req) {
  if (!pageSize) return { [key]: items };
  const from = Number(req.params?.cursor ?? 0);
  if (!Number.isInteger(from) || from < 0 || from > items.length) throw new McpError(ErrorCode.InvalidParams, 'Invalid cursor');
  const out = { [key]: items.slice(from, from + pageSize) };
  if (from + pageSize < items.length) out.nextCursor = String(from + pageSize);
  return out;
}
server.setRequestHandler(ListPromptsRequestSchema, async (req) => page('prompts', prompts, req));
server.setRequestHandler(GetPromptRequestSchema, async (req) => {
  const a = req.params.arguments ?? {};
  const user = (content) => ({ role: 'user', content });
  switch (req.params.name) {
    case 'test_simple_prompt':
      return { messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] };
    case 'test_prompt_with_arguments':
      return { messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` })] };
    case 'test_prompt_with_embedded_resource':
      return {
        messages: [
          user({ type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
          user({ type: 'text', text: 'Please process the embedded resource above.' })
        ]
      };
    case 'test_prompt_with_sampling': {
      const r = await server.createMessage({
        messages: [user({ type: 'text', text: `Write a prompt about ${a.topic}` })],
        maxTokens: 100
      });
      const said = r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content);
      return { messages: [user({ type: 'text', text: `Sampled prompt: ${said}` })] };
    }
    case 'test_prompt_with_image':
      return {
        messages: [
          user({ type: 'image', data: PNG, mimeType: 'image/png' }),
          user({ type: 'text', text: 'Please analyze the image above.' })
        ]
      };
  }
  throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${req.params.name}`);
});

server.setRequestHandler(CompleteRequestSchema, async (req) => {
  if (req.params.ref?.type === 'ref/prompt' && req.params.ref.name === 'test_prompt_with_sampling') {
    // the client's model completes the topic (capsule's own, as the prompt)
    const r = await server.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: `Complete the topic ${req.params.argument?.value ?? ''}` } }],
      maxTokens: 100
    });
    const value = r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content);
    return { completion: { values: [value], total: 1, hasMore: false } };
  }
  const values = ['paris', 'park', 'party'].filter((v) => v.startsWith(req.params.argument?.value ?? ''));
  return { completion: { values, total: values.length, hasMore: false } };
});

const resources = [
  { uri: 'test://static-text', name: 'static-text', description: 'A text resource', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A PNG resource', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource to subscribe to', mimeType: 'text/plain' },
  // capsule's own, as test_prompt_with_sampling: elicitation/create while it is read
  { uri: 'test://elicited-resource', name: 'elicited-resource', description: 'A resource whose text the user gives', mimeType: 'text/plain' }
];
server.setRequestHandler(ListResourcesRequestSchema, async (req) => page('resources', resources, req));
const templates = [
  { uriTemplate: 'test://template/{id}/data', name: 'template', description: 'Data by id', mimeType: 'application/json' }
];
server.setRequestHandler(ListResourceTemplatesRequestSchema, async (req) => page('resourceTemplates', templates, req));
server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
  const uri = req.params.uri;
  if (uri === 'test://static-text')
    return { contents: [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] };
  if (uri === 'test://static-binary') return { contents: [{ uri, mimeType: 'image/png', blob: PNG }] };
  if (uri === 'test://watched-resource')
    return { contents: [{ uri, mimeType: 'text/plain', text: 'Watched resource content.' }] };
  if (uri === 'test://elicited-resource') {
    const r = await server.elicitInput({
      message: 'Which greeting should the resource hold?',
      requestedSchema: { type: 'object', properties: { greeting: { type: 'string' } }, required: ['greeting'] }
    });
    const text = r.action === 'accept' ? String(r.content?.greeting) : `(${r.action})`;
    return { contents: [{ uri, mimeType: 'text/plain', text: `Elicited resource: ${text}` }] };
  }
  const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (m)
    return {
      contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id: m[1], templateTest: true, data: `Data for ID: ${m[1]}` }) }]
    };
  throw new McpError(-32002, `Resource not found: ${uri}`);
});
const subscribed = new Set();
server.setRequestHandler(SubscribeRequestSchema, async (req) => {
  subscribed.add(req.params.uri);
  return {};
});
server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
  subscribed.delete(req.params.uri);
  return {};
});

await server.connect(new StdioServerTransport());
