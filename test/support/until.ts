/**
 * Polls `condition` until it holds. The deadline only keeps a broken build from hanging the suite
 * (the old code waited for ever); it is not a performance assertion.
 */
export async function until(condition: () => boolean | Promise<boolean>, what = 'condition', timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
