import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

// A payment's state is written only by src/payments/states.ts (its guarded transition and the
// columns of a new row), and by the migrations that create and back-fill the columns. Read from
// each file's syntax tree: a Kysely `.set(...)` / `.values(...)` on updateTable/insertInto('payments')
// whose argument is not an object literal free of the state columns (a column-value pair, a
// variable, a callback or a spread could hide one), or raw SQL in any literal that updates
// payments setting a state column or inserts into payments with one in its column list.
const STATE_COLUMNS = new Set(['state', 'status', 'upto_state', 'release_kind']);
const ALLOWED = ['src/payments/states.ts', 'src/storage/migrations/'];
const TABLE = String.raw`["\x60]?payments["\x60]?(?:\s+(?:as\s+)?\w+)?`;
const RAW_UPDATE = new RegExp(String.raw`\bupdate\s+${TABLE}\s+set\b((?:(?!\bwhere\b)[^;])*)`, 'i');
const RAW_INSERT = new RegExp(String.raw`\binsert\s+into\s+${TABLE}\s*\(([^)]*)\)`, 'i');
const SET_COLUMN = /(?:^|[\s,])["`]?(?:\w+["`]?\.["`]?)?(state|status|upto_state|release_kind)["`]?\s*=/i;
/** A column as Kysely names it, maybe qualified by the table's alias ('p.status'). */
const columnOf = (name: string) => name.replace(/^\w+\./, '');
const unquoted = (column: string) => columnOf(column.trim().replace(/["`]/g, '').toLowerCase());

function rawStateWrite(literal: string): string | null {
  const update = RAW_UPDATE.exec(literal);
  const set = update && SET_COLUMN.exec(update[1] ?? '');
  if (set?.[1]) return set[1].toLowerCase();
  const insert = RAW_INSERT.exec(literal);
  return (
    (insert?.[1] ?? '')
      .split(',')
      .map(unquoted)
      .find((c) => STATE_COLUMNS.has(c)) ?? null
  );
}

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
        if (!arg || !ts.isObjectLiteralExpression(arg)) {
          found.push(
            `${file}:${lineOf(call.expression.name)}: writes payments through ${call.expression.name.text}(${arg ? arg.getText(source).slice(0, 40) : ''})`,
          );
          continue;
        }
        for (const p of arg.properties) {
          // states.ts's stateColumns() is how a new row gets its state columns; any other spread could carry one.
          const fromStates = ts.isSpreadAssignment(p) && ts.isCallExpression(p.expression) && p.expression.expression.getText(source) === 'stateColumns';
          if (ts.isSpreadAssignment(p) && !fromStates) found.push(`${file}:${lineOf(p)}: writes payments through a spread`);
          const name = p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? columnOf(p.name.text) : null;
          if (name && STATE_COLUMNS.has(name)) found.push(`${file}:${lineOf(p)}: writes payments.${name}`);
        }
      }
    }
    if (ts.isStringLiteralLike(node) || ts.isTemplateExpression(node)) {
      const literal = ts.isTemplateExpression(node) ? node.head.text + node.templateSpans.map((s) => `?${s.literal.text}`).join('') : node.text;
      const column = rawStateWrite(literal);
      if (column) found.push(`${file}:${lineOf(node)}: writes payments.${column} in SQL`);
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
    assert.deepEqual(
      files.flatMap((f) => stateWritesIn(f, readFileSync(join(root, f), 'utf8'))),
      [],
    );
  });

  test('the check sees a planted write of each kind, so it can fail', () => {
    const planted = [
      "await db.updateTable('payments').set({ status: 'failed', failure_reason: r }).where('id', '=', id).execute();",
      "await trx.updateTable('payments').set({ tx_hash: h }).where('id', '=', id).set({ upto_state: 'settled' }).execute();",
      "await db.insertInto('payments').values({ id, state: 'credited' }).execute();",
      'await sql`update payments set release_kind = ${k} where id = ${id}`.execute(db);',
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
      "await sql`update payments set tx_hash = ${h} where state = 'submitted'`.execute(db);",
      'await sql`insert into payments (id, tx_hash) values (${id}, ${h})`.execute(db);',
      "await db.insertInto('payments').values({ id, ...stateColumns('pending') }).execute();",
    ].join('\n');
    assert.deepEqual(stateWritesIn('src/x.ts', harmless), []);
  });
});
