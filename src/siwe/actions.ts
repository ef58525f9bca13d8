/**
 * What a SIWE proof may be used for. A proof is bound to one action by its statement: the
 * sentence the wallet shows the person signing. The statement is the check, not an EIP-4361
 * `resources` URI, because the statement is the only part of the message a person reads: binding by
 * a resource would let a page show "Sign in" while the signature creates a key. The message must
 * carry the statement exactly (docs/api.md lists them; GET /v1/auth/siwe returns them).
 *
 * An endpoint needs an operation; each action permits a few operations, and a dashboard session
 * permits the harmless ones (SESSION_OPERATIONS). Nothing that lets a key spend more (creating one,
 * loosening one) is ever permitted by a session or by a proof signed for something else.
 */

/** What an endpoint does with the wallet's authority. */
export type Operation = 'open-session' | 'read' | 'list-keys' | 'revoke-key' | 'tighten-key' | 'create-key' | 'loosen-key';

/** What a proof was signed for; each has one statement. */
export type SiweAction = 'sign-in' | 'manage-keys' | 'read-usage' | 'create-key' | 'loosen-key';

interface ActionRule {
  /** The statement to sign; the sign-in one names the session length. */
  statement(sessionMinutes: number): string;
  /** Statements of clients that sign no action (older clients), accepted for the same (harmless) operations. */
  legacy?: readonly string[];
  permits: readonly Operation[];
}

const CANNOT_SPEND_MORE = "This signature cannot create a key or loosen a key's limits.";

export const ACTIONS: Readonly<Record<SiweAction, ActionRule>> = {
  'sign-in': {
    statement: (minutes) =>
      `Sign in to the Tollgate dashboard for ${minutes} minutes to read usage and top-ups, and list, revoke or tighten API keys. ${CANNOT_SPEND_MORE}`,
    permits: ['open-session'],
  },
  'manage-keys': {
    statement: () => `List, revoke or tighten my Tollgate API keys, and read usage and top-ups. ${CANNOT_SPEND_MORE}`,
    legacy: ['Manage my Tollgate API keys'],
    permits: ['read', 'list-keys', 'revoke-key', 'tighten-key'],
  },
  'read-usage': {
    statement: () => 'Read my Tollgate usage and top-ups.',
    legacy: ['Read my Tollgate usage', 'Read my Tollgate top-ups'],
    permits: ['read'],
  },
  'create-key': {
    statement: () => "Create an API key that can spend this wallet's balance.",
    permits: ['create-key'],
  },
  'loosen-key': {
    statement: () => "Change an API key's limits, including loosening them: a higher or no spend cap, more models, a later or no expiry.",
    // A change may tighten some limits while it loosens others.
    permits: ['loosen-key', 'tighten-key'],
  },
};

/** What a dashboard session may do: read, and make keys less able to spend. Never create or loosen. */
export const SESSION_OPERATIONS: readonly Operation[] = ['read', 'list-keys', 'revoke-key', 'tighten-key'];

/** The action a client should sign for an operation (the least that permits it). */
const ACTION_FOR: Readonly<Record<Operation, SiweAction>> = {
  'open-session': 'sign-in',
  read: 'read-usage',
  'list-keys': 'manage-keys',
  'revoke-key': 'manage-keys',
  'tighten-key': 'manage-keys',
  'create-key': 'create-key',
  'loosen-key': 'loosen-key',
};

const WHAT: Readonly<Record<Operation, string>> = {
  'open-session': 'opening a dashboard session',
  read: 'reading usage and top-ups',
  'list-keys': 'listing API keys',
  'revoke-key': 'revoking an API key',
  'tighten-key': "tightening an API key's limits",
  'create-key': 'creating an API key',
  'loosen-key': "loosening an API key's limits (raising or removing a spend cap, widening or removing a model list, extending or removing an expiry)",
};

/** The statements a client signs, by action, as GET /v1/auth/siwe returns them. */
export function actionStatements(sessionMinutes: number): Record<SiweAction, string> {
  return Object.fromEntries(Object.entries(ACTIONS).map(([name, rule]) => [name, rule.statement(sessionMinutes)])) as Record<SiweAction, string>;
}

/** The operations a signed statement permits (none for a missing or unknown statement). */
export function permittedBy(statement: string | undefined, sessionMinutes: number): readonly Operation[] {
  if (statement === undefined) return [];
  for (const rule of Object.values(ACTIONS)) {
    if (rule.statement(sessionMinutes) === statement || rule.legacy?.includes(statement)) return rule.permits;
  }
  return [];
}

/** What to sign for `operation`, in the words of a refusal: the exact statement and where to find it. */
export function signFor(operation: Operation, sessionMinutes: number): string {
  const action = ACTION_FOR[operation];
  return `${WHAT[operation]} needs a fresh SIWE proof for the action "${action}": sign a message whose statement is exactly "${ACTIONS[action].statement(sessionMinutes)}" (GET /v1/auth/siwe lists the statement of every action)`;
}
