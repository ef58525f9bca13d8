#!/usr/bin/env node
// The money tables are written only from src/ledger/ (docs/development.md): every write
// of reservations, wallets, ledger_entries, request_usage, usage_totals, key_spend or usage_daily
// anywhere else in src/ is a violation. Migrations (src/storage/migrations/) are allowed: they
// create the tables and back-fill them once.
//
// What is recognised, read from each file's syntax tree with TypeScript's parser (comments never
// count): Kysely writes, `.insertInto|updateTable|deleteFrom|replaceInto|mergeInto('<table>')`
// (an alias `'<table> as t'` too), and raw SQL in any string or template literal (`sql` tags
// included), `INSERT [OR …] INTO|REPLACE INTO|UPDATE|DELETE FROM <table>`, in any case. A table
// name built at run time cannot be seen; do not build one.
//   node scripts/money-writers.mjs          list the violations; exit 1 if there is one
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export const MONEY_TABLES = ['reservations', 'wallets', 'ledger_entries', 'request_usage', 'usage_totals', 'key_spend', 'usage_daily'];
/** Where money may be written, as paths relative to the repository root. */
export const ALLOWED = ['src/ledger/', 'src/storage/migrations/'];

const TABLE = `(${MONEY_TABLES.join('|')})`;
const KYSELY_WRITES = new Set(['insertInto', 'updateTable', 'deleteFrom', 'replaceInto', 'mergeInto']);
const KYSELY_TARGET = new RegExp(`^${TABLE}(\\s+as\\s+\\w+)?$`, 'i');
const RAW_WRITE = new RegExp(`\\b(insert\\s+(?:or\\s+\\w+\\s+)?into|replace\\s+into|update|delete\\s+from)\\s+${TABLE}\\b`, 'gi');

/**
 * The money writes in one file's text: `{file, line, table, what}` for each. `file` is the path
 * relative to the repository root, which decides whether it is allowed (see findMoneyWriters).
 */
export function moneyWritesIn(file, text) {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found = [];
  const at = (node, table, what) =>
    found.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1, table: table.toLowerCase(), what });
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && KYSELY_WRITES.has(node.expression.name.text)) {
      const arg = node.arguments[0];
      const target = arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg)) ? KYSELY_TARGET.exec(arg.text.trim()) : null;
      if (target) at(node, target[1], `${node.expression.name.text}('${arg.text}')`);
    }
    const literal = literalText(node);
    if (literal !== null) {
      for (const m of literal.matchAll(RAW_WRITE)) at(node, m[2], m[0].replace(/\s+/g, ' '));
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The text of a string or template literal (substitutions as `?`), or null for anything else. */
function literalText(node) {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) return node.head.text + node.templateSpans.map((s) => `?${s.literal.text}`).join('');
  return null;
}

export const isAllowed = (file) => ALLOWED.some((prefix) => file.startsWith(prefix));

/** Every money write under `root`/src outside the allowed folders: empty when the rule holds. */
export function findMoneyWriters(root = ROOT) {
  const src = join(root, 'src');
  const files = readdirSync(src, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) =>
      relative(root, join(e.parentPath ?? e.path, e.name))
        .split('\\')
        .join('/'),
    )
    .sort();
  return files.filter((f) => !isAllowed(f)).flatMap((f) => moneyWritesIn(f, readFileSync(join(root, f), 'utf8')));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const violations = findMoneyWriters();
  for (const v of violations) console.log(`${v.file}:${v.line}: writes ${v.table} (${v.what}) outside ${ALLOWED.join(' or ')}`);
  console.log(
    violations.length === 0 ? 'money tables are written only from src/ledger/ (and migrations)' : `${violations.length} money write(s) outside src/ledger/`,
  );
  process.exit(violations.length === 0 ? 0 : 1);
}
