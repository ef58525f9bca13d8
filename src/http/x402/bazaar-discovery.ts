import { declareDiscoveryExtension, type DiscoveryExtension } from '@x402/extensions/bazaar';
import type { Catalog } from '../../providers/catalog.ts';
import { MAX_DIMENSIONS, MAX_VECTOR_VALUES } from '../../embeddings/limits.ts';

/**
 * The x402 `bazaar` extension of a paid route's 402 (x402 spec `extensions/bazaar.md`): the method,
 * the JSON body's schema with an example, and the answer's shape, so a facilitator's discovery
 * service can list the gateway by what it does. The schema's `model` is an enum of the catalog's
 * ids and points at GET /v1/models, where each model's price is: the models and prices are
 * reachable from the listing. Only the fields an agent needs to make a first call are described;
 * the rest of each protocol (tools, images, …) is accepted as the protocol defines it.
 */

interface RouteShape {
  /** Properties of the body beside `model` and `max_tokens`-like bounds, as JSON Schema. */
  properties: Record<string, unknown>;
  required: string[];
  example: Record<string, unknown>;
  output: Record<string, unknown>;
}

const MESSAGE = {
  type: 'object',
  properties: { role: { type: 'string', enum: ['system', 'user', 'assistant'] }, content: { type: 'string' } },
  required: ['role', 'content'],
};
const STREAM = { type: 'boolean', description: 'true for server-sent events; the price is the same' };

/** One entry per inbound protocol path (src/protocols/index.ts); a route not listed gets the generic shape. */
const SHAPES: Record<string, RouteShape> = {
  '/v1/chat/completions': {
    properties: {
      messages: { type: 'array', items: MESSAGE, minItems: 1 },
      max_tokens: { type: 'integer', minimum: 1, description: 'the largest answer; the 402 price is the worst case this allows' },
      stream: STREAM,
      temperature: { type: 'number' },
    },
    required: ['model', 'messages'],
    example: { model: '', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 200 },
    output: {
      id: 'chatcmpl-…',
      object: 'chat.completion',
      model: '',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! How can I help?' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 },
    },
  },
  '/v1/responses': {
    properties: {
      input: { oneOf: [{ type: 'string' }, { type: 'array' }] },
      instructions: { type: 'string' },
      max_output_tokens: { type: 'integer', minimum: 1, description: 'the largest answer; the 402 price is the worst case this allows' },
      stream: STREAM,
    },
    required: ['model', 'input'],
    example: { model: '', input: 'Hello', max_output_tokens: 200 },
    output: {
      id: 'resp_…',
      object: 'response',
      status: 'completed',
      model: '',
      output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello! How can I help?' }] }],
      usage: { input_tokens: 9, output_tokens: 7, total_tokens: 16 },
    },
  },
  '/v1/messages': {
    properties: {
      messages: {
        type: 'array',
        items: { ...MESSAGE, properties: { ...MESSAGE.properties, role: { type: 'string', enum: ['user', 'assistant'] } } },
        minItems: 1,
      },
      system: { type: 'string' },
      max_tokens: { type: 'integer', minimum: 1, description: 'the largest answer; the 402 price is the worst case this allows' },
      stream: STREAM,
    },
    required: ['model', 'messages', 'max_tokens'],
    example: { model: '', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 200 },
    output: {
      id: 'msg_…',
      type: 'message',
      role: 'assistant',
      model: '',
      content: [{ type: 'text', text: 'Hello! How can I help?' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 9, output_tokens: 7 },
    },
  },
  '/v1/embeddings': {
    properties: {
      input: {
        oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: 2048 }],
        description: 'the text (or texts) to embed; the 402 price is the worst case their size allows',
      },
      encoding_format: { type: 'string', enum: ['float', 'base64'] },
      dimensions: { type: 'integer', minimum: 1, maximum: MAX_DIMENSIONS, description: `at most ${MAX_VECTOR_VALUES} numbers in all: inputs × dimensions` },
    },
    required: ['model', 'input'],
    example: { model: '', input: 'Hello', encoding_format: 'float' },
    output: {
      object: 'list',
      data: [{ object: 'embedding', index: 0, embedding: [0.0123, -0.0456] }],
      model: '',
      usage: { prompt_tokens: 1, total_tokens: 1 },
    },
  },
};

const GENERIC: RouteShape = { properties: {}, required: ['model'], example: { model: '' }, output: {} };

/** The `bazaar` entry for a paid POST route of this gateway. */
export function bazaarDiscovery(path: string, catalog: Catalog, publicUrl: string): DiscoveryExtension {
  const shape = SHAPES[path] ?? GENERIC;
  // Each route lists the models it serves: embedding models on /v1/embeddings, chat models elsewhere.
  const served = path === '/v1/embeddings' ? 'embedding' : 'chat';
  const ids = catalog.models.filter((m) => m.type === served).map((m) => m.id);
  const model = {
    type: 'string',
    enum: ids,
    description: `a model id; GET ${publicUrl.replace(/\/$/, '')}/v1/models lists each with its prices per million tokens and its limits`,
  };
  const withModel = <T extends Record<string, unknown>>(o: T) => ('model' in o ? { ...o, model: ids[0] ?? '' } : o);
  const declared = declareDiscoveryExtension({
    bodyType: 'json',
    input: withModel(shape.example),
    inputSchema: { type: 'object', properties: { model, ...shape.properties }, required: shape.required },
    output: { example: withModel(shape.output) },
  });
  const bazaar = declared.bazaar!;
  // The package's server extension fills the method in from the request; this gateway builds its
  // 402 itself, and every paid route is a POST.
  return { ...bazaar, info: { ...bazaar.info, input: { ...bazaar.info.input, method: 'POST' } } } as DiscoveryExtension;
}
