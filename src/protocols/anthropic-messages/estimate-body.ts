type Json = Record<string, any>;

/**
 * A native Messages request in the internal form, as far as the usage estimate reads it (for a
 * provider that reported no usage): each turn's countable text (text, tool inputs and results,
 * thinking) as one message, the system prompt as another, tools and tool_choice as JSON. Images
 * and documents are left out: the estimate adds their declared bounds.
 */
export function estimateBody(b: Json): Json {
  const messages: Json[] = [];
  if (b.system !== undefined && b.system !== null) messages.push({ role: 'system', content: blocksText(b.system) });
  for (const m of b.messages as Json[]) messages.push({ role: m.role, content: blocksText(m.content) });
  const body: Json = { model: b.model, messages };
  if (b.tools !== undefined) body.tools = b.tools;
  if (b.tool_choice !== undefined) body.tool_choice = b.tool_choice;
  return body;
}

function blocksText(content: unknown, inToolResult = false): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((block: Json) => {
    switch (block?.type) {
      case 'text': return String(block.text ?? '');
      case 'thinking': return String(block.thinking ?? '');
      case 'tool_use': return `${block.name ?? ''}${JSON.stringify(block.input ?? {})}`;
      // One level only: a tool result holds text and images, never another tool result.
      case 'tool_result': return inToolResult ? '' : blocksText(block.content, true);
      case 'document': return block.source?.type === 'text' ? String(block.source.data ?? '') : '';
      default: return '';
    }
  }).join('\n');
}
