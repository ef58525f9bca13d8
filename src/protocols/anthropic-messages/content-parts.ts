import type { ContentBlock, TextBlock } from './types.ts';
import { refuse, type Translated } from '../translated.ts';
import { cacheTtlProblem } from './cache-control.ts';

/** The image types Anthropic's vision models accept; anything else would be a provider 400. */
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
const DATA_URL = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+);base64,(.*)$/is;

/**
 * One OpenAI content part as an Anthropic content block. Text keeps an Anthropic `cache_control`
 * marker when a client sent one (LiteLLM's convention for prompt caching through the OpenAI form),
 * at the 5-minute rate only (cacheTtlProblem).
 */
export function contentPart(part: unknown, field: string): Translated<ContentBlock | null> {
  const p = (part ?? {}) as Record<string, any>;
  switch (p.type) {
    case 'text':
    case 'refusal': {
      const text = p.type === 'text' ? p.text : p.refusal;
      if (typeof text !== 'string') return refuse(field, `${field}.${p.type} must be a string`);
      const ttl = cacheTtlProblem(p, field);
      if (ttl) return refuse(`${field}.cache_control`, ttl);
      return { ok: true, value: textBlock(text, p.cache_control) };
    }
    case 'image_url':
      return image(p.image_url, field);
    case 'file':
      return pdf(p.file, field);
    case 'input_audio':
      return refuse(field, `${field} is audio; Anthropic models do not accept audio input`);
    default:
      return refuse(field, `${field} has type ${JSON.stringify(p.type)}; this model accepts text, image_url and PDF file parts`);
  }
}

/** Anthropic refuses text blocks without a visible character, so they are left out (null). */
function textBlock(text: string, cacheControl: unknown): TextBlock | null {
  if (!/\S/.test(text)) return null;
  return cacheControl === undefined ? { type: 'text', text } : { type: 'text', text, cache_control: cacheControl };
}

function image(imageUrl: unknown, field: string): Translated<ContentBlock> {
  const url = typeof imageUrl === 'string' ? imageUrl : (imageUrl as { url?: unknown } | null)?.url;
  if (typeof url !== 'string') return refuse(field, `${field}.image_url.url must be a string`);
  const data = DATA_URL.exec(url);
  if (data) {
    const mediaType = data[1]!.toLowerCase();
    if (!IMAGE_TYPES.has(mediaType)) return refuse(field, `${field} is ${mediaType}; Anthropic accepts image/jpeg, image/png, image/gif and image/webp`);
    return { ok: true, value: { type: 'image', source: { type: 'base64', media_type: mediaType, data: data[2]! } } };
  }
  if (/^https?:\/\//i.test(url)) return { ok: true, value: { type: 'image', source: { type: 'url', url } } };
  return refuse(field, `${field}.image_url.url must be an http(s) URL or a base64 data: URL`);
}

/** OpenAI's `file` part carries a PDF as a data URL in `file_data`; Anthropic calls it a document. */
function pdf(file: unknown, field: string): Translated<ContentBlock> {
  const fileData = (file as { file_data?: unknown } | null)?.file_data;
  const data = typeof fileData === 'string' ? DATA_URL.exec(fileData) : null;
  if (!data || data[1]!.toLowerCase() !== 'application/pdf') {
    return refuse(field, `${field} must carry a PDF as file.file_data "data:application/pdf;base64,..."; uploaded file ids are not available on Anthropic`);
  }
  return { ok: true, value: { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: data[2]! } } };
}

/** A message's `content` (a string, null, or an array of parts) as blocks, empty text left out. */
export function contentBlocks(content: unknown, field: string): Translated<ContentBlock[]> {
  if (content === undefined || content === null) return { ok: true, value: [] };
  if (typeof content === 'string') {
    const block = textBlock(content, undefined);
    return { ok: true, value: block ? [block] : [] };
  }
  if (!Array.isArray(content)) return refuse(field, `${field} must be a string or an array of content parts`);
  const blocks: ContentBlock[] = [];
  for (const [i, part] of content.entries()) {
    const block = contentPart(part, `${field}[${i}]`);
    if (!block.ok) return block;
    if (block.value) blocks.push(block.value);
  }
  return { ok: true, value: blocks };
}
