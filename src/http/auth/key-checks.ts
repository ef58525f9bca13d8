import type { KeyRow } from '../../keys/api-keys.ts';
import { ApiError } from '../../refusal.ts';

/** 403 unless the key's model list (if it has one) names the model the request resolved to. */
export function assertModelAllowed(key: KeyRow, modelId: string): void {
  if (key.allowed_models === null || key.allowed_models.includes(modelId)) return;
  throw new ApiError(
    403,
    'MODEL_NOT_ALLOWED',
    `this API key may use only ${key.allowed_models.join(', ')}, not ${modelId}; use one of those, or ask the wallet owner to add the model (PATCH /v1/auth/keys/${key.id})`,
    { allowed_models: key.allowed_models },
  );
}
