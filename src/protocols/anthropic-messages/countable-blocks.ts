import { badRequest } from '../../refusal.ts';

type Json = Record<string, any>;

/**
 * What a Messages request's content puts into the prompt, as the gateway's counts read it: text to
 * tokenize, values whose JSON is tokenized (tool inputs, citations, blocks of a type the gateway
 * has no reader for), and images and files, which are counted at the model's declared bounds. Only
 * references are collected: reading a request costs no copy of its text.
 */
export class CountableContent {
  readonly texts: string[] = [];
  readonly values: unknown[] = [];
  images = 0;
  files = 0;

  /** The text and JSON collected, one line each: what the tokenizer counts. */
  joined(): string {
    return [...this.texts, ...this.values.map((v) => JSON.stringify(v) ?? '')].join('\n');
  }
}

/**
 * Deeper than this, a block inside blocks is counted as its JSON instead of read: the Messages API
 * nests three levels at most (a tool_result holding a document made of text blocks), and reading
 * by recursion must stay shallow whatever depth an operator allows JSON bodies.
 */
const MAX_NESTING = 4;

/**
 * Reads `content` (a string, or an array of content blocks) into `out`, every block type the
 * Messages API accepts: text (and its citations), image, document (title, context, and a text,
 * content-block, base64, URL or file source), search_result (source, title, text blocks),
 * thinking, redacted_thinking (its encrypted data, counted as text: the safe side), tool_use,
 * server_tool_use and mcp_tool_use (name and input), tool_result and mcp_tool_result (a string or
 * blocks). A block of any other type is counted as its whole JSON, so no text a client sends is
 * left out of a count. A string field the gateway reads that is not a string is a 400 naming it
 * (String() of `{"toString": 1}` throws).
 */
export function readBlocks(content: unknown, path: string, out: CountableContent, nesting = 0): void {
  if (content === undefined || content === null) return;
  if (typeof content === 'string') {
    out.texts.push(content);
    return;
  }
  if (!Array.isArray(content)) throw badRequest(`${path} must be a string or an array of content blocks`, { param: path });
  content.forEach((block, i) => readBlock(block, `${path}[${i}]`, out, nesting));
}

function readBlock(block: unknown, where: string, out: CountableContent, nesting: number): void {
  if (typeof block !== 'object' || block === null || Array.isArray(block) || typeof (block as Json).type !== 'string') {
    throw badRequest(`${where} must be a content block such as {"type": "text", "text": "…"}`, { param: where });
  }
  const b = block as Json;
  if (nesting > MAX_NESTING) {
    out.values.push(b);
    return;
  }
  switch (b.type) {
    case 'text':
      out.texts.push(stringAt(b, 'text', where));
      if (b.citations !== undefined && b.citations !== null) out.values.push(b.citations);
      return;
    case 'thinking':
      out.texts.push(stringAt(b, 'thinking', where));
      optionalStringAt(b, 'signature', where);
      return;
    case 'redacted_thinking':
      out.texts.push(stringAt(b, 'data', where));
      return;
    case 'tool_use':
    case 'server_tool_use':
    case 'mcp_tool_use':
      out.texts.push(stringAt(b, 'name', where));
      if (b.type === 'mcp_tool_use') out.texts.push(optionalStringAt(b, 'server_name', where));
      out.values.push(b.input ?? {});
      return;
    case 'tool_result':
    case 'mcp_tool_result':
      readBlocks(b.content, `${where}.content`, out, nesting + 1);
      return;
    case 'search_result':
      out.texts.push(stringAt(b, 'source', where), optionalStringAt(b, 'title', where));
      if (b.citations !== undefined && b.citations !== null) out.values.push(b.citations);
      readBlocks(b.content, `${where}.content`, out, nesting + 1);
      return;
    case 'image':
      source(b, where);
      out.images++;
      return;
    case 'document':
      readDocument(b, where, out, nesting);
      return;
    default:
      out.values.push(b);
  }
}

function readDocument(b: Json, where: string, out: CountableContent, nesting: number): void {
  out.texts.push(optionalStringAt(b, 'title', where), optionalStringAt(b, 'context', where));
  const s = source(b, where);
  if (s.type === 'text') out.texts.push(stringAt(s, 'data', `${where}.source`));
  else if (s.type === 'content') readBlocks(s.content, `${where}.source.content`, out, nesting + 1);
  else out.files++;
}

/** A block's `source`, its string fields checked (they are written into a data: URL when the request is translated). */
function source(b: Json, where: string): Json {
  const s = b.source;
  if (typeof s !== 'object' || s === null || Array.isArray(s))
    throw badRequest(`${where}.source must be an object such as {"type": "base64", "media_type": "…", "data": "…"}`, { param: `${where}.source` });
  for (const field of ['type', 'media_type', 'data', 'url', 'file_id']) optionalStringAt(s, field, `${where}.source`);
  return s;
}

function stringAt(o: Json, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== 'string') throw badRequest(`${where}.${field} must be a string`, { param: `${where}.${field}` });
  return v;
}

/** A field that may be left out; when present it must be a string. Absent reads as ''. */
function optionalStringAt(o: Json, field: string, where: string): string {
  const v = o[field];
  if (v === undefined || v === null) return '';
  return stringAt(o, field, where);
}
