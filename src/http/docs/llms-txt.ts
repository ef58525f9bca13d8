/** GET /llms.txt: how an agent holding a wallet key gets from nothing to a chat completion. */
export function llmsTxt(publicUrl: string): string {
  const base = publicUrl.replace(/\/$/, '');
  return `# Tollgate

> An OpenAI-compatible LLM gateway paid from a prepaid wallet balance. Fund it with stablecoins over
> x402, get an API key by signing in with Ethereum (SIWE), then use any OpenAI client with base URL
> ${base}/v1. Money is integer micro-USDC (1 USD = 1,000,000).

## Steps

1. Models and prices (USD per 1M tokens, cached parts at their own prices): GET ${base}/v1/models,
   or one: GET ${base}/v1/models/<id> (openai/gpt-4o-mini, or a bare name one provider alone offers).
2. Top up: POST ${base}/v1/topup with {"amount": <USD, at least 1>}. The 402 answer lists "accepts"
   (also base64 in the PAYMENT-REQUIRED header, always x402 v2; the body is x402 v1 where the operator turned that on for v1 clients). Sign one entry with an x402 client
   (@x402/fetch + @x402/evm; raise its spend controls above $1) and send the same body again with
   the PAYMENT-SIGNATURE header. 200 means credited; 202 means pending: do not pay again.
3. API key: POST ${base}/v1/auth/keys with {"message", "signature"}: a fresh EIP-4361 (SIWE)
   message for this gateway, signed by the wallet; GET ${base}/v1/auth/siwe gives the domain, uri
   and chain ids, and "statements" the statement of each action: sign "create-key" here. Use a
   new nonce every time. The key (sk-...) is shown once.
   Optional limits for a key you hand to a program: "spend_limit_usdc" (micro-USDC) with
   "spend_limit_period" (total, day or month, UTC), "models" (ids it may use), "expires_at"
   (ISO 8601). Change them with PATCH ${base}/v1/auth/keys/<id> (a "loosen-key" proof; null removes one).
4. Chat: POST ${base}/v1/chat/completions with "Authorization: Bearer sk-...", the OpenAI body,
   stream or not. Each call reserves the worst case, then charges the exact cost.
   Embeddings: POST ${base}/v1/embeddings.
   Also billed the same way: POST ${base}/v1/responses (OpenAI's Responses API; with a key, a
   response is stored for 30 days unless "store": false, so previous_response_id, item_reference
   and GET/DELETE ${base}/v1/responses/<id> work; built-in tools are refused), and POST
   ${base}/v1/messages (Anthropic's Messages API, key in x-api-key or Bearer; Anthropic SDKs and
   Claude Code take base URL ${base}; its errors are Anthropic's {"type":"error","error":{...}}).
5. Balance and usage: GET ${base}/v1/usage/<wallet> with the same bearer key.
   Top-up history: GET ${base}/v1/topups/<wallet>. Per day and key: GET ${base}/v1/usage/<wallet>/daily?days=30.
6. Sessions (optional): POST ${base}/v1/auth/session with a "sign-in" proof returns a token
   (ses-...) for usage, top-ups, listing, revoking and tightening keys for 30 minutes; it never
   calls chat, creates or loosens a key. DELETE ${base}/v1/auth/session ends it. A person with a browser wallet: ${base}/

## Pay per request (if the operator enabled it)

No key, no top-up: POST ${base}/v1/chat/completions without an Authorization header gets a 402 x402
offer for the request's worst-case cost; send it again with PAYMENT-SIGNATURE (@x402/fetch as the
openai SDK's fetch, with the SDK's Authorization header removed, does both). The payment is credited
to your wallet once, the request runs against it, and the rest stays in your balance.

## Errors

Every error is {"error": "<CODE>", "message": "..."}, unless the operator set errors.format: openai:
then chat, responses and models answer {"error": {"message", "type", "code": "<CODE>", "param"}} as OpenAI
does. 402 INSUFFICIENT_BALANCE on chat means top up; 402 KEY_LIMIT_EXCEEDED means this key's spend
limit is reached until resets_at; 403 MODEL_NOT_ALLOWED names the models the key may use; 401 on an
expired key says so. 429 RATE_LIMITED carries Retry-After. The full description: ${base}/openapi.json
`;
}
