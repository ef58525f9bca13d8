/** GET /llms.txt: how an agent holding a wallet key gets from nothing to a chat completion. */
export function llmsTxt(publicUrl: string): string {
  const base = publicUrl.replace(/\/$/, '');
  return `# Tollgate

> An OpenAI-compatible LLM gateway paid from a prepaid wallet balance. Fund it with stablecoins over
> x402, get an API key by signing in with Ethereum (SIWE), then use any OpenAI client with base URL
> ${base}/v1. Money is integer micro-USDC (1 USD = 1,000,000).

## Steps

1. Models and prices: GET ${base}/v1/models (prices are USD per 1M tokens; cached prompt tokens
   bill at cachedPromptPricePer1M, cache writes and reads at cacheWritePricePer1M and
   cacheReadPricePer1M); one model:
   GET ${base}/v1/models/<id> (openai/gpt-4o-mini, or a bare name one provider alone offers).
2. Top up: POST ${base}/v1/topup with {"amount": <USD, at least 1>}. The 402 answer lists "accepts"
   (also base64 in the PAYMENT-REQUIRED header). Sign one entry with an x402 client
   (@x402/fetch + @x402/evm; raise its spend controls above $1) and send the same body again with
   the PAYMENT-SIGNATURE header. 200 means credited; 202 means pending: do not pay again.
3. API key: POST ${base}/v1/auth/keys with {"message", "signature"}: a fresh EIP-4361 (SIWE)
   message for this gateway, signed by the wallet; GET ${base}/v1/auth/siwe gives the domain, uri
   and chain ids it must carry. Use a new nonce every time. The key (sk-...) is shown once.
   Optional limits for a key you hand to a program: "spend_limit_usdc" (micro-USDC) with
   "spend_limit_period" (total, day or month, UTC), "models" (ids it may use), "expires_at"
   (ISO 8601). Change them with PATCH ${base}/v1/auth/keys/<id> (a fresh proof; null removes one).
4. Chat: POST ${base}/v1/chat/completions with "Authorization: Bearer sk-...", the OpenAI body,
   stream or not. Each call reserves the worst case, then charges the exact cost.
   OpenAI's Responses API works too: POST ${base}/v1/responses (input, instructions, function
   tools, max_output_tokens, stream), billed the same way. It is stateless: send the whole
   conversation each time (store: false); previous_response_id and built-in tools are refused.
   Anthropic's Messages API works too: POST ${base}/v1/messages with "x-api-key: sk-..." (or the
   Bearer header) and Anthropic's body (max_tokens required); Anthropic SDKs and Claude Code take
   base URL ${base} (ANTHROPIC_BASE_URL). Errors there are Anthropic's {"type":"error","error":{...}}.
5. Balance and usage: GET ${base}/v1/usage/<wallet> with the same bearer key.
   Top-up history: GET ${base}/v1/topups/<wallet>. Per day and key: GET ${base}/v1/usage/<wallet>/daily?days=30.
6. Sessions (optional): POST ${base}/v1/auth/session with {"message", "signature"} returns a token
   (ses-...) that replaces a proof for key management, usage and top-ups for 30 minutes; it never
   calls chat. DELETE ${base}/v1/auth/session ends it. A person with a browser wallet: ${base}/

## Pay per request (if the operator enabled it)

No key, no top-up: send POST ${base}/v1/chat/completions without an Authorization header. A valid
request is answered 402 with an x402 offer for its worst-case cost (rounded up to the gateway's
minimum, 0.01 USD by default); send the same request again with the PAYMENT-SIGNATURE header
(@x402/fetch does both steps; pass it as the fetch of the openai SDK and remove the SDK's
Authorization header). The payment is credited to your wallet once, the request runs billed against
it, and what it does not use stays in your balance for later calls or a key. The answer carries
PAYMENT-RESPONSE (the settlement receipt). An invalid request is a 400, never an offer.

## Errors

Every error is {"error": "<CODE>", "message": "..."}, unless the operator set errors.format: openai:
then chat, responses and models answer {"error": {"message", "type", "code": "<CODE>", "param"}} as OpenAI
does. 402 INSUFFICIENT_BALANCE on chat means top up; 402 KEY_LIMIT_EXCEEDED means this key's spend
limit is reached until resets_at; 403 MODEL_NOT_ALLOWED names the models the key may use; 401 on an
expired key says so. 429 RATE_LIMITED carries Retry-After. The full description: ${base}/openapi.json
`;
}
