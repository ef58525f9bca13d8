import type { TopupEvent } from '../gateway-client/topup-client.ts';

/**
 * Shared by `tollgate wallet` (src/cli/) and the demo (src/demo/), so it lives in neither: the CLI
 * runs the demo, and the demo reaching back into cli/ made the two folders import each other.
 *
 * Progress for waits the user cannot see (a payment settling on chain). On a terminal it redraws
 * one line with the elapsed time; elsewhere (CI, pipes, agents) it prints a line every few seconds.
 */
export interface Progress {
  update(text: string): void;
  done(text?: string): void;
}

export function startProgress(text: string, out: NodeJS.WriteStream = process.stderr): Progress {
  const started = Date.now();
  let label = text;
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)}s`;
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let frame = 0;
  const draw = () => {
    if (out.isTTY) out.write(`\r\x1b[2K${frames[frame++ % frames.length]} ${label} (${elapsed()})`);
    else out.write(`  … ${label} (${elapsed()})\n`);
  };
  if (!out.isTTY) out.write(`  … ${label}\n`);
  const timer = setInterval(draw, out.isTTY ? 100 : 5_000);
  timer.unref();
  return {
    update(next) {
      label = next;
      if (!out.isTTY) out.write(`  … ${label}\n`);
    },
    done(final) {
      clearInterval(timer);
      if (out.isTTY) out.write('\r\x1b[2K');
      if (final) out.write(`${final} (${elapsed()})\n`);
    },
  };
}

/** Turns top-up events into one progress line on stderr (stdout stays clean for --json). */
export function topupProgress(indent = '', out: NodeJS.WriteStream = process.stderr) {
  let progress: Progress | undefined;
  return {
    on(event: TopupEvent) {
      if (event.phase === 'offer') {
        const method = event.offer.extra?.assetTransferMethod ?? 'eip3009';
        const name = (event.offer.extra?.name as string | undefined) ?? event.offer.asset;
        out.write(
          `${indent}paying ${event.offer.amount} units of ${name} (${event.offer.asset}, ${method}) on ${event.offer.network} to ${event.offer.payTo}\n`,
        );
        progress = startProgress('signing the payment', out);
      } else if (event.phase === 'settling') {
        progress?.update('waiting for the payment to settle on chain');
      } else if (event.phase === 'pending') {
        progress?.update(`sent (${event.transaction ?? 'transaction not known yet'}); waiting for confirmation`);
      }
    },
    finish() {
      progress?.done();
    },
  };
}
