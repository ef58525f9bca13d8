/**
 * Parses a USD amount written as decimal text ("5", "0.25", "-3.5") into integer micro-USDC
 * without going through a float. More than 6 decimals cannot be represented and is refused.
 */
export function usdToMicro(text: string): number {
  const m = /^(-)?(\d+)(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!m) throw new RangeError(`"${text}" is not a USD amount with at most 6 decimals`);
  const micro = BigInt(m[2]!) * 1_000_000n + BigInt((m[3] ?? '').padEnd(6, '0'));
  const value = Number(m[1] ? -micro : micro);
  if (!Number.isSafeInteger(value)) throw new RangeError(`"${text}" is too large`);
  return value;
}

export function microToUsd(micro: number): string {
  const sign = micro < 0 ? '-' : '';
  const abs = Math.abs(micro);
  return `${sign}${Math.floor(abs / 1_000_000)}.${String(abs % 1_000_000).padStart(6, '0')}`;
}
