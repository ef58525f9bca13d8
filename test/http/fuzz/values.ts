import fc from 'fast-check';

/**
 * Building blocks of the fuzz run: values of every JSON type and shape a parser or a validator can
 * trip over, and request bodies written as raw text, so a body can carry what JSON.stringify never
 * writes (duplicated keys, `__proto__` keys, number literals past double range, broken syntax).
 */

/** Keys that have a meaning on a JavaScript object: a lookup by such a key must not find a prototype member. */
export const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__'];

/** Number literals that are valid JSON but not a usable count: huge, negative, fractional, exponent forms. */
const NUMBER_LITERALS = [
  '0',
  '-0',
  '-1',
  '1.5',
  '1e3',
  '1E400',
  '-1e400',
  '9007199254740993',
  '123456789012345678901234567890',
  '0.0000001',
  '4096',
  '4097',
  '16',
  '17',
];

/** Strings that look like numbers or special values to a careless parser. */
const TRICKY_STRINGS = [
  '',
  ' ',
  'NaN',
  'Infinity',
  '-Infinity',
  'null',
  'true',
  '0x10',
  '1e309',
  '-1',
  '4096',
  'undefined',
  '[object Object]',
  '\u0000',
  '\ud800',
  '😀',
  'e\u0301',
  '\u202e',
  '<script>',
  "'; drop table wallets; --",
  '%s%n',
  '../../etc/passwd',
];

export const trickyString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY_STRINGS, ...PROTOTYPE_KEYS) },
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  // Long, within the limits: the bound and the tokenizer see real sizes.
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', 'é', '😀', '{"', ' '), fc.integer({ min: 1_000, max: 60_000 })).map(([c, n]) => c.repeat(n)) },
);

/** A number as JavaScript holds it (NaN and infinities serialize as null, which is a case too). */
export const trickyNumber = fc.oneof(
  fc.integer({ min: -5, max: 20 }),
  fc.constantFrom(0, -0, 1e308, -1e308, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 1e21, 0.5, NaN, Infinity, 4096, 4097, 100_001),
  fc.double(),
);

/** Anything: the value a field gets when the client sends the wrong type. */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(null, true, false, {}, [], [null], { '': '' }) },
  { weight: 2, arbitrary: trickyNumber },
  { weight: 2, arbitrary: trickyString },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 5 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom(...PROTOTYPE_KEYS, 'type', 'role', 'a'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) },
);

/**
 * A JSON value written as text. `raw` pieces are inserted verbatim; `pairs` may repeat a key and
 * `__proto__` stays an ordinary key (as JSON.parse sees it, not as an object literal would).
 */
export type Json = { raw: string } | { value: unknown } | { pairs: [string, Json][] } | { items: Json[] };

export function writeJson(j: Json): string {
  if ('raw' in j) return j.raw;
  if ('items' in j) return `[${j.items.map(writeJson).join(',')}]`;
  if ('pairs' in j) return `{${j.pairs.map(([k, v]) => `${JSON.stringify(k)}:${writeJson(v)}`).join(',')}}`;
  return JSON.stringify(j.value) ?? 'null';
}

export const value = (v: unknown): Json => ({ value: v });

/** Field values as text, including what JSON.stringify cannot produce. */
export const junkJson: fc.Arbitrary<Json> = fc.oneof(
  { weight: 6, arbitrary: junk.map(value) },
  { weight: 1, arbitrary: fc.constantFrom(...NUMBER_LITERALS).map((raw) => ({ raw })) },
  { weight: 1, arbitrary: fc.nat({ max: 3000 }).map((d) => ({ raw: '['.repeat(d) + ']'.repeat(d) })) },
  { weight: 1, arbitrary: fc.nat({ max: 3000 }).map((d) => ({ raw: '{"a":'.repeat(d) + '1' + '}'.repeat(d) })) },
);

/**
 * An object of named fields, each either its sensible value or a mutation, plus unknown fields,
 * prototype keys and duplicated keys (the last one wins in JSON.parse: the validator must see that one).
 */
export function objectJson(fields: Record<string, fc.Arbitrary<Json>>, opts: { maxUnknown?: number; presentPercent?: number } = {}): fc.Arbitrary<Json> {
  const entries = Object.entries(fields);
  const presentPercent = opts.presentPercent ?? 50;
  return fc
    .record({
      // Shrinks towards absent fields, so a counterexample keeps only the fields that matter.
      present: fc.array(
        fc.nat({ max: 99 }).map((n) => n >= 100 - presentPercent),
        { minLength: entries.length, maxLength: entries.length },
      ),
      values: fc.tuple(...entries.map(([, a]) => a)),
      extra: rarely(
        fc.array(fc.tuple(fc.oneof(fc.constantFrom(...PROTOTYPE_KEYS), fc.string({ maxLength: 12 })), junkJson), {
          minLength: 1,
          maxLength: opts.maxUnknown ?? 2,
        }),
        [],
      ),
      duplicate: rarely(fc.nat({ max: entries.length - 1 }), null),
      duplicateValue: junkJson,
      shuffle: fc.boolean(),
    })
    .map(({ present, values, extra, duplicate, duplicateValue, shuffle }) => {
      const pairs: [string, Json][] = [];
      entries.forEach(([name], i) => {
        // The first two fields always: a body must get past the first checks to reach the deep ones.
        if (present[i] || i < 2) pairs.push([name, values[i]!]);
      });
      pairs.push(...extra);
      if (duplicate !== null) pairs.unshift([entries[duplicate]![0], duplicateValue]);
      if (shuffle) pairs.reverse();
      return { pairs };
    });
}

/** `arb` one time in six, else `otherwise`. */
const rarely = <T, U>(arb: fc.Arbitrary<T>, otherwise: U): fc.Arbitrary<T | U> =>
  fc.oneof({ weight: 5, arbitrary: fc.constant(otherwise) }, { weight: 1, arbitrary: arb });

/** Well-formed JSON that is not what the route wants, or text that is not JSON at all. */
export const otherBodyText: fc.Arbitrary<string> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.constantFrom(
    '',
    '{',
    '{"model":',
    '{"a":1,}',
    '[1,2',
    'nul',
    '\ufeff{}',
    '{"__proto__":{"x":1}}',
    '{"constructor":{"prototype":{"x":1}}}',
    '{"a":1}{"b":2}',
    '\u0000',
    '{"a":"\\ud800"}',
    '{"a":"\\u0000"}',
    '1e99999',
    '"just a string"',
  ),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
);

/** Printable header text (what Node lets a client send), some of it long. */
export const headerText = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 120 }),
  fc.nat({ max: 8_000 }).map((n) => 'x'.repeat(n)),
);

/** Percent-encoding of any string, lone surrogates included (as U+FFFD, the way a browser sends them). */
export const encodeText = (s: string) => encodeURIComponent(s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
