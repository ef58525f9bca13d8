import { badRequest } from '../../refusal.ts';
import { DROPPED_ITEM_TYPES } from './dropped.ts';

/**
 * The `input` (and `instructions`) of an OpenAI Responses request as chat-completions messages.
 * Everything the client sends becomes a message the provider reads, so the prompt bound (taken on
 * the encoded upstream body) counts all of it; what cannot be translated is a 400 naming the item,
 * never passed along unmeasured. Reasoning items (encrypted for the Responses provider that made
 * them) are left out, unsent and unbilled (dropped.ts).
 */

type Message = Record<string, unknown> & { role: string };

/**
 * Why a reference to a stored response cannot be followed here. A keyed request's references are
 * resolved before decoding (src/stored-responses/resolve.ts); one that reaches the decoder came
 * with no API key (pay-per-request) or to a gateway that stores nothing.
 */
export const NO_STORE =
  'stored responses are kept only for requests made with an API key on a gateway with responses.store enabled (a pay-per-request payment keeps nothing)';

/** The chat message list for `instructions` (a system message first) and `input`. */
export function inputMessages(input: unknown, instructions: unknown): Message[] {
  const messages: Message[] = [];
  if (instructions !== undefined && instructions !== null) {
    if (typeof instructions !== 'string') throw badRequest('instructions must be a string (the system prompt)', { param: 'instructions' });
    if (instructions !== '') messages.push({ role: 'system', content: instructions });
  }
  if (typeof input === 'string') {
    messages.push({ role: 'user', content: input });
  } else if (Array.isArray(input)) {
    const images: Record<string, unknown>[] = [];
    input.forEach((item, i) => addItem(messages, item, `input[${i}]`, images));
    flushToolImages(messages, images);
  } else {
    throw badRequest('input must be a string or an array of input items (messages, function_call and function_call_output items)', { param: 'input' });
  }
  if (!messages.some((m) => m.role !== 'system')) throw badRequest('input must contain at least one message', { param: 'input' });
  return messages;
}

/**
 * `toolImages`: the image and file parts of the function_call_outputs just read (Codex's view_image
 * answers with an input_image), which chat's tool messages cannot carry: they go in one user message
 * once the run of tool messages ends, as a user message between them would break the tool turn.
 */
function addItem(messages: Message[], item: unknown, where: string, toolImages: Record<string, unknown>[]): void {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    throw badRequest(`${where} must be an object such as {"role": "user", "content": "…"}`, { param: where });
  const it = item as Record<string, unknown>;
  // A message may leave out its type (EasyInputMessage); every other item names one.
  const type = it.type ?? (it.role !== undefined ? 'message' : undefined);
  if (typeof type === 'string' && DROPPED_ITEM_TYPES.has(type)) return;
  if (type !== 'function_call_output') flushToolImages(messages, toolImages);
  if (type === 'message') {
    messages.push(messageOf(it, where));
  } else if (type === 'function_call') {
    const call = {
      id: stringField(it, 'call_id', where),
      type: 'function',
      function: { name: stringField(it, 'name', where), arguments: stringField(it, 'arguments', where) },
    };
    // Chat carries the calls of one turn on the assistant message that precedes them.
    const last = messages.at(-1);
    if (last?.role === 'assistant') last.tool_calls = [...((last.tool_calls as unknown[] | undefined) ?? []), call];
    else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
  } else if (type === 'function_call_output') {
    messages.push({ role: 'tool', tool_call_id: stringField(it, 'call_id', where), content: toolOutput(it.output, `${where}.output`, toolImages) });
  } else if (type === 'item_reference') {
    throw badRequest(
      `${where} is an item_reference, but ${NO_STORE}: send the item itself (with the Vercel AI SDK, set providerOptions.openai.store to false)`,
      { param: where },
    );
  } else {
    const named = typeof type === 'string' ? `a ${JSON.stringify(type.slice(0, 50))} item` : 'an item without a type';
    throw badRequest(`${where} is ${named}, which this gateway does not accept; send messages, function_call and function_call_output items`, { param: where });
  }
}

