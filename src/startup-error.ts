/**
 * A start-up failure the operator fixes (a port in use, an unreachable or misplaced database): its
 * message is one line naming what to fix, and the CLI prints it without a stack and exits 2.
 */
export class StartupError extends Error {
  override name = 'StartupError';
}
