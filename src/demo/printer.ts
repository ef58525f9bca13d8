/**
 * The demo's output: one line per step with its result and how long it took, so a newcomer sees
 * what happens and where the time goes. Colour only on a terminal.
 */
export interface Printer {
  step(label: string): { ok(detail?: string): void };
  detail(text: string): void;
  title(text: string): void;
}

export function createPrinter(out: NodeJS.WriteStream = process.stdout): Printer {
  const tty = Boolean(out.isTTY);
  const paint = (code: number, text: string) => (tty ? `\x1b[${code}m${text}\x1b[0m` : text);
  return {
    step(label) {
      const started = Date.now();
      out.write(`${paint(36, '→')} ${label}\n`);
      const took = () => paint(2, `(${((Date.now() - started) / 1000).toFixed(2)}s)`);
      return {
        ok(detail) {
          out.write(`  ${paint(32, 'ok')} ${took()}${detail ? `\n    ${detail.split('\n').join('\n    ')}` : ''}\n`);
        },
      };
    },
    detail(text) {
      out.write(`    ${text.split('\n').join('\n    ')}\n`);
    },
    title(text) {
      out.write(`\n${paint(1, text)}\n`);
    },
  };
}
