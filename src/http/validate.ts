import type { z } from 'zod';
import { badRequest } from '../refusal.ts';

/** Parses a body or query with zod; every problem is named with its field in one 400 message. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, what = 'request body'): z.infer<S> {
  if (input === undefined || input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw badRequest(`${what} must be a JSON object`);
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const parts = result.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message));
  throw badRequest(`invalid ${what}: ${parts.join('; ')}`);
}
