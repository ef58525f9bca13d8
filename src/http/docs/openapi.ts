/**
 * The OpenAPI 3.1 description served at GET /openapi.json. Written by hand, next to the routes it
 * describes; a test fails when the server registers a route this document does not list.
 */
const json = 'application/json';

const error = (description: string) => ({ description, content: { [json]: { schema: { $ref: '#/components/schemas/Error' } } } });
const anthropicError = (description: string) => ({ description, content: { [json]: { schema: { $ref: '#/components/schemas/AnthropicError' } } } });
const ok = (description: string, schema: object) => ({ description, content: { [json]: { schema } } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const walletParam = { name: 'wallet', in: 'path', required: true, schema: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' } };
const siweQuery = [
  { name: 'message', in: 'query', required: false, schema: { type: 'string' }, description: 'EIP-4361 message (instead of an API key)' },
  { name: 'signature', in: 'query', required: false, schema: { type: 'string' }, description: 'signature of the message' },
];
const integer = { type: 'integer' };
const keyLimitProperties = {
  spend_limit_usdc: { type: ['integer', 'null'], minimum: 1, description: 'most the key may spend per period, micro-USDC; null removes it' },
  spend_limit_period: { enum: ['total', 'day', 'month', null], description: 'UTC; default total' },
  models: { type: ['array', 'null'], items: { type: 'string' }, description: 'model ids the key may use (stored as full ids); null allows every model' },
  expires_at: { type: ['string', 'null'], format: 'date-time', description: 'ISO 8601, in the future; null never expires' },
};
const walletRead = { bearer: [] } as const;
const sessionAuth = { session: [] } as const;

export function openApiDocument(publicUrl: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tollgate',
      version: '1',
      description:
        'Prepaid, wallet-funded, OpenAI-compatible LLM gateway. Fund a wallet with x402 (POST /v1/topup), create an API key with SIWE (POST /v1/auth/keys), call POST /v1/chat/completions with any OpenAI client. Money is integer micro-USDC (1 USD = 1,000,000).',
    },
    servers: [{ url: publicUrl }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'an API key, sk-…' },
        session: {
          type: 'http',
          scheme: 'bearer',
          description:
            'a dashboard session, ses-… (POST /v1/auth/session): usage and top-up history, listing, revoking and tightening keys; never chat, creating or loosening a key (403)',
        },
        anthropicKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-api-key',
          description: 'an API key, sk-…, as Anthropic clients send it (POST /v1/messages only)',
        },
        x402: { type: 'apiKey', in: 'header', name: 'PAYMENT-SIGNATURE', description: 'x402 payment payload, base64 (v2; v1 clients send X-Payment)' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error', 'message'],
          description:
            'The default error shape. With errors.format: openai, the OpenAI-compatible endpoints (/v1/chat/completions, /v1/responses, /v1/embeddings, /v1/models, /v1/models/{model}) answer OpenAIError instead.',
          properties: {
            error: { type: 'string', description: 'stable code, e.g. VALIDATION_ERROR' },
            message: { type: 'string', description: 'what happened and what to do' },
          },
          additionalProperties: true,
        },
        OpenAIError: {
          type: 'object',
          required: ['error'],
          description:
            'errors.format: openai on the OpenAI-compatible endpoints. Extra fields (balance_usdc, required_usdc, candidates, retry_after_ms) appear both inside error and at the top level.',
          properties: {
            error: {
              type: 'object',
              required: ['message', 'type', 'code', 'param'],
              properties: {
                message: { type: 'string' },
                type: {
                  enum: [
                    'invalid_request_error',
                    'authentication_error',
                    'permission_error',
                    'insufficient_quota',
                    'not_found_error',
                    'rate_limit_error',
                    'api_error',
                    'server_error',
                  ],
                },
                code: { type: 'string', description: 'the same stable code as Error.error' },
                param: { type: ['string', 'null'], description: 'the request field at fault, when known' },
              },
              additionalProperties: true,
            },
          },
          additionalProperties: true,
        },
        AnthropicError: {
          type: 'object',
          required: ['type', 'error'],
          description:
            "Every error of POST /v1/messages, whatever errors.format says: Anthropic's shape, with the gateway's code and extras (balance_usdc, required_usdc, param, …) inside error.",
          properties: {
            type: { const: 'error' },
            error: {
              type: 'object',
              required: ['type', 'message', 'code'],
              properties: {
                type: {
                  enum: [
                    'invalid_request_error',
                    'authentication_error',
                    'billing_error',
                    'permission_error',
                    'not_found_error',
                    'request_too_large',
                    'rate_limit_error',
                    'api_error',
                    'timeout_error',
                    'overloaded_error',
                  ],
                },
                message: { type: 'string' },
                code: { type: 'string', description: 'the same stable code as Error.error' },
              },
              additionalProperties: true,
            },
          },
        },
        SiweProof: { type: 'object', required: ['message', 'signature'], properties: { message: { type: 'string' }, signature: { type: 'string' } } },
        Balance: {
          type: 'object',
          properties: { wallet: { type: 'string' }, balance_usdc: integer, locked_usdc: integer, available_usdc: integer },
        },
        PaymentRequirement: {
          type: 'object',
          required: ['scheme', 'network', 'amount', 'maxAmountRequired', 'asset', 'payTo', 'maxTimeoutSeconds', 'extra'],
          properties: {
            scheme: { const: 'exact' },
            network: { type: 'string', examples: ['eip155:8453'], description: 'CAIP-2; in an x402 v1 body (topup.x402v1Body) the v1 name, e.g. base-sepolia' },
            amount: { type: 'string' },
            resource: { type: 'string', description: 'x402 v1 body only: the URL of the endpoint paid for' },
            description: { type: 'string', description: 'x402 v1 body only' },
            mimeType: { type: 'string', description: 'x402 v1 body only' },
            maxAmountRequired: { type: 'string' },
            asset: { type: 'string' },
            payTo: { type: 'string' },
            maxTimeoutSeconds: integer,
            extra: {
              type: 'object',
              properties: { assetTransferMethod: { enum: ['eip3009', 'permit2'] }, name: { type: 'string' }, version: { type: 'string' }, decimals: integer },
            },
          },
        },
        PaymentRequired: {
          type: 'object',
          properties: {
            x402Version: { enum: [1, 2], description: '2; 1 when the operator set topup.x402v1Body (the PAYMENT-REQUIRED header is always 2)' },
            error: { type: 'string' },
            message: { type: 'string' },
            resource: { type: 'object' },
            accepts: { type: 'array', items: ref('PaymentRequirement') },
            reason: { type: 'string', description: 'why a payment was rejected (PAYMENT_REJECTED only)' },
          },
        },
        ApiKey: {
          type: 'object',
          properties: {
            id: integer,
            label: { type: 'string' },
            created_at: { type: 'string' },
            revoked_at: { type: ['string', 'null'] },
            last_used_at: { type: ['string', 'null'] },
            last4: { type: 'string' },
            ...keyLimitProperties,
            spend_usdc: { type: 'integer', description: "charged in the key's current period (all time without a limit)" },
            reserved_usdc: { type: 'integer', description: 'reserved by its requests in flight' },
            spend_resets_at: { type: ['string', 'null'], description: 'when the period count starts again at 0 (UTC)' },
          },
        },
        KeyLimits: { type: 'object', properties: keyLimitProperties },
      },
    },
    paths: {
      '/health': {
        get: { summary: 'liveness and database check', responses: { 200: ok('healthy', { type: 'object' }), 503: ok('degraded', { type: 'object' }) } },
      },
      '/v1/models': {
        get: {
          summary:
            'the model catalog with billed prices (USD per 1M tokens): prompt, completion, and the cached prompt parts (cachedPromptPricePer1M, cacheWritePricePer1M, cacheReadPricePer1M)',
          responses: { 200: ok('OpenAI-style list', { type: 'object' }) },
        },
      },
      '/v1/models/{model}': {
        get: {
          summary: "one model, as /v1/models lists it (the openai SDKs' models.retrieve)",
          parameters: [
            {
              name: 'model',
              in: 'path',
              required: true,
              schema: { type: 'string' },
              description: 'the full id (openai/gpt-4o-mini; the slash may be sent as is or as %2F) or a bare name one provider alone offers',
            },
          ],
          responses: {
            200: ok('an OpenAI model object plus name, provider, contextLength, maxOutputTokens and prices', { type: 'object' }),
            404: error('NOT_FOUND: unknown id, or a bare name several providers offer (candidates lists their ids)'),
          },
        },
      },
      '/v1/topup': {
        post: {
          summary: 'fund a wallet with x402 (two steps: 402 with accepts, then the same body with a payment header)',
          security: [{}, { x402: [] }],
          requestBody: {
            required: true,
            content: {
              [json]: {
                schema: {
                  type: 'object',
                  required: ['amount'],
                  properties: { amount: { type: 'number', minimum: 1, description: 'USD, at most 6 decimals' } },
                },
              },
            },
          },
          responses: {
            200: ok('settled and credited; PAYMENT-RESPONSE carries the receipt', {
              allOf: [ref('Balance'), { type: 'object', properties: { credited_usdc: integer, transaction: { type: 'string' }, network: { type: 'string' } } }],
            }),
            202: ok('sent, not yet confirmed; credited when it lands', {
              type: 'object',
              properties: { status: { const: 'pending' }, payment_id: { type: 'string' } },
            }),
            400: error('bad amount (VALIDATION_ERROR), undecodable payment (INVALID_PAYMENT), or payment not matching the offer (PAYMENT_MISMATCH)'),
            402: ok('PAYMENT_REQUIRED (no payment yet) or PAYMENT_REJECTED; the PAYMENT-REQUIRED header carries the same offer', ref('PaymentRequired')),
            429: error('RATE_LIMITED'),
            503: error('FACILITATOR_UNAVAILABLE or TOPUP_UNAVAILABLE'),
          },
        },
      },
      '/v1/channels/refund': {
        get: {
          summary:
            "x402 batch-settlement (payPerRequest.batchSettlement): a payer's cooperative refund of its channel's unspent escrow, " +
            'as the stock @x402/evm client asks for it (a GET for the 402, then the same GET with the refund payload)',
          security: [{}, { x402: [] }],
          responses: {
            200: ok('refunded on chain', {
              type: 'object',
              properties: { refunded_usdc: integer, channel_id: { type: 'string' }, transaction: { type: 'string' } },
            }),
            400: error('undecodable or malformed refund payload (INVALID_PAYMENT), or a payload for another channel or offer'),
            402: ok(
              'the refund offer, or a refund refused: a stale voucher (the channel state to sign against), the channel busy, nothing left to refund, or an amount above what is left',
              ref('PaymentRequired'),
            ),
            404: error('NOT_FOUND: this gateway offers no batch-settlement channels'),
            429: error('RATE_LIMITED'),
            503: error('FACILITATOR_UNAVAILABLE'),
          },
        },
      },
      '/v1/topups/{wallet}': {
        get: {
          summary: "a wallet's credited and pending top-ups",
          security: [walletRead, sessionAuth, {}],
          parameters: [walletParam, ...siweQuery],
          responses: { 200: ok('history, newest first', { type: 'object' }), 400: error('malformed wallet'), 401: error('UNAUTHORIZED') },
        },
      },
      '/v1/auth/siwe': {
        get: {
          summary:
            'what a SIWE proof must contain here: domain, uri, accepted chain ids, maximum age, and the statement of each action (a proof counts only for the action its statement names)',
          responses: {
            200: ok('SIWE parameters', {
              type: 'object',
              properties: {
                domain: { type: 'string' },
                uri: { type: 'string' },
                domains: { type: 'array' },
                uris: { type: 'array' },
                chain_ids: { type: 'array', items: integer },
                contract_wallet_chain_id: { type: ['integer', 'null'] },
                version: { const: '1' },
                max_age_seconds: integer,
                statements: { type: 'object', additionalProperties: { type: 'string' } },
              },
            }),
          },
        },
      },
      '/v1/auth/keys': {
        post: {
          summary:
            'create an API key with a SIWE proof signed for the create-key action (optionally redeem_code or ref_code, and limits: spend_limit_usdc, spend_limit_period, models, expires_at); never with a dashboard session (403) or an API key (401)',
          requestBody: {
            required: true,
            content: {
              [json]: {
                schema: {
                  allOf: [
                    ref('SiweProof'),
                    ref('KeyLimits'),
                    { type: 'object', properties: { label: { type: 'string' }, redeem_code: { type: 'string' }, ref_code: { type: 'string' } } },
                  ],
                },
              },
            },
          },
          responses: {
            201: ok('the key; its secret is shown only here', { type: 'object' }),
            400: error('VALIDATION_ERROR'),
            401: error('UNAUTHORIZED'),
            403: error('FORBIDDEN: a session, or a proof signed for another action'),
            429: error('RATE_LIMITED'),
          },
        },
        get: {
          summary: "list the wallet's keys (SIWE proof in the query, or a dashboard session)",
          security: [{}, sessionAuth],
          parameters: siweQuery,
          responses: { 200: ok('keys', { type: 'object', properties: { data: { type: 'array', items: ref('ApiKey') } } }), 401: error('UNAUTHORIZED') },
        },
      },
      '/v1/auth/keys/{key_id}': {
        patch: {
          summary:
            "change a key's limits (a field left out stays, null removes it): tightening with a dashboard session or a manage-keys proof; loosening only with a proof signed for loosen-key (403 otherwise, key unchanged)",
          security: [{}, sessionAuth],
          parameters: [{ name: 'key_id', in: 'path', required: true, schema: integer }],
          requestBody: { required: true, content: { [json]: { schema: { allOf: [ref('SiweProof'), ref('KeyLimits')] } } } },
          responses: {
            200: ok('the key as the list shows it', ref('ApiKey')),
            400: error('VALIDATION_ERROR'),
            401: error('UNAUTHORIZED'),
            403: error('FORBIDDEN: the change loosens the key'),
            404: error('NOT_FOUND'),
            409: error('CONFLICT: the limits kept changing meanwhile'),
          },
        },
        delete: {
          summary: 'revoke a key (SIWE proof in the body, or a dashboard session and no body)',
          security: [{}, sessionAuth],
          parameters: [{ name: 'key_id', in: 'path', required: true, schema: integer }],
          requestBody: { required: false, content: { [json]: { schema: ref('SiweProof') } } },
          responses: { 200: ok('revoked', { type: 'object' }), 401: error('UNAUTHORIZED'), 404: error('NOT_FOUND') },
        },
      },
      '/v1/chat/completions': {
        post: {
          summary: 'OpenAI chat completions, streaming or not; reserved before and billed after the provider call',
          description:
            'With an API key: billed against its wallet. Without an Authorization header, when the operator enabled payPerRequest: pay-per-request x402. ' +
            'The request is validated first (400, never an offer), then answered 402 with an x402 offer: the PAYMENT-REQUIRED header is always x402 v2, the body is v2 too unless topup.x402v1Body makes it x402 v1 for v1 clients; for its reservation rounded up to payPerRequest.minUsd. ' +
            'The same request sent again with PAYMENT-SIGNATURE (v2) or X-Payment (v1) is settled, credited once to the payer, and run billed against the payer\'s wallet; the unspent part stays in its balance (GET /v1/usage/{wallet}, key "x402 pay-per-request"). ' +
            'A replayed payment credits nothing more and runs only while its authorization is valid and the balance covers the request. ' +
            'The 402 also carries the x402 extensions sign-in-with-x (a wallet with a balance sends the signed challenge in the sign-in-with-x header instead of paying), bazaar (this route for discovery services) and payment-identifier (a retry under the same id is never paid or run twice: 409).',
          security: [{ bearer: [] }, { x402: [] }],
          requestBody: { required: true, content: { [json]: { schema: { type: 'object', required: ['model', 'messages'] } } } },
          responses: {
            200: ok(
              "the provider response (or text/event-stream); x-tollgate-charged-usdc (JSON) and x-tollgate-balance-usdc headers; the charge also in usage (and in a stream's usage chunk, when stream_options.include_usage asked for it) as cost (USD) and charged_usdc (micro-USDC), charge_deferred: true when billed later; paid requests add PAYMENT-RESPONSE and X-PAYMENT-RESPONSE",
              { type: 'object' },
            ),
            400: error('VALIDATION_ERROR; pay-per-request: INVALID_PAYMENT or PAYMENT_MISMATCH'),
            401: error('UNAUTHORIZED (also an expired key)'),
            402: error(
              'with a key: INSUFFICIENT_BALANCE (top up with POST /v1/topup) or KEY_LIMIT_EXCEEDED (the key spend limit; limit_usdc, spent_usdc, resets_at). Pay-per-request: the body is also an x402 PaymentRequired offer (accepts, PAYMENT-REQUIRED header, required_usdc, reserved_usdc; with payPerRequest.upto also upto_min_charge_usdc, the least an upto request that produces anything is charged) and error is PAYMENT_REQUIRED, PAYMENT_INSUFFICIENT (paid less than required_usdc), PAYMENT_REJECTED, PAYMENT_EXPIRED (a replay after its authorization expired or topup.maxTimeoutSeconds after its credit) or INSUFFICIENT_BALANCE (a replay the balance no longer covers), SIWX_REJECTED (a sign-in-with-x signature refused: reused, expired, not issued here, another domain, route or chain; the body says which)',
            ),
            403: error('MODEL_NOT_ALLOWED: the key may not use this model (allowed_models)'),
            409: error(
              'PAYMENT_IDENTIFIER_CONFLICT: the payment-identifier was used before by this payer (its request ran, is being paid for, or had another body); this payment was not settled; first_request_id and first_charged_usdc name the first request',
            ),
            429: error('RATE_LIMITED'),
            502: error('UPSTREAM_ERROR'),
            503: error(
              "PROVIDER_NOT_CONFIGURED (the model's provider is not set up on this gateway; nothing was charged; use another model), SERVICE_UNAVAILABLE, or with pay-per-request FACILITATOR_UNAVAILABLE (nothing settled, the request did not run) or PAYMENT_PENDING (sent, not confirmed yet: retry with the same payment)",
            ),
          },
        },
      },
      '/v1/embeddings': {
        post: {
          summary:
            "OpenAI's embeddings API for models of type embedding; reserved at a bound of the inputs' size before the call and billed at the provider's reported prompt tokens after it (with a key or pay-per-request, as chat)",
          description:
            "model, input (a string, an array of strings, an array of token ids, or an array of token-id arrays: at most 2048 inputs, 1 MiB per string, token ids whole numbers from 0 to 2147483647, a token array at most the model's contextLength, no empty input), " +
            'encoding_format (float, the default, or base64: little-endian float32), dimensions (a positive whole number up to 4096; inputs × dimensions, or × the native size of the model when none is named, at most 3145728), user. Other fields are 400s. A 2xx answer over 24 MiB from the provider is a 502 charged the prompt tokens it reported (x-tollgate-charged-usdc). A chat model is a 400 naming POST /v1/chat/completions.',
          security: [{ bearer: [] }, { x402: [] }],
          requestBody: { required: true, content: { [json]: { schema: { type: 'object', required: ['model', 'input'] } } } },
          responses: {
            200: ok(
              "OpenAI's embeddings list (object, data, model, usage: the prompt tokens billed); x-tollgate-charged-usdc and x-tollgate-balance-usdc headers as on chat",
              { type: 'object' },
            ),
            400: error('VALIDATION_ERROR (param names the input at fault); pay-per-request: INVALID_PAYMENT or PAYMENT_MISMATCH'),
            401: error('UNAUTHORIZED'),
            402: error('as POST /v1/chat/completions: INSUFFICIENT_BALANCE, KEY_LIMIT_EXCEEDED, or a pay-per-request offer'),
            403: error('MODEL_NOT_ALLOWED'),
            429: error('RATE_LIMITED'),
            502: error('UPSTREAM_ERROR: the provider failed, nothing charged; or its answer was over 24 MiB, charged as reported'),
            503: error('as POST /v1/chat/completions'),
          },
        },
      },
      '/v1/responses': {
        post: {
          summary:
            "OpenAI's Responses API: translated onto chat completions, so it is reserved, billed and refused exactly as chat is (with a key or pay-per-request); keyed responses are stored unless store is false",
          description:
            'input (a string, or messages with role user/assistant/system/developer and input_text/input_image/input_file parts, function_call and function_call_output items), instructions (a system message), ' +
            'function tools, tool_choice, max_output_tokens (the output bound, as max_tokens), temperature, top_p, parallel_tool_calls, text.format (json_object, json_schema), reasoning.effort, user, stream. ' +
            "With an API key and store not false (OpenAI's default), the billed Response is kept under the API key for responses.store.ttlSeconds (30 days by default), readable and continuable by that key only: previous_response_id prepends its input and output, item_reference items are replaced by the stored items, and both count in the reservation as if sent inline; a request that would expand past limits.chatBodyBytes is a 413; another key's (of the same wallet too), another wallet's, expired or unknown ids are 404. A response beyond a storage bound is delivered and billed with store: false (header x-tollgate-store: not-stored; reason=…). Pay-per-request keeps nothing (store: false; references are 400s). conversation, prompt and background are 400s. " +
            'Built-in tools (web_search, file_search, computer_use_preview, code_interpreter, image_generation, mcp…) and a non-empty include are 400s naming them. Streams use the Responses events (response.created … response.completed with usage); a provider failure mid-stream is an error event and response.failed, and nothing is charged.',
          security: [{ bearer: [] }, { x402: [] }],
          requestBody: { required: true, content: { [json]: { schema: { type: 'object', required: ['model', 'input'] } } } },
          responses: {
            200: ok(
              'a Response object (id resp_…, status completed or incomplete, output items, usage, store) or text/event-stream; x-tollgate-charged-usdc and x-tollgate-balance-usdc headers as on chat, and the charge in usage as on chat (also in response.completed); x-tollgate-store: stored or not-stored; reason=too_large|wallet_full|unavailable when storing was asked',
              { type: 'object' },
            ),
            400: error('VALIDATION_ERROR (param names the Responses field); pay-per-request: INVALID_PAYMENT or PAYMENT_MISMATCH'),
            401: error('UNAUTHORIZED'),
            402: error('as POST /v1/chat/completions: INSUFFICIENT_BALANCE, KEY_LIMIT_EXCEEDED, or a pay-per-request offer'),
            404: error('NOT_FOUND: previous_response_id or an item_reference names nothing this API key has stored (param names which); nothing reserved'),
            413: error(
              'PAYLOAD_TOO_LARGE: the body, or the conversation it expands to with its stored references, is over limits.chatBodyBytes (expanded_bytes, limit_bytes); nothing reserved',
            ),
            403: error('MODEL_NOT_ALLOWED'),
            429: error('RATE_LIMITED'),
            502: error('UPSTREAM_ERROR'),
            503: error('as POST /v1/chat/completions'),
          },
        },
      },
      '/v1/responses/{id}': {
        get: {
          summary: "A stored Response, as it was delivered (OpenAI's responses.retrieve)",
          description:
            "Only the API key that stored it. Another key's (of the same wallet too), another wallet's, expired, deleted and unknown ids are the same 404.",
          security: [{ bearer: [] }],
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: ok('the Response object', { type: 'object' }), 401: error('UNAUTHORIZED'), 404: error('NOT_FOUND'), 429: error('RATE_LIMITED') },
        },
        delete: {
          summary: "Deletes a stored Response and its items (OpenAI's responses.delete)",
          security: [{ bearer: [] }],
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            200: ok('{id, object: "response", deleted: true}', { type: 'object' }),
            401: error('UNAUTHORIZED'),
            404: error('NOT_FOUND'),
            429: error('RATE_LIMITED'),
          },
        },
      },
      '/v1/messages': {
        post: {
          summary: "Anthropic's Messages API (Claude Code, the Anthropic SDKs), streaming or not; reserved before and billed after the provider call",
          description:
            'The key as x-api-key or Authorization: Bearer. Models of an Anthropic provider get the request untranslated (each field handled as docs/api.md\'s table says: model, messages including mid-conversation system messages, system, max_tokens, stop_sequences, stream, temperature, top_p, top_k, tools, tool_choice, thinking, metadata, service_tier, context_management with clearing edits, output_config.effort, cache_control with ttl "5m", speed "standard", inference_geo "global", plus the provider\'s extraFields), with the client\'s price-neutral anthropic-beta values after the operator\'s (others not forwarded and named in x-tollgate-betas-dropped; priced ones refused), and the answer and events exactly as the provider sent them. ' +
            'Other models get it translated into chat completions (cache_control and signed thinking dropped, context_management dropped, thinking and output_config.effort only for a reasoning model, top_k only if the provider lists it in extraFields) and the answer translated back, with the billed usage in usage / message_delta. ' +
            "max_tokens is required; above the model's limit it is lowered to it (x-tollgate-max-tokens), with a thinking budget below it. With x-tollgate-fit-max-tokens: true (or a model's fitMaxTokens) a balance too small for max_tokens lowers it to what the balance and the key's limit cover, down to chat.fitMaxTokensFloor (x-tollgate-max-tokens-fitted). Server tools (web search, code execution), built-in tools, container, mcp_servers, one-hour cache writes, fast mode, pinned regions and compaction are refused: they are billed beyond the catalog's token prices. " +
            "A provider failure mid-stream is an `error` event and nothing is charged. 400, 401, 402 and 403 carry x-should-retry: false (except a 402 caused only by the wallet's own requests in flight, which carries Retry-After), as does a 502 relaying the provider's own 400-404 or 413; 429 and 503 carry Retry-After, except 503 PROVIDER_NOT_CONFIGURED (a configuration error: x-should-retry: false).",
          security: [{ anthropicKey: [] }, { bearer: [] }],
          requestBody: { required: true, content: { [json]: { schema: { type: 'object', required: ['model', 'max_tokens', 'messages'] } } } },
          responses: {
            200: {
              description:
                "an Anthropic message (or text/event-stream of Anthropic events); x-tollgate-charged-usdc (JSON) and x-tollgate-balance-usdc headers; the charge in usage (and message_delta's usage) as on chat",
              content: { [json]: { schema: { type: 'object' } } },
            },
            400: anthropicError('invalid_request_error: VALIDATION_ERROR, with param'),
            401: anthropicError('authentication_error: UNAUTHORIZED (a dashboard session is refused too)'),
            402: anthropicError('billing_error: INSUFFICIENT_BALANCE (balance_usdc, required_usdc) or KEY_LIMIT_EXCEEDED'),
            403: anthropicError('permission_error: MODEL_NOT_ALLOWED'),
            429: anthropicError('rate_limit_error: RATE_LIMITED'),
            502: anthropicError('api_error: UPSTREAM_ERROR, nothing charged'),
          },
        },
      },
      '/v1/messages/count_tokens': {
        post: {
          summary:
            "Anthropic's token count, estimated by the gateway: no provider call, nothing reserved or charged; counted against the wallet's chat rate limit",
          description:
            "The same body as POST /v1/messages without max_tokens. input_tokens is the o200k count of the system prompt, messages and tool definitions (images and documents at the model's partTokenBounds), raised by 25% for an Anthropic model; x-tollgate-usage-estimated: true.",
          security: [{ anthropicKey: [] }, { bearer: [] }],
          requestBody: { required: true, content: { [json]: { schema: { type: 'object', required: ['model', 'messages'] } } } },
          responses: {
            200: { description: '{"input_tokens": N}', content: { [json]: { schema: { type: 'object', properties: { input_tokens: { type: 'integer' } } } } } },
            400: anthropicError('invalid_request_error: VALIDATION_ERROR, with param'),
            401: anthropicError('authentication_error: UNAUTHORIZED'),
            403: anthropicError('permission_error: MODEL_NOT_ALLOWED'),
            429: anthropicError('rate_limit_error: RATE_LIMITED'),
          },
        },
      },
      '/v1/usage/{wallet}': {
        get: {
          summary: 'balance and per-key usage',
          security: [walletRead, sessionAuth, {}],
          parameters: [walletParam, ...siweQuery],
          responses: {
            200: ok('usage', { type: 'object' }),
            400: error('malformed wallet'),
            401: error('UNAUTHORIZED'),
            403: error('FORBIDDEN: a session of another wallet'),
          },
        },
      },
      '/v1/usage/{wallet}/daily': {
        get: {
          summary: 'usage per UTC day and API key (requests, tokens, micro-USDC charged) over the last `days` days, from running totals',
          security: [walletRead, sessionAuth, {}],
          parameters: [
            walletParam,
            { name: 'days', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 90, default: 30 } },
            ...siweQuery,
          ],
          responses: {
            200: ok('days without requests have no row', {
              type: 'object',
              properties: {
                wallet: { type: 'string' },
                days: integer,
                from: { type: 'string' },
                to: { type: 'string' },
                data: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      date: { type: 'string' },
                      api_key_id: integer,
                      requests: integer,
                      prompt_tokens: integer,
                      completion_tokens: integer,
                      charged_usdc: integer,
                    },
                  },
                },
              },
            }),
            400: error('malformed wallet or days'),
            401: error('UNAUTHORIZED'),
            403: error('FORBIDDEN: a session of another wallet'),
          },
        },
      },
      '/v1/auth/session': {
        post: {
          summary:
            'open a dashboard session with one SIWE proof signed for the sign-in action: a short-lived bearer token (ses-…) for usage and top-up history and for listing, revoking and tightening keys; never for chat, creating or loosening a key',
          requestBody: { required: true, content: { [json]: { schema: ref('SiweProof') } } },
          responses: {
            201: ok('the session token, shown only here', {
              type: 'object',
              properties: { token: { type: 'string' }, wallet: { type: 'string' }, expires_at: { type: 'string' }, expires_in: integer },
            }),
            401: error('UNAUTHORIZED'),
            429: error('RATE_LIMITED'),
          },
        },
        delete: {
          summary: 'end the session sent in Authorization: Bearer ses-…',
          security: [sessionAuth],
          responses: { 200: ok('ended', { type: 'object', properties: { revoked: { const: true } } }), 401: error('UNAUTHORIZED') },
        },
      },
      '/v1/auth/sessions': {
        delete: {
          summary: 'sign out everywhere: end every live session of the wallet of the session sent in Authorization: Bearer ses-… (that one included)',
          security: [sessionAuth],
          responses: {
            200: ok('how many sessions were ended', { type: 'object', properties: { revoked: integer, wallet: { type: 'string' } } }),
            401: error('UNAUTHORIZED'),
            429: error('RATE_LIMITED'),
          },
        },
      },
      '/v1/dashboard/config': {
        get: {
          summary: "what the dashboard page needs from this gateway's configuration: chains with their explorer URLs",
          responses: { 200: ok('page configuration', { type: 'object' }) },
        },
      },
      '/': {
        get: {
          summary: 'the wallet dashboard page (dashboard.enabled)',
          responses: { 200: { description: 'text/html', content: { 'text/html': { schema: { type: 'string' } } } } },
        },
      },
      '/dashboard/{file}': {
        get: {
          summary: "the dashboard's built assets (script, style)",
          parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: { description: 'a static file' }, 404: error('NOT_FOUND') },
        },
      },
      '/openapi.json': { get: { summary: 'this document', responses: { 200: ok('OpenAPI 3.1', { type: 'object' }) } } },
      '/llms.txt': {
        get: {
          summary: 'a short plain-text guide for agents',
          responses: { 200: { description: 'text/plain', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics, on the API port only when metrics.tokenEnv is set (bearer token); otherwise on the metrics port',
          responses: { 200: { description: 'text/plain; version=0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
    },
  };
}
