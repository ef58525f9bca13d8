/**
 * Exact decimal arithmetic for prices, on bigint fractions. Prices are configured as decimal strings
 * ("0.15" USD per 1M tokens, which is exactly 0.15 micro-USDC per token) and must never pass
 * through a float on their way to a charge.
 */
export interface Fraction {
  num: bigint;
  den: bigint;
}

export function parseDecimal(text: string): Fraction {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!m) throw new RangeError(`not a non-negative decimal: ${JSON.stringify(text)}`);
  const frac = m[2] ?? '';
  return { num: BigInt(m[1]! + frac), den: 10n ** BigInt(frac.length) };
}

export const ZERO: Fraction = { num: 0n, den: 1n };
export const ONE: Fraction = { num: 1n, den: 1n };

export function add(a: Fraction, b: Fraction): Fraction {
  return { num: a.num * b.den + b.num * a.den, den: a.den * b.den };
}

export function mul(a: Fraction, b: Fraction): Fraction {
  return { num: a.num * b.num, den: a.den * b.den };
}

export function fromInt(n: number | bigint): Fraction {
  return { num: BigInt(n), den: 1n };
}

/** The larger of two fractions (compared exactly, by cross-multiplying: denominators are positive). */
export function max(a: Fraction, b: Fraction): Fraction {
  return a.num * b.den >= b.num * a.den ? a : b;
}

/** The smallest integer ≥ the fraction (all our fractions are non-negative). */
export function ceil(a: Fraction): bigint {
  return (a.num + a.den - 1n) / a.den;
}

/** For display only (prices in /v1/models); never for money arithmetic. */
export function toNumber(a: Fraction): number {
  const whole = a.num / a.den;
  const rest = a.num % a.den;
  return Number(whole) + Number((rest * 10n ** 12n) / a.den) / 1e12;
}

/** 1 + percent/100, for markups. */
export function markupFactor(percent: string): Fraction {
  return add(ONE, mul(parseDecimal(percent), { num: 1n, den: 100n }));
}
