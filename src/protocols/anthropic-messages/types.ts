/**
 * The parts of Anthropic's Messages API wire format that the translators read and write
 * (https://docs.anthropic.com/en/api/messages). Fields Tollgate never touches stay open-ended
 * (`[key: string]: unknown`) so a newer API version's additions pass through untouched.
 */

export interface TextBlock {
  type: 'text';
  text: string;
  cache_control?: unknown;
  [key: string]: unknown;
}
export interface ImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
}
export interface DocumentBlock {
  type: 'document';
  source: { type: 'base64'; media_type: string; data: string };
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string | TextBlock[];
}
export interface ThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}
export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

export type ContentBlock = TextBlock | ImageBlock | DocumentBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock;

export interface AnthropicMessage {
  role: 'user' | 'assistant';
  content: ContentBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: unknown;
}

export type AnthropicToolChoice =
  | { type: 'auto' | 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' };

export interface AnthropicRequest {
  model: string;
  max_tokens: number;
  messages: AnthropicMessage[];
  system?: TextBlock[];
  stop_sequences?: string[];
  temperature?: number;
  top_p?: number;
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  thinking?: unknown;
  metadata?: { user_id: string };
  stream?: boolean;
  [extension: string]: unknown;
}

/** Token counts as Anthropic reports them: `input_tokens` excludes both cache terms. */
export interface AnthropicUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  [key: string]: unknown;
}

export interface AnthropicResponse {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ContentBlock[];
  stop_reason: string | null;
  stop_sequence: string | null;
  usage?: AnthropicUsage;
}

/** `{"type":"error","error":{"type","message"}}`: the body of every error status and of a stream's `error` event. */
export interface AnthropicError {
  type: 'error';
  error: { type: string; message: string };
}