const ROLES: Record<string, string> = { user: 'user', assistant: 'assistant', system: 'system', developer: 'system' };

function messageOf(it: Record<string, unknown>, where: string): Message {
  const role = typeof it.role === 'string' && Object.hasOwn(ROLES, it.role) ? ROLES[it.role]! : undefined;
  if (!role) throw badRequest(`${where}.role must be one of user, assistant, system, developer`, { param: `${where}.role` });
  const content = it.content;
  if (typeof content === 'string') return { role, content };
  if (!Array.isArray(content)) throw badRequest(`${where}.content must be a string or an array of content parts`, { param: `${where}.content` });
  const parts = content.map((p, j) => partOf(p, `${where}.content[${j}]`));
  // An assistant turn is text in chat (output_text and refusal parts, as the model wrote them).
  if (role === 'assistant') {
    const nonText = parts.findIndex((p) => p.type !== 'text');
    if (nonText >= 0)
      throw badRequest(`${where}.content[${nonText}]: an assistant message carries output_text parts only`, { param: `${where}.content[${nonText}]` });
    return { role, content: parts.map((p) => p.text).join('') };
  }
  return { role, content: parts };
}

/** One content part in chat's form; a part that points at OpenAI's stored files is refused. */
function partOf(part: unknown, where: string): Record<string, unknown> {
  const p = (typeof part === 'object' && part !== null ? part : {}) as Record<string, unknown>;
  switch (p.type) {
    case 'input_text':
    case 'output_text':
      return { type: 'text', text: stringField(p, 'text', where) };
    case 'refusal':
      return { type: 'text', text: stringField(p, 'refusal', where) };
    case 'input_image':
      if (p.file_id !== undefined && p.file_id !== null) throw storedFile(where);
      return { type: 'image_url', image_url: { url: stringField(p, 'image_url', where), ...(typeof p.detail === 'string' ? { detail: p.detail } : {}) } };
    case 'input_file':
      if ((p.file_id ?? p.file_url ?? null) !== null) throw storedFile(where);
      return { type: 'file', file: { file_data: stringField(p, 'file_data', where), ...(typeof p.filename === 'string' ? { filename: p.filename } : {}) } };
    case 'input_audio':
      return { type: 'input_audio', input_audio: p.input_audio };
    default: {
      const named = typeof p.type === 'string' ? `a ${JSON.stringify(p.type.slice(0, 50))} part` : 'a part without a type';
      throw badRequest(`${where} is ${named}; send input_text, input_image (image_url), input_file (file_data) or input_audio parts`, { param: where });
    }
  }
}

const storedFile = (where: string) =>
  badRequest(
    `${where} refers to a file stored by id or URL, which this gateway cannot fetch or price; send the data itself (image_url as a URL or data: URL, file_data as a data: URL)`,
    { param: where },
  );

/**
 * A tool's output: a string, or its text parts (chat's tool messages carry text only); its image and
 * file parts are added to `toolImages`, for the user message that follows the tool messages.
 */
function toolOutput(output: unknown, where: string, toolImages: Record<string, unknown>[]): unknown {
  if (typeof output === 'string') return output;
  if (!Array.isArray(output)) throw badRequest(`${where} must be a string or an array of content parts`, { param: where });
  const text: Record<string, unknown>[] = [];
  output.forEach((p, j) => {
    const part = partOf(p, `${where}[${j}]`);
    if (part.type === 'text') text.push(part);
    else toolImages.push(part);
  });
  return text.length || !output.length ? text : '';
}

/** The parts kept by toolOutput, as the user message after the tool messages (none: nothing). */
function flushToolImages(messages: Message[], toolImages: Record<string, unknown>[]): void {
  if (!toolImages.length) return;
  messages.push({ role: 'user', content: toolImages.splice(0) });
}

function stringField(o: Record<string, unknown>, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== 'string') throw badRequest(`${where}.${field} must be a string`, { param: `${where}.${field}` });
  return v;
}
