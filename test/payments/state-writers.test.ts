import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

// A payment's state is written only by src/payments/states.ts (its guarded transition and the
// columns of a new row), and by the migrations that create and back-fill the columns. Read from
// each file's syntax tree: a Kysely `.set({...})` / `.values({...})` on updateTable/insertInto('payments')
// naming a state column, or raw SQL `update payments set <state column> =` in any literal.
const STATE_COLUMNS = new Set(['state', 'status', 'upto_state', 'release_kind']);
const ALLOWED = ['src/payments/states.ts', 'src/storage/migrations/'];
const RAW_WRITE = /\bupdate\s+payments\s+set\b[^;]*?\b(state|status|upto_state|release_kind)\s*=/i;

export function stateWritesIn(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const isPaymentsTarget = (call: ts.CallExpression) => {
    const callee = call.expression;
    const arg = call.arguments[0];
    return (
      ts.isPropertyAccessExpression(callee) &&
      (callee.name.text === 'updateTable' || callee.name.text === 'insertInto') &&
      arg !== undefined &&
      ts.isStringLiteralLike(arg) &&
      /^payments(\s+as\s+\w+)?$/.test(arg.text.trim())
    );
  };
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && isPaymentsTarget(node)) {
      // Up the chain: each `.set(...)`/`.values(...)` applied to this statement.
      for (let up: ts.Node = node; up.parent && (ts.isPropertyAccessExpression(up.parent) || ts.isCallExpression(up.parent)); up = up.parent) {
        const call = up.parent;
        if (!ts.isCallExpression(call) || !ts.isPropertyAccessExpression(call.expression)) continue;
        if (call.expression.name.text !== 'set' && call.expression.name.text !== 'values') continue;
        const arg = call.arguments[0];
        if (!arg || !ts.isObjectLiteralExpression(arg)) continue;
        for (const p of arg.properties) {
          const name = p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : null;
          if (name && STATE_COLUMNS.has(name)) found.push(`${file}:${lineOf(p)}: writes payments.${name}`);
        }
      }
    }
    if (ts.isStringLiteralLike(node) || ts.isTemplateExpression(node)) {
      const literal = ts.isTemplateExpression(node) ? node.head.text + node.templateSpans.map((s) => `?${s.literal.text}`).join('') : node.text;
      const m = RAW_WRITE.exec(literal);
      if (m) found.push(`${file}:${lineOf(node)}: writes payments.${m[1]} in SQL`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('a payment state is written only through src/payments/states.ts', () => {
  test('no file of src/ outside states.ts and the migrations writes state, status, upto_state or release_kind', () => {
    const root = process.cwd();
    const files = readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts'))
      .map((e) => relative(root, join(e.parentPath, e.name)).split('\\').join('/'))
      .filter((f) => !ALLOWED.some((a) => f.startsWith(a)));
    assert.ok(files.includes('src/payments/payment-store.ts'));
    assert.deepEqual(files.flatMap((f) => stateWritesIn(f, readFileSync(join(root, f), 'utf8'))), []);
  });

  test('the check sees a planted write of each kind, so it can fail', () => {
    const planted = [
      "await db.updateTable('payments').set({ status: 'failed', failure_reason: r }).where('id', '=', id).execute();",
      "await trx.updateTable('payments').set({ tx_hash: h }).where('id', '=', id).set({ upto_state: 'settled' }).execute();",
      "await db.insertInto('payments').values({ id, state: 'credited' }).execute();",
      "await sql`update payments set release_kind = ${k} where id = ${id}`.execute(db);",
    ].join('\n');
    assert.deepEqual(stateWritesIn('src/x.ts', planted), [
      'src/x.ts:1: writes payments.status',
      'src/x.ts:2: writes payments.upto_state',
      'src/x.ts:3: writes payments.state',
      'src/x.ts:4: writes payments.release_kind in SQL',
    ]);
  });

  test('reads, other tables and other columns are not writes', () => {
    const harmless = [
      "await db.updateTable('payments').set({ tx_hash: null, updated_at: now }).where('state', '=', 'settling').execute();",
      "await db.updateTable('reservations').set({ status: 'settled' }).execute();",
      "const q = 'select status from payments where state = ?';",
    ].join('\n');
    assert.deepEqual(stateWritesIn('src/x.ts', harmless), []);
  });
});
