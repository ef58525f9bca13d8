import { CountableContent, readBlocks } from './countable-blocks.ts';

type Json = Record<string, any>;

/** A native Messages request as the gateway's counts read it (estimateBody), with its images and files counted apart. */
export interface CountedBody {
  body: Json;
  images: number;
  files: number;
}

/**
 * A native Messages request in the internal form, as far as the usage estimate and count_tokens
 * read it: each turn's countable text (every block type, countable-blocks.ts) as one message, the
 * system prompt as another, tools and tool_choice as JSON. Images and files are left out of the
 * text and counted, so the caller can add their declared bounds.
 */
export function countedBody(b: Json): CountedBody {
  const messages: Json[] = [];
  let images = 0;
  let files = 0;
  const add = (role: unknown, content: unknown, path: string) => {
    const read = new CountableContent();
    readBlocks(content, path, read);
    messages.push({ role, content: read.joined() });
    images += read.images;
    files += read.files;
  };
  if (b.system !== undefined && b.system !== null) add('system', b.system, 'system');
  (b.messages as Json[]).forEach((m, i) => add(m.role, m.content, `messages[${i}].content`));
  const body: Json = { model: b.model, messages };
  if (b.tools !== undefined) body.tools = b.tools;
  if (b.tool_choice !== undefined) body.tool_choice = b.tool_choice;
  return { body, images, files };
}

/** countedBody's internal form alone: the body the usage estimate of a native request reads. */
export const estimateBody = (b: Json): Json => countedBody(b).body;
