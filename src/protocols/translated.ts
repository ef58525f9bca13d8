/**
 * A request a provider cannot serve faithfully, returned as a value: the edge turns it into a 400
 * naming `field` (a JSON path into the client's request, such as `messages[2].content[0]`), so the
 * client learns what to change instead of getting a silently different answer.
 */
export interface Refusal {
  ok: false;
  field: string;
  message: string;
}

export type Translated<T> = { ok: true; value: T } | Refusal;

export function refuse(field: string, message: string): Refusal {
  return { ok: false, field, message };
}
